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
            let indexOffset = Int(footer.indexOffset)
            let indexBytes = UnsafeRawBufferPointer(rebasing: bytes[indexOffset..<(indexOffset + Int(footer.indexLength))])
            guard CRC32C.masked(indexBytes) == footer.indexChecksum else {
                throw CairnError.corrupt("snapshot index checksum mismatch", offset: indexOffset)
            }
            index = try SnapshotIndex.decode(file: bytes, indexOffset: indexOffset, indexLength: Int(footer.indexLength),
                                             version: header.version)
            // Entities by number: the index may name up to 65,535 of them, so no linear search per row.
            let entities = Dictionary(schema.entities.map { ($0.number, $0) }, uniquingKeysWith: { first, _ in first })
            recordsEnd = try Self.checkAttributeIndexBlocks(index, entities: entities, file: bytes,
                                                            recordsStart: recordsStart, indexOffset: indexOffset)
            var positions: [UInt16: Int] = [:]
            var total = 0
            for (position, range) in index.entities.enumerated() {
                guard entities[range.entity] != nil else {
                    throw CairnError.corrupt("snapshot index names entity \(range.entity), which the schema lacks", offset: indexOffset)
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

    /// Checks the attribute index blocks (FORMAT.md §6.6) lie back to back, each at a
    /// multiple of 8 with zero padding, from the end of the record area to the index, and
    /// index attributes of their entity. Returns the end of the record area. Their
    /// entries are checked when used (``checkAttributeIndex(_:)``).
    private static func checkAttributeIndexBlocks(_ index: SnapshotIndex, entities: [UInt16: EntityDescription],
                                                  file: UnsafeRawBufferPointer,
                                                  recordsStart: Int, indexOffset: Int) throws -> Int {
        guard let first = index.attributeIndexes.first else { return indexOffset }
        var expected = first.blockOffset
        guard expected >= recordsStart, expected % 8 == 0 else {
            throw CairnError.corrupt("attribute index block at \(expected) is not at a multiple of 8 after the schema block",
                                     offset: indexOffset + 8 + index.entities.count * SnapshotIndex.entityHeaderSize)
        }
        for (row, block) in index.attributeIndexes.enumerated() {
            let at = indexOffset + 8 + index.entities.count * SnapshotIndex.entityHeaderSize + row * SnapshotIndex.attributeIndexHeaderSize
            guard let entity = entities[block.entity], block.attribute < entity.attributes.count else {
                throw CairnError.corrupt("attribute index names attribute \(block.attribute) of entity \(block.entity), which the schema lacks",
                                         offset: at)
            }
            guard block.blockOffset == expected, block.paddedLength <= indexOffset - expected else {
                throw CairnError.corrupt("attribute index block of entity \(block.entity), attribute \(block.attribute) (\(block.count) entries at \(block.blockOffset)) does not follow the previous block or runs into the index",
                                         offset: at)
            }
            let end = expected + block.count * SnapshotIndex.AttributeIndex.entrySize
            expected += block.paddedLength
            for i in end..<expected where file[i] != 0 {
                throw CairnError.corrupt("attribute index block padding is not zero", offset: i)
            }
        }
        guard expected == indexOffset else {
            throw CairnError.corrupt("attribute index blocks end at \(expected), not at the index (\(indexOffset))", offset: expected)
        }
        return first.blockOffset
    }

    var fileSize: Int { mapping.bytes.count }

    /// Checks an attribute index block's checksum (once, before its entries are trusted).
    func checkAttributeIndex(_ block: SnapshotIndex.AttributeIndex) throws {
        let bytes = UnsafeRawBufferPointer(rebasing: mapping.bytes[block.blockOffset..<(block.blockOffset + block.count * 4)])
        guard CRC32C.masked(bytes) == block.checksum else {
            throw CairnError.corrupt("attribute index of entity \(block.entity), attribute \(block.attribute): checksum mismatch",
                                     offset: block.blockOffset).located(in: path)
        }
    }

    /// Checks all of an attribute index (for `cairn verify`): checksum, every record of the
    /// entity listed exactly once, in value order (FORMAT.md §6.6).
    func verifyAttributeIndex(_ block: SnapshotIndex.AttributeIndex) throws {
        try checkAttributeIndex(block)
        var seen = [Bool](repeating: false, count: block.count)
        var previous: (value: Value, id: RecordID)?
        for i in 0..<block.count {
            let (id, offset) = try record(in: block, at: i)
            let at = block.blockOffset + i * SnapshotIndex.AttributeIndex.entrySize
            let position = Int(UInt32(littleEndian: mapping.bytes.loadUnaligned(fromByteOffset: at, as: UInt32.self)))
            guard !seen[position] else {
                throw CairnError.corrupt("attribute index of entity \(block.entity), attribute \(block.attribute) lists \(id) twice",
                                         offset: at).located(in: path)
            }
            seen[position] = true
            let value: Value
            do {
                value = try ValueCoding.value(at: block.attribute, in: try body(at: offset, id: id)) ?? .null
            } catch let error as CairnError {
                throw error.located(in: path, base: Int64(offset + SnapshotRecord.headerSize))
            }
            if let previous {
                let order = IndexOrder.compare(previous.value, value)
                guard order == .orderedAscending || (order == .orderedSame && previous.id < id) else {
                    throw CairnError.corrupt("attribute index of entity \(block.entity), attribute \(block.attribute) is out of order at entry \(i) (\(id) after \(previous.id))",
                                             offset: at).located(in: path)
                }
            }
            previous = (value, id)
        }
    }

    /// The record at place `i` of an attribute index: its ID and frame offset.
    func record(in block: SnapshotIndex.AttributeIndex, at i: Int) throws -> (id: RecordID, offset: Int) {
        let at = block.blockOffset + i * SnapshotIndex.AttributeIndex.entrySize
        let position = Int(UInt32(littleEndian: mapping.bytes.loadUnaligned(fromByteOffset: at, as: UInt32.self)))
        guard let range = entityPositions[block.entity].map({ index.entities[$0] }), position < range.count else {
            throw CairnError.corrupt("attribute index entry \(i) of entity \(block.entity) names position \(position), past its records",
                                     offset: at).located(in: path)
        }
        let (id, offset) = entry(range, position)
        return (RecordID(rawValue: id), Int(clamping: offset))
    }

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
    ///
    /// Serials are handed out in order and rarely skipped, so an entity's IDs are close
    /// to evenly spread: the first probes interpolate (one or two find the entry in a dense
    /// run), and binary search takes over if they do not narrow the range fast.
    func offset(of id: RecordID) -> Int? {
        guard let position = entityPositions[id.entity] else { return nil }
        let range = index.entities[position]
        let wanted = id.rawValue
        var low = 0, high = range.count  // the entry, if present, is in low..<high
        var probes = 0
        while low < high {
            let mid: Int
            if probes < 3 {
                let first = entry(range, low).id, last = entry(range, high - 1).id
                guard wanted >= first, wanted <= last else { return nil }
                let fraction = last == first ? 0 : Double(wanted - first) / Double(last - first)
                mid = min(high - 1, low + Int(fraction * Double(high - 1 - low)))
            } else {
                mid = (low + high) / 2
            }
            probes += 1
            let (candidate, offset) = entry(range, mid)
            if candidate == wanted { return Int(clamping: offset) }
            if candidate < wanted { low = mid + 1 } else { high = mid }
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
