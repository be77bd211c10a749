/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI, ext4 and
/// LevelDB, and its masked form (FORMAT.md §1.3 "Checksums").
///
/// Software slicing-by-8: eight 256-entry tables, eight bytes per step; long inputs in
/// three interleaved streams.
package enum CRC32C {
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
    /// long as the process (reading an array would retain and release it on every call,
    /// which a short record's checksum would feel). `nonisolated(unsafe)`: filled once by
    /// the lazy initializer, before any reader can see it, and never written again.
    nonisolated(unsafe) private static let flat: UnsafeBufferPointer<UInt32> = {
        let memory = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: 8 * 256)
        _ = memory.initialize(from: tables.joined())
        return UnsafeBufferPointer(memory)
    }()

    /// Extends `crc` (the value returned for the bytes before) with `bytes`.
    ///
    /// Inputs of three ``streamBlock``s or more are read as three streams at once, one
    /// block each, whose checksums are then combined: one stream's steps wait on each
    /// other's table loads, three streams' steps do not. The result is the same CRC.
    package static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var c = ~crc
        var index = 0
        let count = bytes.count
        let t = flat
        @inline(__always) func word(_ at: Int) -> UInt64 {
            UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self))
        }
        while count - index >= 3 * streamBlock {
            // Register arithmetic is linear: the register after blocks A, B, C from state c
            // is shift(shift(R(c, A)) ^ R(0, B)) ^ R(0, C), where shift runs a register
            // through a block of zeros.
            var a = c, b: UInt32 = 0, d: UInt32 = 0
            let end = index + streamBlock
            while index < end {
                a = step(a, word(index), t)
                b = step(b, word(index + streamBlock), t)
                d = step(d, word(index + 2 * streamBlock), t)
                index += 8
            }
            c = overBlock(overBlock(a) ^ b) ^ d
            index += 2 * streamBlock
        }
        while count - index >= 8 {
            c = step(c, word(index), t)
            index += 8
        }
        while index < count {
            c = t[Int((c ^ UInt32(bytes[index])) & 0xFF)] ^ (c >> 8)
            index += 1
        }
        return ~c
    }

    /// The register after eight bytes (`word`, little-endian) from register `c`.
    @inline(__always) private static func step(_ c: UInt32, _ word: UInt64, _ t: UnsafeBufferPointer<UInt32>) -> UInt32 {
        let low = UInt32(truncatingIfNeeded: word) ^ c
        let high = UInt32(truncatingIfNeeded: word >> 32)
        return t[7 * 256 + Int(low & 0xFF)] ^ t[6 * 256 + Int((low >> 8) & 0xFF)]
            ^ t[5 * 256 + Int((low >> 16) & 0xFF)] ^ t[4 * 256 + Int(low >> 24)]
            ^ t[3 * 256 + Int(high & 0xFF)] ^ t[2 * 256 + Int((high >> 8) & 0xFF)]
            ^ t[1 * 256 + Int((high >> 16) & 0xFF)] ^ t[Int(high >> 24)]
    }

    /// The bytes of one stream of ``update(_:_:)`` (a multiple of 8).
    static let streamBlock = 4096

    /// ``overBlock(_:)`` as four tables, one per byte of the register: the map is linear,
    /// so a register's image is the XOR of its bytes' images. `nonisolated(unsafe)` as
    /// ``flat``: filled once by the lazy initializer, never written again.
    nonisolated(unsafe) private static let blockShift: UnsafeBufferPointer<UInt32> = {
        // The images of the 32 one-bit registers, each run through a block of zeros.
        let bits = (0..<32).map { bit -> UInt32 in
            var c = UInt32(1) << bit
            for _ in 0..<(streamBlock / 8) { c = step(c, 0, flat) }
            return c
        }
        let memory = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: 4 * 256)
        for byte in 0..<4 {
            for value in 0..<256 {
                memory[byte * 256 + value] = (0..<8).reduce(0) { image, bit in
                    value & (1 << bit) != 0 ? image ^ bits[8 * byte + bit] : image
                }
            }
        }
        return UnsafeBufferPointer(memory)
    }()

    /// The register after ``streamBlock`` zero bytes from register `c`.
    @inline(__always) private static func overBlock(_ c: UInt32) -> UInt32 {
        let s = blockShift
        return s[Int(c & 0xFF)] ^ s[256 + Int((c >> 8) & 0xFF)] ^ s[512 + Int((c >> 16) & 0xFF)] ^ s[768 + Int(c >> 24)]
    }

    package static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 { update(0, bytes) }

    /// The checksum of two pieces one after the other, from their own checksums:
    /// `combine(checksum(a), checksum(b), secondLength: b.count) == checksum(a + b)`. The
    /// pieces can then be checksummed apart (on several threads). The first piece's
    /// register is run through `secondLength` zero bytes by multiplying it with
    /// x^(8 · secondLength) modulo the polynomial; the conditioning cancels out.
    package static func combine(_ first: UInt32, _ second: UInt32, secondLength: Int) -> UInt32 {
        guard secondLength > 0 else { return first }
        return multiply(powerOfX(timesEightOf: secondLength), first) ^ second
    }

    /// a · b modulo the polynomial, both reflected (bit 31 is x^0).
    private static func multiply(_ a: UInt32, _ b: UInt32) -> UInt32 {
        var product: UInt32 = 0, b = b
        var bit: UInt32 = 1 << 31
        while bit != 0 {
            if a & bit != 0 { product ^= b }
            b = b & 1 != 0 ? (b >> 1) ^ 0x82F6_3B78 : b >> 1
            bit >>= 1
        }
        return product
    }

    /// x^(2^k) modulo the polynomial, for k in 0..<64 (reflected).
    private static let powersOfX: [UInt32] = {
        var powers: [UInt32] = [1 << 30]  // x^1
        for _ in 1..<64 { powers.append(multiply(powers[powers.count - 1], powers[powers.count - 1])) }
        return powers
    }()

    /// x^(8n) modulo the polynomial: the product of x^(2^k) over the bits k of 8n.
    private static func powerOfX(timesEightOf n: Int) -> UInt32 {
        var result: UInt32 = 1 << 31  // x^0
        var bits = UInt64(n) << 3, k = 0
        while bits != 0 {
            if bits & 1 != 0 { result = multiply(powersOfX[k], result) }
            bits >>= 1
            k += 1
        }
        return result
    }

    package static func checksum(_ bytes: [UInt8]) -> UInt32 { bytes.withUnsafeBytes { update(0, $0) } }

    package static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt32 { bytes.withUnsafeBytes { update(0, $0) } }

    /// Masking constant (FORMAT.md §1.3), the one LevelDB uses.
    package static let maskDelta: UInt32 = 0xA282_EAD8

    /// Masked CRC: rotate right by 15 bits and add a constant, so that a checksum of data
    /// that itself contains checksums stays strong.
    @inline(__always) package static func mask(_ crc: UInt32) -> UInt32 {
        ((crc >> 15) | (crc << 17)) &+ maskDelta
    }

    @inline(__always) package static func unmask(_ masked: UInt32) -> UInt32 {
        let rotated = masked &- maskDelta
        return (rotated >> 17) | (rotated << 15)
    }

    package static func masked(_ bytes: UnsafeRawBufferPointer) -> UInt32 { mask(checksum(bytes)) }
    package static func masked(_ bytes: ArraySlice<UInt8>) -> UInt32 { mask(checksum(bytes)) }
    package static func masked(_ bytes: [UInt8]) -> UInt32 { mask(checksum(bytes)) }
}
