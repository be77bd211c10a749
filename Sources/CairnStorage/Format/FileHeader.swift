import Foundation

/// The 64-byte header every Cairn file starts with (FORMAT.md §1.4 "File header").
///
/// Validated in this order, each with its own error: magic (is this the kind of file
/// expected?), format version (can this build read it?), header length, checksum.
package struct FileHeader: Equatable, Sendable {
    /// The kind of file, told by its 8-byte magic.
    package enum Kind: String, Sendable, CaseIterable {
        case log = "CAIRNLOG"
        case snapshot = "CAIRNSNP"
        case manifest = "CAIRNMAN"
        case checkpoint = "CAIRNCKP"
        case history = "CAIRNHST"

        var magic: [UInt8] { Array(rawValue.utf8) }
    }

    /// FORMAT.md §1.4: the header is 64 bytes.
    package static let size = 64
    /// FORMAT.md §1.1: the format version this build writes.
    package static let currentVersion: UInt32 = 6
    /// FORMAT.md §1.1, §11: the versions this build reads; any other is refused.
    package static let readableVersions: ClosedRange<UInt32> = 1...6

    package var kind: Kind
    package var version: UInt32 = FileHeader.currentVersion
    package var storeID: UUID
    /// The file's number; file names carry it too.
    package var fileNumber: UInt64
    /// Log: sequence number of the frame before the first one in this file.
    /// Snapshot: the last sequence number the snapshot covers. Manifest: 0.
    package var baseSequence: UInt64
    /// Milliseconds since 1970-01-01 UTC when the file was made.
    package var createdMilliseconds: UInt64

    package init(kind: Kind, storeID: UUID, fileNumber: UInt64, baseSequence: UInt64, createdMilliseconds: UInt64) {
        self.kind = kind
        self.storeID = storeID
        self.fileNumber = fileNumber
        self.baseSequence = baseSequence
        self.createdMilliseconds = createdMilliseconds
    }

    package func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: FileHeader.size)
        writer.append(kind.magic)
        writer.u32(version)
        writer.u32(UInt32(FileHeader.size))
        withUnsafeBytes(of: storeID.uuid) { writer.append($0) }
        writer.u64(fileNumber)
        writer.u64(baseSequence)
        writer.u64(createdMilliseconds)
        writer.u32(0)
        writer.u32(CRC32C.masked(writer.bytes[0..<60]))
        return writer.bytes
    }

    /// Decodes and validates a header of the `expected` kind.
    package static func decode(_ bytes: UnsafeRawBufferPointer, expected: Kind) throws -> FileHeader {
        guard bytes.count >= size else {
            throw CairnError.corrupt("file is \(bytes.count) bytes, too short for the \(size)-byte \(expected) header", offset: 0)
        }
        let magic = [UInt8](UnsafeRawBufferPointer(rebasing: bytes[0..<8]))
        guard magic == expected.magic else {
            if let other = Kind.allCases.first(where: { $0.magic == magic }) {
                throw CairnError.corrupt("expected a \(expected) file but found a \(other) file", offset: 0)
            }
            throw CairnError.corrupt("bad magic: not a Cairn \(expected) file", offset: 0)
        }
        var reader = ByteReader(bytes)
        try reader.skip(8)
        let version = try reader.u32()
        guard readableVersions.contains(version) else {
            throw CairnError(.unsupportedVersion,
                             "\(expected) file has format version \(version); this build reads versions \(readableVersions.lowerBound) to \(readableVersions.upperBound)",
                             offset: 8)
        }
        let length = try reader.u32()
        guard length == UInt32(size) else {
            throw CairnError.corrupt("header length is \(length), expected \(size)", offset: 12)
        }
        let stored = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 60, as: UInt32.self))
        let actual = CRC32C.masked(UnsafeRawBufferPointer(rebasing: bytes[0..<60]))
        guard stored == actual else {
            throw CairnError.corrupt("\(expected) header checksum mismatch", offset: 60)
        }
        var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let raw = try reader.slice(16)
        withUnsafeMutableBytes(of: &uuid) { $0.copyMemory(from: raw) }
        let fileNumber = try reader.u64()
        let base = try reader.u64()
        let created = try reader.u64()
        try reader.zeros(4, "header reserved field")
        guard fileNumber <= FormatLimits.maxFileNumber else {
            throw CairnError.corrupt("\(expected) header file number \(fileNumber) exceeds the maximum \(FormatLimits.maxFileNumber)", offset: 32)
        }
        guard base <= FormatLimits.maxSequence else {
            throw CairnError.corrupt("\(expected) header base sequence \(base) exceeds the maximum \(FormatLimits.maxSequence)", offset: 40)
        }
        var header = FileHeader(kind: expected, storeID: UUID(uuid: uuid), fileNumber: fileNumber,
                                baseSequence: base, createdMilliseconds: created)
        header.version = version
        return header
    }
}

/// Milliseconds since 1970 now.
func nowMilliseconds() -> UInt64 {
    UInt64(max(0, Date().timeIntervalSince1970 * 1000))
}
