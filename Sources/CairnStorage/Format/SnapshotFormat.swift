/// Snapshot files and the manifest (FORMAT.md §6 "Snapshot files", §7 "Manifest").

/// A snapshot's record frame (FORMAT.md §6.1). Version 3 frames are compact,
/// `u32 masked CRC-32C of the rest | varint body length | varint entity | varint serial | body`,
/// back to back; versions 1 and 2 used `u32 body length, u32 masked CRC-32C of (id, body),
/// u64 record ID, body`, zero-padded to 8 bytes.
package enum SnapshotRecord {
    /// Header size of a version 1–2 frame.
    package static let fixedHeaderSize = 16
    /// The smallest version-3 frame: checksum and three one-byte varints.
    package static let minimumCompactSize = 7

    /// Appends a version-3 frame's header (its checksum, which covers `body` too, and its
    /// varints) without the body, and returns the header's size: the body follows it.
    package static func appendHeader(to writer: inout ByteWriter, id: RecordID, body: UnsafeRawBufferPointer) -> Int {
        let start = appendFields(to: &writer, id: id, length: body.count)
        let crc = writer.bytes.withUnsafeBytes { CRC32C.update(0, UnsafeRawBufferPointer(rebasing: $0[(start + 4)..<writer.count])) }
        writer.patch(u32: CRC32C.mask(CRC32C.update(crc, body)), at: start)
        return writer.count - start
    }

    /// Appends a version-3 frame and returns its size in bytes.
    @discardableResult
    package static func append(to writer: inout ByteWriter, id: RecordID, body: UnsafeRawBufferPointer) -> Int {
        let start = appendFields(to: &writer, id: id, length: body.count)
        writer.append(body)
        let crc = writer.bytes.withUnsafeBytes {
            CRC32C.masked(UnsafeRawBufferPointer(rebasing: $0[(start + 4)..<writer.count]))
        }
        writer.patch(u32: crc, at: start)
        return writer.count - start
    }

    /// A frame's checksum field (zero until patched) and varints; returns where it starts.
    @inline(__always)
    private static func appendFields(to writer: inout ByteWriter, id: RecordID, length: Int) -> Int {
        let start = writer.count
        writer.u32(0)
        writer.varint(UInt64(length))
        writer.varint(UInt64(id.entity))
        writer.varint(id.serial)
        return start
    }

    /// A version-3 frame's header at `offset`, read but not checked against its checksum:
    /// the record ID, where the body starts and the frame's size. Nil when the varints do
    /// not read or the frame would pass `limit`.
    @inline(__always)
    package static func compactHeader(in buffer: UnsafeRawBufferPointer, at offset: Int,
                                     limit: Int) -> (id: RecordID, bodyStart: Int, size: Int)? {
        // Read in place, without a ByteReader: every record a scan or a lookup reads starts
        // here, and the reader's error paths cost more than the three varints.
        guard offset >= 0, limit <= buffer.count, offset <= limit - minimumCompactSize else { return nil }
        var at = offset + 4
        guard let length = Varint.read(buffer, &at, limit: limit), let entity = Varint.read(buffer, &at, limit: limit),
              let serial = Varint.read(buffer, &at, limit: limit),
              entity >= 1, entity <= UInt64(UInt16.max), serial >= 1, serial <= RecordID.maxSerial,
              length <= UInt64(limit - at) else { return nil }
        return (RecordID(entity: UInt16(entity), serial: serial), at, at - offset + Int(length))
    }

    /// Where the body of a version-3 frame at `offset`, ending at `end`, starts: past its
    /// checksum and three varints, found eight bytes at a time and not decoded. For a frame
    /// already checked whole (``body(in:at:limit:expected:version:)``), whose header need
    /// not be read again; nil if the header is not within eight bytes (then check it).
    @inline(__always)
    package static func checkedBodyStart(in buffer: UnsafeRawBufferPointer, at offset: Int, end: Int) -> Int? {
        guard offset >= 0, end <= buffer.count, offset + 12 <= end else { return nil }
        let word = UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt64.self))
        var ends = ~word & 0x8080_8080_8080_8080  // the last byte of each varint
        ends &= ends &- 1
        ends &= ends &- 1  // the first two cleared: the lowest left ends the third
        guard ends != 0 else { return nil }
        return offset + 4 + ends.trailingZeroBitCount / 8 + 1
    }

    /// The body of the record frame at `offset`, checked: frame within `limit`, checksum,
    /// the ID as expected, and for versions 1–2 alignment and zero padding.
    package static func body(in buffer: UnsafeRawBufferPointer, at offset: Int, limit: Int,
                            expected id: RecordID, version: UInt32) throws -> UnsafeRawBufferPointer {
        guard version >= 3 else { return try fixedBody(in: buffer, at: offset, limit: limit, expected: id) }
        guard let (storedID, bodyStart, size) = compactHeader(in: buffer, at: offset, limit: limit) else {
            throw CairnError.corrupt("record frame header at \(offset) does not read or runs past the record area", offset: offset)
        }
        let stored = UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
        guard CRC32C.masked(UnsafeRawBufferPointer(rebasing: buffer[(offset + 4)..<(offset + size)])) == stored else {
            throw CairnError.corrupt("record frame checksum mismatch", offset: offset)
        }
        guard storedID == id else {
            throw CairnError.corrupt("record frame holds \(storedID) where the index says \(id)", offset: offset + 4)
        }
        return UnsafeRawBufferPointer(rebasing: buffer[bodyStart..<(offset + size)])
    }

    private static func fixedBody(in buffer: UnsafeRawBufferPointer, at offset: Int, limit: Int,
                                  expected id: RecordID) throws -> UnsafeRawBufferPointer {
        guard offset >= 0, offset % 8 == 0, limit <= buffer.count, offset <= limit - fixedHeaderSize else {
            throw CairnError.corrupt("record frame offset \(offset) lies outside the record area", offset: offset)
        }
        let length = Int(UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
        guard length <= limit - offset - fixedHeaderSize else {
            throw CairnError.corrupt("record frame length \(length) runs past the record area", offset: offset)
        }
        let stored = UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self))
        let covered = UnsafeRawBufferPointer(rebasing: buffer[(offset + 8)..<(offset + fixedHeaderSize + length)])
        guard CRC32C.masked(covered) == stored else {
            throw CairnError.corrupt("record frame checksum mismatch", offset: offset)
        }
        let storedID = UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
        guard storedID == id.rawValue else {
            throw CairnError.corrupt("record frame holds \(RecordID(rawValue: storedID)) where the index says \(id)",
                                     offset: offset)
        }
        let end = offset + fixedHeaderSize + length
        let padded = min(limit, (end + 7) / 8 * 8)
        for i in end..<padded where buffer[i] != 0 {
            throw CairnError.corrupt("record frame padding is not zero", offset: i)
        }
        return UnsafeRawBufferPointer(rebasing: buffer[(offset + fixedHeaderSize)..<end])
    }

    /// The ID a frame of `version` at `offset` claims, its size and where the next frame
    /// would start, if its header reads and the frame fits before `limit`; nothing is
    /// checked against the checksum (for salvage: `cairn repair` walks frames without an
    /// index, budgets the bytes it checksums, then checks the frame with ``body(in:at:limit:expected:version:)``).
    package static func header(in buffer: UnsafeRawBufferPointer, at offset: Int, limit: Int,
                              version: UInt32) -> (id: RecordID, size: Int, next: Int)? {
        if version >= 3 { return compactHeader(in: buffer, at: offset, limit: limit).map { ($0.id, $0.size, offset + $0.size) } }
        guard offset >= 0, limit <= buffer.count, offset <= limit - fixedHeaderSize else { return nil }
        let length = Int(UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
        let id = RecordID(rawValue: UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)))
        guard length <= limit - offset - fixedHeaderSize else { return nil }
        return (id, fixedHeaderSize + length, offset + (fixedHeaderSize + length + 7) / 8 * 8)
    }
}

