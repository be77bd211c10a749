/// Log frames and transaction payloads (FORMAT.md §4 "Log files" and §5 "Transactions").

/// One frame of a log file: a 32-byte header, the payload, zero padding to 8 bytes.
///
/// ```
/// offset size field
///  0     4    masked CRC-32C of bytes 4..<32 of the header and of the payload
///  4     4    payload length
///  8     8    sequence number (the previous frame's plus one)
/// 16     8    synced-through: the highest sequence number known durable when written
/// 24     1    type (1 = transaction; 0 = unused space, all-zero header)
/// 25     7    reserved, zero
/// 32     n    payload
/// ```
package enum LogFrame {
    package static let headerSize = 32
    package static let alignment = 8
    package static let typeUnused: UInt8 = 0
    package static let typeTransaction: UInt8 = 1

    /// Appends a whole frame (header, payload, padding) to `writer`; `payload` writes the
    /// payload in place, so a transaction is encoded once, straight into the commit buffer.
    package static func append(to writer: inout ByteWriter, sequence: UInt64, syncedThrough: UInt64,
                              payload: (inout ByteWriter) -> Void) {
        let start = writer.count
        header(into: &writer, length: 0, sequence: sequence, syncedThrough: syncedThrough)  // length patched below
        payload(&writer)
        let length = writer.count - start - headerSize
        writer.patch(u32: UInt32(length), at: start + 4)
        let crc = writer.bytes.withUnsafeBytes { all in
            CRC32C.masked(UnsafeRawBufferPointer(rebasing: all[(start + 4)..<(start + headerSize + length)]))
        }
        writer.patch(u32: crc, at: start)
        writer.pad(to: alignment)
    }

    /// A transaction frame's header, its checksum field zero (the checksum covers the
    /// header's other bytes and the payload, so it is written last).
    package static func header(into writer: inout ByteWriter, length: Int, sequence: UInt64, syncedThrough: UInt64) {
        writer.u32(0)
        writer.u32(UInt32(truncatingIfNeeded: length))
        writer.u64(sequence)
        writer.u64(syncedThrough)
        writer.u8(typeTransaction)
        writer.append([0, 0, 0, 0, 0, 0, 0])
    }

    /// The total size of a frame with a payload of `length` bytes.
    package static func frameSize(payloadLength: Int) -> Int {
        (headerSize + payloadLength + alignment - 1) / alignment * alignment
    }

    package enum Parsed {
        /// A valid frame; `payload` is a range of the buffer, `next` the offset after its padding.
        case frame(sequence: UInt64, syncedThrough: UInt64, payload: Range<Int>, next: Int)
        /// An all-zero header: unused (preallocated) space, the end of the log.
        case unused
        /// Not a valid frame; `reason` says why.
        case invalid(reason: String)
    }

    /// Parses the frame at `offset` of `buffer` (which holds the whole log file).
    /// The sequence and synced-through fields of the header at `offset`, unchecked (the
    /// caller has made sure `headerSize` bytes are there).
    static func sequenceFields(_ buffer: UnsafeRawBufferPointer, at offset: Int) -> (sequence: UInt64, synced: UInt64) {
        (UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)),
         UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self)))
    }

    /// With `read`, a payload longer than ``pieceBytes`` has its checksum taken in pieces,
    /// and `read` is told of each piece once it is read (for a caller that lets go of the
    /// pages it has read).
    package static func parse(_ buffer: UnsafeRawBufferPointer, at offset: Int, read: ((Range<Int>) -> Void)? = nil) -> Parsed {
        let left = buffer.count - offset
        guard left >= headerSize else {
            for i in offset..<buffer.count where buffer[i] != 0 {
                return .invalid(reason: "\(left) bytes at the end are too few for a frame header")
            }
            return .unused
        }
        let word0 = buffer.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
        let type = buffer[offset + 24]
        if word0 == 0 && type == typeUnused {
            var allZero = true
            for i in (offset + 8)..<(offset + headerSize) where buffer[i] != 0 { allZero = false; break }
            if allZero { return .unused }
        }
        guard type == typeTransaction else { return .invalid(reason: "unknown frame type \(type)") }
        for i in (offset + 25)..<(offset + headerSize) where buffer[i] != 0 {
            return .invalid(reason: "reserved header bytes are not zero")
        }
        let length = Int(UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)))
        guard length <= FormatLimits.maxFramePayload else {
            return .invalid(reason: "payload length \(length) exceeds the maximum \(FormatLimits.maxFramePayload)")
        }
        let size = frameSize(payloadLength: length)
        guard size <= left else {
            return .invalid(reason: "payload length \(length) runs past the end of the file (\(left) bytes left)")
        }
        let stored = UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
        let covered = (offset + 4)..<(offset + headerSize + length)
        var crc: UInt32 = 0
        if let read, length > pieceBytes {
            for start in stride(from: covered.lowerBound, to: covered.upperBound, by: pieceBytes) {
                let piece = start..<min(covered.upperBound, start + pieceBytes)
                crc = CRC32C.update(crc, UnsafeRawBufferPointer(rebasing: buffer[piece]))
                read(piece)
            }
        } else {
            crc = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: buffer[covered]))
        }
        guard stored == CRC32C.mask(crc) else { return .invalid(reason: "checksum mismatch") }
        for i in (offset + headerSize + length)..<(offset + size) where buffer[i] != 0 {
            return .invalid(reason: "padding after the payload is not zero")
        }
        let (sequence, synced) = sequenceFields(buffer, at: offset)
        guard sequence <= FormatLimits.maxSequence, synced < sequence else {
            return .invalid(reason: "sequence \(sequence) with synced-through \(synced) is out of range")
        }
        return .frame(sequence: sequence, syncedThrough: synced,
                      payload: (offset + headerSize)..<(offset + headerSize + length), next: offset + size)
    }
}

