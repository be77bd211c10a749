import Foundation

/// Byte-level building blocks of the format (FORMAT.md §1 "Conventions"): little-endian
/// fixed-width integers, LEB128 varints, zigzag signed varints.

/// Appends encoded values to one contiguous buffer.
package struct ByteWriter: Sendable {
    package private(set) var bytes: [UInt8]

    package init(capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    package var count: Int { bytes.count }

    @inline(__always) package mutating func u8(_ value: UInt8) { bytes.append(value) }

    @inline(__always) package mutating func u16(_ value: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: value))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
    }

    @inline(__always) package mutating func u32(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    @inline(__always) package mutating func u64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// Unsigned LEB128: 7 bits a byte, low bits first, high bit set on all but the last.
    @inline(__always) package mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    /// The bytes ``varint(_:)`` writes for `value`.
    @inline(__always) package static func varintSize(_ value: UInt64) -> Int {
        (64 - value.leadingZeroBitCount + 6) / 7 + (value == 0 ? 1 : 0)
    }

    /// Zigzag then LEB128: 0, -1, 1, -2, … map to 0, 1, 2, 3, ….
    @inline(__always) package mutating func signedVarint(_ value: Int64) { zigzag(value) }

    package mutating func append(_ other: [UInt8]) { bytes.append(contentsOf: other) }
    package mutating func append(_ other: UnsafeRawBufferPointer) { bytes.append(contentsOf: other) }

    /// A varint length, then the bytes.
    package mutating func lengthPrefixed(_ other: [UInt8]) {
        varint(UInt64(other.count))
        bytes.append(contentsOf: other)
    }

    /// ``lengthPrefixed(_:)`` of bytes in memory (a record body).
    package mutating func lengthPrefixed(_ other: UnsafeRawBufferPointer) {
        varint(UInt64(other.count))
        append(other)
    }

    /// A varint length, then the UTF-8 bytes.
    package mutating func string(_ value: String) { utf8(value) }

    /// Zero bytes up to the next multiple of `alignment`.
    package mutating func pad(to alignment: Int) {
        let remainder = bytes.count % alignment
        if remainder != 0 { bytes.append(contentsOf: repeatElement(0, count: alignment - remainder)) }
    }

    /// Overwrites a little-endian UInt32 at `offset` (for back-patched lengths and checksums).
    package mutating func patch(u32 value: UInt32, at offset: Int) {
        withUnsafeBytes(of: value.littleEndian) { source in
            for i in 0..<4 { bytes[offset + i] = source[i] }
        }
    }

    package mutating func reserve(_ capacity: Int) { bytes.reserveCapacity(capacity) }
    /// The bytes the buffer has room for without growing.
    package var capacity: Int { bytes.capacity }
    package mutating func removeAll(keepingCapacity: Bool = true) { bytes.removeAll(keepingCapacity: keepingCapacity) }
}

extension UnsafeRawBufferPointer {
    /// Whether every byte is zero (preallocated or padding space), eight bytes at a time:
    /// a log's unused tail is megabytes long.
    package var isAllZero: Bool {
        var i = 0
        // Four words a step, their bits or-ed (one test per 32 bytes: megabytes of a
        // preallocated log's unused space are checked at every open).
        while i + 32 <= count {
            let any = loadUnaligned(fromByteOffset: i, as: UInt64.self) | loadUnaligned(fromByteOffset: i + 8, as: UInt64.self)
                | loadUnaligned(fromByteOffset: i + 16, as: UInt64.self) | loadUnaligned(fromByteOffset: i + 24, as: UInt64.self)
            if any != 0 { return false }
            i += 32
        }
        while i + 8 <= count {
            if loadUnaligned(fromByteOffset: i, as: UInt64.self) != 0 { return false }
            i += 8
        }
        while i < count {
            if self[i] != 0 { return false }
            i += 1
        }
        return true
    }
}

