/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI, ext4 and
/// LevelDB, and its masked form (FORMAT.md §1.3 "Checksums").
///
/// Software slicing-by-8: eight 256-entry tables, eight bytes per step.
public enum CRC32C {
    static let tables: [[UInt32]] = {
        var tables = [[UInt32]](repeating: [UInt32](repeating: 0, count: 256), count: 8)
        for n in 0..<256 {
            var crc = UInt32(n)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            tables[0][n] = crc
        }
        for n in 0..<256 {
            var crc = tables[0][n]
            for k in 1..<8 {
                crc = tables[0][Int(crc & 0xFF)] ^ (crc >> 8)
                tables[k][n] = crc
            }
        }
        return tables
    }()

    /// Flattened copy of ``tables`` for the hot loop, in memory of its own that lives as
    /// long as the process (reading an array retained and released it on every call, a
    /// large part of a checksum of a short record). `nonisolated(unsafe)`: filled once by
    /// the lazy initializer, before any reader can see it, and never written again.
    nonisolated(unsafe) private static let flat: UnsafeBufferPointer<UInt32> = {
        let memory = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: 8 * 256)
        _ = memory.initialize(from: tables.joined())
        return UnsafeBufferPointer(memory)
    }()

    /// Extends `crc` (the value returned for the bytes before) with `bytes`.
    public static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var c = ~crc
        var index = 0
        let count = bytes.count
        let t = flat
        while count - index >= 8 {
            let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            let low = UInt32(truncatingIfNeeded: word) ^ c
            let high = UInt32(truncatingIfNeeded: word >> 32)
            c = t[7 * 256 + Int(low & 0xFF)] ^ t[6 * 256 + Int((low >> 8) & 0xFF)]
                ^ t[5 * 256 + Int((low >> 16) & 0xFF)] ^ t[4 * 256 + Int(low >> 24)]
                ^ t[3 * 256 + Int(high & 0xFF)] ^ t[2 * 256 + Int((high >> 8) & 0xFF)]
                ^ t[1 * 256 + Int((high >> 16) & 0xFF)] ^ t[Int(high >> 24)]
            index += 8
        }
        while index < count {
            c = t[Int((c ^ UInt32(bytes[index])) & 0xFF)] ^ (c >> 8)
            index += 1
        }
        return ~c
    }

    public static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 { update(0, bytes) }

    public static func checksum(_ bytes: [UInt8]) -> UInt32 { bytes.withUnsafeBytes { update(0, $0) } }

    public static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 { bytes.withUnsafeBytes { update(0, $0) } }

    /// Masking constant (FORMAT.md §1.3), the one LevelDB uses.
    public static let maskDelta: UInt32 = 0xA282_EAD8

    /// Masked CRC: rotate right by 15 bits and add a constant, so that a checksum of data
    /// that itself contains checksums stays strong.
    @inline(__always) public static func mask(_ crc: UInt32) -> UInt32 {
        ((crc >> 15) | (crc << 17)) &+ maskDelta
    }

    @inline(__always) public static func unmask(_ masked: UInt32) -> UInt32 {
        let rotated = masked &- maskDelta
        return (rotated >> 17) | (rotated << 15)
    }

    public static func masked(_ bytes: UnsafeRawBufferPointer) -> UInt32 { mask(checksum(bytes)) }
    public static func masked(_ bytes: ArraySlice<UInt8>) -> UInt32 { mask(checksum(bytes)) }
    public static func masked(_ bytes: [UInt8]) -> UInt32 { mask(checksum(bytes)) }
}
