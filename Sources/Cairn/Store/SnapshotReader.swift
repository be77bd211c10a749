/// An open snapshot file: validated header, footer, schema and index; records are found
/// by binary search in the index and checked (CRC) when read, never all decoded at open.
final class SnapshotReader: Sendable {
    let path: String
    let mapping: FileMapping
    let header: FileHeader
    let footer: SnapshotFooter
    let schema: Schema
    let index: SnapshotIndex
    /// Records lie in `recordsStart ..< recordsEnd`.
    let recordsStart: Int
    let recordsEnd: Int
    /// Entity number → position in `index.entities`.
    private let entityPositions: [UInt16: Int]

    /// Opens and validates (in order: header, footer, schema, index) the snapshot `file`.
    init(file: any StorageFile, expectedStore: FileHeader? = nil) throws {
        path = file.path
        mapping = try file.map()
        let bytes = mapping.bytes
        do {
            header = try FileHeader.decode(bytes, expected: .snapshot)
            if let expected = expectedStore {
                guard header.storeID == expected.storeID else {
                    throw CairnError.corrupt("snapshot belongs to another store (\(header.storeID))", offset: 16)
                }
                guard header.fileNumber == expected.fileNumber else {
                    throw CairnError.corrupt("snapshot header says file \(header.fileNumber), expected \(expected.fileNumber)", offset: 32)
                }
            }
            footer = try SnapshotFooter.decode(file: bytes)
            let (schemaBytes, afterSchema) = try SchemaBlock.read(file: bytes, at: Int(footer.schemaOffset),
                                                                  limit: Int(footer.indexOffset))
            schema = try SchemaCoding.decode(schemaBytes, base: Int(footer.schemaOffset) + 8)
            guard footer.lastSequence == header.baseSequence else {
                throw CairnError.corrupt("snapshot footer covers sequence \(footer.lastSequence) but its header says \(header.baseSequence)",
                                         offset: bytes.count - SnapshotFooter.size + 32)
            }
            recordsStart = afterSchema
            recordsEnd = Int(footer.indexOffset)
            let indexBytes = UnsafeRawBufferPointer(rebasing: bytes[recordsEnd..<(recordsEnd + Int(footer.indexLength))])
            guard CRC32C.masked(indexBytes) == footer.indexChecksum else {
                throw CairnError.corrupt("snapshot index checksum mismatch", offset: recordsEnd)
            }
            index = try SnapshotIndex.decode(file: bytes, indexOffset: recordsEnd, indexLength: Int(footer.indexLength))
            var positions: [UInt16: Int] = [:]
            var total = 0
            for (position, range) in index.entities.enumerated() {
                guard schema.entity(number: range.entity) != nil else {
                    throw CairnError.corrupt("snapshot index names entity \(range.entity), which the schema lacks", offset: recordsEnd)
                }
                positions[range.entity] = position
                total += range.count
            }
            guard UInt64(total) == footer.recordCount else {
                throw CairnError.corrupt("snapshot index holds \(total) records but the footer says \(footer.recordCount)",
                                         offset: bytes.count - SnapshotFooter.size + 24)
            }
            entityPositions = positions
            // Entries: IDs of their entity, strictly ascending (binary search and merges rely
            // on it), frame offsets inside the record area. One pass over the index only.
            for range in index.entities {
                var previous: UInt64? = nil
                for i in 0..<range.count {
                    let (id, offset) = Self.entry(bytes, range, i)
                    guard RecordID(rawValue: id).entity == range.entity, previous.map({ $0 < id }) ?? true,
                          offset >= UInt64(recordsStart), offset % 8 == 0,
                          offset + UInt64(SnapshotRecord.headerSize) <= UInt64(recordsEnd) else {
                        throw CairnError.corrupt(
                            "snapshot index entry \(i) of entity \(range.entity) (\(RecordID(rawValue: id)) at \(offset)) is out of order, of another entity, or outside the record area",
                            offset: range.entriesOffset + i * SnapshotIndex.entrySize)
                    }
                    previous = id
                }
            }
        } catch let error as CairnError {
            throw error.located(in: file.path)
        }
    }

    var fileSize: Int { mapping.bytes.count }

    func count(of entity: UInt16) -> Int {
        entityPositions[entity].map { index.entities[$0].count } ?? 0
    }

    @inline(__always) private func entry(_ range: SnapshotIndex.EntityRange, _ i: Int) -> (id: UInt64, offset: UInt64) {
        Self.entry(mapping.bytes, range, i)
    }

    @inline(__always) private static func entry(_ bytes: UnsafeRawBufferPointer, _ range: SnapshotIndex.EntityRange,
                                                _ i: Int) -> (id: UInt64, offset: UInt64) {
        let at = range.entriesOffset + i * SnapshotIndex.entrySize
        return (UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self)),
                UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self)))
    }

    /// The frame offset of `id`, or nil if the snapshot does not hold it.
    func offset(of id: RecordID) -> Int? {
        guard let position = entityPositions[id.entity] else { return nil }
        let range = index.entities[position]
        var low = 0, high = range.count
        while low < high {
            let mid = (low + high) / 2
            let (candidate, offset) = entry(range, mid)
            if candidate == id.rawValue { return Int(clamping: offset) }
            if candidate < id.rawValue { low = mid + 1 } else { high = mid }
        }
        return nil
    }

    func contains(_ id: RecordID) -> Bool { offset(of: id) != nil }

    /// The checked body of the record frame at `offset` (valid while `self` is alive).
    func body(at offset: Int, id: RecordID) throws -> UnsafeRawBufferPointer {
        do {
            return try SnapshotRecord.body(in: mapping.bytes, at: offset, limit: recordsEnd, expected: id)
        } catch let error as CairnError {
            throw error.located(in: path)
        }
    }

    /// Calls `body` for each record of `entity` in ID order.
    func forEach(entity: UInt16, _ body: (RecordID, Int) throws -> Void) rethrows {
        guard let position = entityPositions[entity] else { return }
        let range = index.entities[position]
        for i in 0..<range.count {
            let (id, offset) = entry(range, i)
            try body(RecordID(rawValue: id), Int(clamping: offset))
        }
    }

    /// Every (ID, offset) of `entity`, in ID order.
    func entries(of entity: UInt16) -> [(id: UInt64, offset: Int)] {
        var result: [(id: UInt64, offset: Int)] = []
        result.reserveCapacity(count(of: entity))
        forEach(entity: entity) { result.append(($0.rawValue, $1)) }
        return result
    }
}