/// Reads encoded values from a buffer, checking every length against the bytes left.
/// Every failure is a `CairnError(.corrupt)` carrying the offset (relative to `base`) and
/// what was being read.
package struct ByteReader {
    package let buffer: UnsafeRawBufferPointer
    package internal(set) var position: Int
    /// Added to positions in error offsets, so errors name the place in the file.
    package let base: Int

    package init(_ buffer: UnsafeRawBufferPointer, base: Int = 0) {
        self.buffer = buffer
        self.position = 0
        self.base = base
    }

    package var remaining: Int { buffer.count - position }
    package var isAtEnd: Bool { position >= buffer.count }

    package func failure(_ what: String, at position: Int? = nil) -> CairnError {
        CairnError.corrupt(what, offset: base + (position ?? self.position))
    }

    @inline(__always) package mutating func need(_ count: Int, _ what: @autoclosure () -> String) throws {
        guard count >= 0, count <= buffer.count - position else {
            throw failure("\(what()) needs \(count) bytes but only \(buffer.count - position) remain")
        }
    }

    @inline(__always) package mutating func u8(_ what: @autoclosure () -> String = "byte") throws -> UInt8 {
        try need(1, what())
        defer { position += 1 }
        return buffer[position]
    }

    @inline(__always) package mutating func u16(_ what: @autoclosure () -> String = "u16") throws -> UInt16 {
        try need(2, what())
        defer { position += 2 }
        return UInt16(littleEndian: buffer.loadUnaligned(fromByteOffset: position, as: UInt16.self))
    }

    @inline(__always) package mutating func u32(_ what: @autoclosure () -> String = "u32") throws -> UInt32 {
        try need(4, what())
        defer { position += 4 }
        return UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: position, as: UInt32.self))
    }

    @inline(__always) package mutating func u64(_ what: @autoclosure () -> String = "u64") throws -> UInt64 {
        try need(8, what())
        defer { position += 8 }
        return UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: position, as: UInt64.self))
    }

    /// Unsigned LEB128 of at most 10 bytes; the tenth may only carry the top bit. Read in
    /// place by ``Varint/read(_:_:limit:)``; only a varint that does not read takes the
    /// general path, which says what is wrong.
    @inline(__always) package mutating func varint(_ what: @autoclosure () -> String = "varint") throws -> UInt64 {
        if let value = Varint.read(buffer, &position, limit: buffer.count) { return value }
        return try generalVarint(what())
    }

    /// `varint` without its in-place path (tests hold the two to the same answers).
    package mutating func generalVarint(_ what: @autoclosure () -> String = "varint") throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        let start = position
        while true {
            guard position < buffer.count else { throw failure("\(what()) runs past the end of the data", at: start) }
            let byte = buffer[position]
            position += 1
            if shift == 63 && byte > 1 { throw failure("\(what()) overflows 64 bits", at: start) }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
        }
    }

    @inline(__always) package mutating func signedVarint(_ what: @autoclosure () -> String = "varint") throws -> Int64 {
        let raw = try varint(what())
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    /// A varint count or length, checked against `maximum` and, when each item takes at
    /// least `minimumItemSize` bytes, against the bytes left — before anything is allocated.
    @inline(__always)
    package mutating func count(_ what: @autoclosure () -> String, maximum: Int, minimumItemSize: Int = 1) throws -> Int {
        // A one-byte count that passes both checks, in place (every record body starts
        // with one); anything else takes the general path, which says what is wrong.
        if position < buffer.count, buffer[position] < 0x80 {
            let value = Int(buffer[position])
            if value <= maximum, value &* max(minimumItemSize, 0) <= buffer.count &- position &- 1 {
                position += 1
                return value
            }
        }
        return try generalCount(what(), maximum: maximum, minimumItemSize: minimumItemSize)
    }

    /// `count` without its one-byte fast path (tests hold the two to the same answers).
    package mutating func generalCount(_ what: @autoclosure () -> String, maximum: Int, minimumItemSize: Int) throws -> Int {
        let start = position
        let raw = try varint(what())
        guard raw <= UInt64(maximum) else {
            throw failure("\(what()) \(raw) exceeds the maximum \(maximum)", at: start)
        }
        let value = Int(raw)
        if minimumItemSize > 0 {
            let (needed, overflow) = value.multipliedReportingOverflow(by: minimumItemSize)
            guard !overflow, needed <= remaining else {
                throw failure("\(what()) \(value) needs at least \(needed) bytes but only \(remaining) remain", at: start)
            }
        }
        return value
    }

    /// `count` raw bytes, copied.
    package mutating func bytes(_ count: Int, _ what: @autoclosure () -> String = "bytes") throws -> [UInt8] {
        try need(count, what())
        defer { position += count }
        return [UInt8](UnsafeRawBufferPointer(rebasing: buffer[position..<(position + count)]))
    }

    /// `count` raw bytes, not copied (valid as long as the buffer is).
    package mutating func slice(_ count: Int, _ what: @autoclosure () -> String = "bytes") throws -> UnsafeRawBufferPointer {
        try need(count, what())
        defer { position += count }
        return UnsafeRawBufferPointer(rebasing: buffer[position..<(position + count)])
    }

    package mutating func skip(_ count: Int, _ what: @autoclosure () -> String = "bytes") throws {
        try need(count, what())
        position += count
    }

    /// A varint-length-prefixed UTF-8 string; invalid UTF-8 is corrupt data.
    package mutating func string(_ what: @autoclosure () -> String = "string", maximum: Int = FormatLimits.maxValueBytes) throws -> String {
        let start = position
        let length = try count("\(what()) length", maximum: maximum)
        let raw = try slice(length, what())
        guard let text = String(validating: raw, as: UTF8.self) else {
            throw failure("\(what()) is not valid UTF-8", at: start)
        }
        return text
    }

    package mutating func lengthPrefixedBytes(_ what: @autoclosure () -> String = "bytes", maximum: Int = FormatLimits.maxValueBytes) throws -> [UInt8] {
        let length = try count("\(what()) length", maximum: maximum)
        return try bytes(length, what())
    }

    /// Moves to an absolute position within the buffer.
    package mutating func seek(to newPosition: Int) throws {
        guard newPosition >= 0, newPosition <= buffer.count else {
            throw failure("offset \(newPosition) lies outside the \(buffer.count) bytes of data")
        }
        position = newPosition
    }

    /// Requires that `count` bytes from here are zero (padding and reserved fields).
    package mutating func zeros(_ count: Int, _ what: @autoclosure () -> String) throws {
        try need(count, what())
        for i in position..<(position + count) where buffer[i] != 0 {
            throw failure("\(what()) must be zero", at: i)
        }
        position += count
    }
}