extension LogFrame {
    /// The sequence number of the frame at `offset` and where the next starts, read from
    /// its header alone (§4.1 checks 1–6 and 9: no checksum, no padding), or nil if the
    /// header is not that of a whole frame.
    static func header(in buffer: UnsafeRawBufferPointer, at offset: Int) -> (sequence: UInt64, next: Int)? {
        guard offset >= 0, buffer.count - offset >= headerSize, buffer[offset + 24] == typeTransaction else { return nil }
        for i in (offset + 25)..<(offset + headerSize) where buffer[i] != 0 { return nil }
        let length = Int(UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)))
        let size = frameSize(payloadLength: length)
        let (sequence, synced) = sequenceFields(buffer, at: offset)
        guard length <= FormatLimits.maxFramePayload, size <= buffer.count - offset, sequence <= FormatLimits.maxSequence,
              synced < sequence else { return nil }
        return (sequence, offset + size)
    }

    /// The pieces ``parse(_:at:read:)`` reads a payload in, when asked to.
    static let pieceBytes = 8 << 20

    /// The smallest frame: a header and a payload of a commit time and an operation count.
    static let minimumSize = frameSize(payloadLength: 9)

    /// How a probe past damage ended.
    enum ProbeEnd: Equatable {
        /// Every offset was probed.
        case finished
        /// `found` asked to stop.
        case stopped
        /// The checksum work allowed (a bounded multiple of the file's size) ran out at
        /// this offset: only a crafted file holds that many would-be frames.
        case exhausted(at: Int)
    }

    /// Looks for valid frames past damage at `damage` (where frame `expected` should have
    /// been), at every aligned offset after it, calling `found` with each one's sequence
    /// number, offset and payload; `found` returns false to stop.
    ///
    /// Only a header that could belong to a later frame of this log has its checksum
    /// computed: type 1, reserved bytes zero, a length that fits the file, a sequence
    /// above `expected` yet no higher than the frames between the damage and it could
    /// number (each takes at least ``minimumSize`` bytes), and with `durableOnly`, a
    /// synced-through field at or past `expected`. The payload of a torn frame supplies
    /// few such headers, so a torn tail of any length is probed in one pass; the checksum
    /// work is bounded all the same.
    static func probe(after damage: Int, in buffer: UnsafeRawBufferPointer, expected: UInt64, durableOnly: Bool,
                      _ found: (_ sequence: UInt64, _ offset: Int, _ payload: Range<Int>) -> Bool) -> ProbeEnd {
        var probe = damage + alignment
        var budget = 4 * buffer.count + (1 << 20)
        while probe + headerSize <= buffer.count {
            defer { probe += alignment }
            // The type byte first: unused space (megabytes of zeros) costs one load a probe.
            guard buffer[probe + 24] == typeTransaction,
                  buffer.loadUnaligned(fromByteOffset: probe + 24, as: UInt64.self).littleEndian == UInt64(typeTransaction)
            else { continue }
            let (sequence, synced) = sequenceFields(buffer, at: probe)
            let mostFrames = UInt64((probe - damage) / minimumSize)
            guard sequence > expected, sequence - expected <= mostFrames, synced < sequence,
                  !durableOnly || synced >= expected else { continue }
            let length = Int(UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: probe + 4, as: UInt32.self)))
            guard length <= FormatLimits.maxFramePayload, frameSize(payloadLength: length) <= buffer.count - probe else { continue }
            budget -= headerSize + length
            guard budget >= 0 else { return .exhausted(at: probe) }
            if case .frame(_, _, let payload, _) = parse(buffer, at: probe), !found(sequence, probe, payload) { return .stopped }
        }
        return .finished
    }
}