/// The fixed-size footer at the end of a snapshot (FORMAT.md §6.4), validated first.
///
/// ```
///  0  u64 index offset          8  u64 index length
/// 16  u64 schema offset        24  u64 record count
/// 32  u64 last sequence        40  u64 next serial
/// 48  u32 masked CRC of index  52  u32 masked CRC of footer bytes 0..<52
/// 56  8   magic "CAIRNEND"
/// ```
package struct SnapshotFooter: Equatable, Sendable {
    package static let size = 64
    package static let magic: [UInt8] = Array("CAIRNEND".utf8)

    package var indexOffset: UInt64
    package var indexLength: UInt64
    package var schemaOffset: UInt64
    package var recordCount: UInt64
    package var lastSequence: UInt64
    package var nextSerial: UInt64
    package var indexChecksum: UInt32

    package init(indexOffset: UInt64, indexLength: UInt64, schemaOffset: UInt64, recordCount: UInt64,
                lastSequence: UInt64, nextSerial: UInt64, indexChecksum: UInt32) {
        self.indexOffset = indexOffset
        self.indexLength = indexLength
        self.schemaOffset = schemaOffset
        self.recordCount = recordCount
        self.lastSequence = lastSequence
        self.nextSerial = nextSerial
        self.indexChecksum = indexChecksum
    }

    package func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: SnapshotFooter.size)
        writer.u64(indexOffset)
        writer.u64(indexLength)
        writer.u64(schemaOffset)
        writer.u64(recordCount)
        writer.u64(lastSequence)
        writer.u64(nextSerial)
        writer.u32(indexChecksum)
        writer.u32(CRC32C.masked(writer.bytes))
        writer.append(SnapshotFooter.magic)
        return writer.bytes
    }

    /// Decodes the footer from the last 64 bytes of `file`: magic, then checksum, then
    /// the offsets against the file's size. Offsets in errors are file offsets.
    package static func decode(file: UnsafeRawBufferPointer) throws -> SnapshotFooter {
        let minimum = FileHeader.size + size
        guard file.count >= minimum else {
            throw CairnError.corrupt("snapshot is \(file.count) bytes, shorter than the minimum \(minimum)", offset: 0)
        }
        let start = file.count - size
        let footer = UnsafeRawBufferPointer(rebasing: file[start...])
        guard Array(footer[56..<64]) == magic else {
            throw CairnError.corrupt("snapshot footer magic is missing (the file is truncated or damaged)",
                                     offset: start + 56)
        }
        let stored = UInt32(littleEndian: footer.loadUnaligned(fromByteOffset: 52, as: UInt32.self))
        guard CRC32C.masked(UnsafeRawBufferPointer(rebasing: footer[0..<52])) == stored else {
            throw CairnError.corrupt("snapshot footer checksum mismatch", offset: start + 52)
        }
        var reader = ByteReader(footer, base: start)
        let value = SnapshotFooter(indexOffset: try reader.u64(), indexLength: try reader.u64(),
                                   schemaOffset: try reader.u64(), recordCount: try reader.u64(),
                                   lastSequence: try reader.u64(), nextSerial: try reader.u64(),
                                   indexChecksum: try reader.u32())
        let body = UInt64(start)
        guard value.schemaOffset == UInt64(FileHeader.size) else {
            throw CairnError.corrupt("snapshot schema offset \(value.schemaOffset) is not \(FileHeader.size)", offset: start + 16)
        }
        guard value.indexOffset >= UInt64(FileHeader.size), value.indexOffset <= body,
              value.indexLength <= body - value.indexOffset, value.indexOffset % 8 == 0 else {
            throw CairnError.corrupt("snapshot index (offset \(value.indexOffset), length \(value.indexLength)) lies outside the file",
                                     offset: start)
        }
        guard value.nextSerial >= 1, value.nextSerial <= RecordID.maxSerial + 1 else {
            throw CairnError.corrupt("snapshot next serial \(value.nextSerial) is out of range", offset: start + 40)
        }
        guard value.lastSequence <= FormatLimits.maxSequence else {
            throw CairnError.corrupt("snapshot last sequence \(value.lastSequence) exceeds the maximum \(FormatLimits.maxSequence)",
                                     offset: start + 32)
        }
        return value
    }
}