extension String {
    /// `String(validating:as:)` for a raw buffer, without trapping on bad UTF-8: nil
    /// unless the bytes are well-formed UTF-8.
    ///
    /// Decoded (which replaces each ill-formed stretch with U+FFFD), then compared with
    /// the bytes: well-formed UTF-8 decodes to itself, and ill-formed bytes never to
    /// themselves, since what decoding gives is well-formed. The library's validating
    /// initializer is slower for a short string, and every string a record holds is read
    /// through here.
    package init?(validating raw: UnsafeRawBufferPointer, as encoding: UTF8.Type) {
        let bound = raw.assumingMemoryBound(to: UInt8.self)
        let text = String(decoding: bound, as: encoding)
        let same = text.utf8.withContiguousStorageIfAvailable { decoded in
            guard decoded.count == bound.count else { return false }
            guard let p = decoded.baseAddress, let q = bound.baseAddress else { return true }
            return memcmp(p, q, bound.count) == 0
        } ?? text.utf8.elementsEqual(bound)
        guard same else { return nil }
        self = text
    }
}

/// Fixed maxima every decoder checks lengths and counts against (FORMAT.md §1).
package enum FormatLimits {
    /// Largest encoded value (string, bytes, archived value): 256 MiB.
    package static let maxValueBytes = 256 << 20
    /// Most values in one record.
    package static let maxValuesPerRecord = 65_535
    /// Most references in one to-many value.
    package static let maxReferences = 1 << 26
    /// Largest log frame payload (one transaction): 1 GiB.
    package static let maxFramePayload = 1 << 30
    /// Most operations in one transaction.
    package static let maxOperations = 1 << 26
    /// Most entities in a schema.
    package static let maxEntities = 65_535
    /// Most attributes or relationships of one entity.
    package static let maxProperties = 65_535
    /// Longest name in a schema.
    package static let maxNameBytes = 1_024
    /// Longest decimal value text.
    package static let maxDecimalBytes = 512
    /// Largest transaction sequence number (and base or last sequence) a file may hold:
    /// 2^62, so that counting on from any accepted value cannot overflow.
    package static let maxSequence: UInt64 = 1 << 62
    /// Largest file number a manifest or header may hold: 2^40 (a million compactions a
    /// second for twelve days), so that numbering the next files cannot overflow.
    package static let maxFileNumber: UInt64 = 1 << 40
}

/// Unsigned LEB128 read in place, for hot paths that need no error message: the same
/// values as ``ByteReader/generalVarint(_:)`` accepts (at most 10 bytes, the tenth
/// carrying only the top bit), nil where it would throw. ``ByteReader/varint(_:)`` reads
/// through it.
enum Varint {
    @inline(__always) static func read(_ buffer: UnsafeRawBufferPointer, _ at: inout Int, limit: Int) -> UInt64? {
        guard at < limit else { return nil }
        // One to three bytes in place (IDs' serials take three up to two million).
        let first = buffer[at]
        if first < 0x80 {
            at += 1
            return UInt64(first)
        }
        if at + 1 < limit {
            let second = buffer[at + 1]
            if second < 0x80 {
                at += 2
                return UInt64(first & 0x7F) | UInt64(second) << 7
            }
            if at + 2 < limit {
                let third = buffer[at + 2]
                if third < 0x80 {
                    at += 3
                    return UInt64(first & 0x7F) | UInt64(second & 0x7F) << 7 | UInt64(third) << 14
                }
            }
        }
        return readLong(buffer, &at, limit: limit)
    }

    static func readLong(_ buffer: UnsafeRawBufferPointer, _ at: inout Int, limit: Int) -> UInt64? {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        var next = at
        while next < limit {
            let byte = buffer[next]
            next += 1
            if shift == 63 && byte > 1 { return nil }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 {
                at = next
                return result
            }
            shift += 7
        }
        return nil
    }
}