/// One change of a transaction.
package enum RecordOperation: Sendable, Equatable {
    /// Insert or replace a whole record; `body` is its encoded values (FORMAT.md §2.2).
    case put(RecordID, body: RecordBody)
    /// Delete a record.
    case delete(RecordID)

    /// A put of a copy of `body`.
    package static func put(_ id: RecordID, body: [UInt8]) -> RecordOperation { .put(id, body: RecordBody(body)) }

    package var id: RecordID {
        switch self {
        case .put(let id, _), .delete(let id): return id
        }
    }
}

/// A transaction payload (FORMAT.md §5):
///
/// ```
/// u64     commit time, milliseconds since 1970-01-01 UTC
/// varint  operation count
/// each:   u8 kind (1 = put, 2 = delete), u64 record ID,
///         put only: varint body length, body (FORMAT.md §2.2)
/// then, in a store that keeps history: the transaction's notes (``TransactionNotes``, §5.1)
/// ```
package enum TransactionCoding {
    package static let put: UInt8 = 1
    package static let delete: UInt8 = 2

    /// The size of the payload ``encode(_:timestamp:into:)`` writes for `operations`,
    /// with `notes` if given.
    package static func encodedSize(_ operations: [RecordOperation], notes: TransactionNotes?) -> Int {
        encodedSize(operations) + (notes?.encodedSize ?? 0)
    }

    /// The size of the payload ``encode(_:timestamp:into:)`` writes for `operations`.
    package static func encodedSize(_ operations: [RecordOperation]) -> Int {
        var size = 8 + ByteWriter.varintSize(UInt64(operations.count))
        for operation in operations {
            switch operation {
            case .put(_, let body): size += 9 + ByteWriter.varintSize(UInt64(body.count)) + body.count
            case .delete: size += 9
            }
        }
        return size
    }

    package static func encode(_ operations: [RecordOperation], timestamp: UInt64, notes: TransactionNotes? = nil,
                               into writer: inout ByteWriter) {
        encode(operations, timestamp: timestamp, notes: notes, into: &writer, handingOnPast: .max) { _ in }
    }

    /// ``encode(_:timestamp:into:)`` in pieces: whenever `writer` holds `piece` bytes or
    /// more after an operation, `handOn` takes them (and leaves it empty); the last piece
    /// stays in `writer`.
    package static func encode(_ operations: [RecordOperation], timestamp: UInt64, notes: TransactionNotes? = nil,
                               into writer: inout ByteWriter, handingOnPast piece: Int,
                               _ handOn: (inout ByteWriter) throws -> Void) rethrows {
        writer.u64(timestamp)
        writer.varint(UInt64(operations.count))
        for operation in operations {
            switch operation {
            case .put(let id, let body) where body.count >= piece:
                // A body of a piece or more goes on in pieces of its own, not copied whole first.
                writer.u8(put)
                writer.u64(id.rawValue)
                writer.varint(UInt64(body.count))
                try body.withUnsafeBytes { bytes in
                    for start in stride(from: 0, to: bytes.count, by: piece) {
                        writer.append(UnsafeRawBufferPointer(rebasing: bytes[start..<min(bytes.count, start + piece)]))
                        try handOn(&writer)
                    }
                }
            case .put(let id, let body):
                writer.u8(put)
                writer.u64(id.rawValue)
                body.withUnsafeBytes { writer.lengthPrefixed($0) }
            case .delete(let id):
                writer.u8(delete)
                writer.u64(id.rawValue)
            }
            if writer.count >= piece { try handOn(&writer) }
        }
        notes?.encode(into: &writer)
    }

    /// Calls `body` with each of `operations` and, for a put, the offset at which
    /// ``encode(_:timestamp:into:)`` puts its record body, counted from `payload` (where
    /// the payload starts); a delete's offset is where its operation ends.
    package static func forEachBody(of operations: [RecordOperation], payloadAt payload: Int,
                                    _ body: (RecordOperation, Int) -> Void) {
        var position = payload + 8 + ByteWriter.varintSize(UInt64(operations.count))
        for operation in operations {
            position += 9
            if case .put(_, let bytes) = operation {
                position += ByteWriter.varintSize(UInt64(bytes.count))
                body(operation, position)
                position += bytes.count
            } else {
                body(operation, position)
            }
        }
    }

    /// Decodes a payload, calling `body` for each operation with the record body as a
    /// slice of `payload` (nil for a delete). Offsets in errors are relative to `base`.
    /// The transaction's notes (§5.1), if it has any, are checked, and given to `notes`.
    package static func decode(_ payload: UnsafeRawBufferPointer, base: Int = 0,
                               notes: ((TransactionNotes) throws -> Void)? = nil,
                               _ body: (RecordID, UnsafeRawBufferPointer?) throws -> Void) throws -> UInt64 {
        var reader = ByteReader(payload, base: base)
        let (timestamp, count) = try header(&reader)
        let operationsStart = reader.position
        for _ in 0..<count {
            let kindOffset = reader.position
            let kind = try reader.u8("operation kind")
            let id = RecordID(rawValue: try reader.u64("record ID"))
            switch kind {
            case put:
                let length = try reader.count("record body length", maximum: FormatLimits.maxFramePayload)
                try body(id, try reader.slice(length, "record body"))
            case delete:
                try body(id, nil)
            default:
                throw reader.failure("unknown operation kind \(kind)", at: kindOffset)
            }
        }
        guard !reader.isAtEnd else { return timestamp }
        let kinds = try putFlags(payload, base: base, from: operationsStart, count: count)
        let decoded = try TransactionNotes.decode(&reader, operations: count) { kinds[$0] }
        guard reader.isAtEnd else { throw reader.failure("\(reader.remaining) unexpected bytes after the transaction's history notes") }
        try notes?(decoded)
        return timestamp
    }

    /// A payload's commit time and operation count, the count checked against the format's
    /// limit and the bytes that follow (each operation takes at least 9).
    private static func header(_ reader: inout ByteReader) throws -> (timestamp: UInt64, count: Int) {
        let timestamp = try reader.u64("commit time")
        return (timestamp, try reader.count("operation count", maximum: FormatLimits.maxOperations, minimumItemSize: 9))
    }

    /// How many operations `payload` says it holds, checked as ``decode(_:base:notes:_:)``
    /// checks it (room for that many before decoding them); nil where the decode would fail.
    package static func operationCount(in payload: UnsafeRawBufferPointer) -> Int? {
        var reader = ByteReader(payload)
        return try? header(&reader).count
    }

    /// Whether each of the `count` operations from `start` (checked already) is a put.
    private static func putFlags(_ payload: UnsafeRawBufferPointer, base: Int, from start: Int, count: Int) throws -> [Bool] {
        var reader = ByteReader(payload, base: base)
        try reader.seek(to: start)
        var flags: [Bool] = []
        flags.reserveCapacity(count)
        for _ in 0..<count {
            let kind = try reader.u8("operation kind")
            _ = try reader.u64("record ID")
            flags.append(kind == put)
            if kind == put { _ = try reader.slice(try reader.count("record body length", maximum: FormatLimits.maxFramePayload)) }
        }
        return flags
    }
}