/// The manifest (FORMAT.md §7): which snapshot and log are current. Written whole to
/// `MANIFEST.tmp`, synced, renamed over `MANIFEST`, and the directory synced.
///
/// ```
/// header (64 bytes, kind CAIRNMAN)
/// 64  u64 snapshot file number     72  u64 log file number
/// 80  u64 next file number         88  u32 reserved (0)
/// 92  u32 masked CRC of bytes 64..<92
/// ```
package struct Manifest: Equatable, Sendable {
    package static let size = FileHeader.size + 32

    package var header: FileHeader
    package var snapshotNumber: UInt64
    package var logNumber: UInt64
    package var nextFileNumber: UInt64

    package init(header: FileHeader, snapshotNumber: UInt64, logNumber: UInt64, nextFileNumber: UInt64) {
        self.header = header
        self.snapshotNumber = snapshotNumber
        self.logNumber = logNumber
        self.nextFileNumber = nextFileNumber
    }

    package func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: Manifest.size)
        writer.append(header.encoded())
        writer.u64(snapshotNumber)
        writer.u64(logNumber)
        writer.u64(nextFileNumber)
        writer.u32(0)
        writer.u32(CRC32C.masked(writer.bytes[FileHeader.size...]))
        return writer.bytes
    }

    package static func decode(_ bytes: UnsafeRawBufferPointer) throws -> Manifest {
        let header = try FileHeader.decode(bytes, expected: .manifest)
        guard bytes.count == size else {
            throw CairnError.corrupt("manifest is \(bytes.count) bytes, expected \(size)", offset: 0)
        }
        let stored = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 92, as: UInt32.self))
        guard CRC32C.masked(UnsafeRawBufferPointer(rebasing: bytes[FileHeader.size..<92])) == stored else {
            throw CairnError.corrupt("manifest checksum mismatch", offset: 92)
        }
        var reader = ByteReader(bytes)
        try reader.skip(FileHeader.size)
        let manifest = Manifest(header: header, snapshotNumber: try reader.u64(), logNumber: try reader.u64(),
                                nextFileNumber: try reader.u64())
        try reader.zeros(4, "manifest reserved field")
        guard manifest.snapshotNumber < manifest.nextFileNumber, manifest.logNumber < manifest.nextFileNumber,
              manifest.snapshotNumber != manifest.logNumber, manifest.snapshotNumber > 0, manifest.logNumber > 0 else {
            throw CairnError.corrupt("manifest file numbers are inconsistent", offset: 64)
        }
        guard manifest.nextFileNumber <= FormatLimits.maxFileNumber else {
            throw CairnError.corrupt("manifest next file number \(manifest.nextFileNumber) exceeds the maximum \(FormatLimits.maxFileNumber)",
                                     offset: 80)
        }
        guard header.fileNumber == 0, header.baseSequence == 0 else {
            throw CairnError.corrupt("manifest header file number and base sequence must be 0", offset: 32)
        }
        return manifest
    }
}

/// Names of the files in a store directory (FORMAT.md §8 "Store directory").
package enum StoreFileName {
    package static let manifest = "MANIFEST"
    package static let manifestTemporary = "MANIFEST.tmp"
    package static let lock = "LOCK"
    package static let temporarySuffix = ".tmp"

    package static func snapshot(_ number: UInt64) -> String { padded(number) + ".snapshot" }
    package static func log(_ number: UInt64) -> String { padded(number) + ".log" }
    /// The checkpoint of log `number` (FORMAT.md §12).
    package static func checkpoint(_ number: UInt64) -> String { padded(number) + ".checkpoint" }
    /// The history kept with snapshot `number` (FORMAT.md §14).
    package static func history(_ number: UInt64) -> String { padded(number) + ".history" }

    static func padded(_ number: UInt64) -> String {
        let digits = String(number)
        return String(repeating: "0", count: max(0, 6 - digits.count)) + digits
    }
}
