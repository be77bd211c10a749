/// The snapshot index (FORMAT.md §6.3): for each entity, its records' IDs and frame
/// offsets, sorted by ID, so a record is found by binary search without decoding others;
/// from format version 2 also a table of the attribute indexes stored before it (§6.6).
///
/// ```
/// u32 entity count E, u32 attribute index count A (version 1: reserved, 0)
/// per entity, 24 bytes: u16 entity number, u16 reserved, u32 reserved,
///                       u64 record count, u64 file offset of its entries
/// per attribute index, 24 bytes: u16 entity number, u16 attribute position,
///                       u32 masked CRC of its block, u64 entry count, u64 file offset of its block
/// entries, 16 bytes each: u64 record ID, u64 file offset of the record frame
/// ```
public struct SnapshotIndex: Sendable {
    public struct EntityRange: Sendable, Equatable {
        public var entity: UInt16
        public var count: Int
        /// File offset of the first 16-byte entry.
        public var entriesOffset: Int
    }

    /// One stored attribute index (FORMAT.md §6.6): the positions of an entity's index
    /// entries, `count` little-endian `u32`s at `blockOffset`, in the attribute's value order.
    public struct AttributeIndex: Sendable, Equatable {
        public var entity: UInt16
        /// The attribute's position in the entity (its value slot).
        public var attribute: Int
        public var checksum: UInt32
        public var count: Int
        public var blockOffset: Int

        /// Bytes the block takes, with its padding.
        public var paddedLength: Int { (count * AttributeIndex.entrySize + 7) / 8 * 8 }

        public static let entrySize = 4
    }

    public static let entrySize = 16
    public static let entityHeaderSize = 24
    public static let attributeIndexHeaderSize = 24

    public var entities: [EntityRange]
    public var attributeIndexes: [AttributeIndex] = []

    /// Encodes an index whose entries follow the tables directly, entity by entity.
    /// `entries` maps each entity number to its (ID, frame offset) pairs sorted by ID;
    /// `attributeIndexes` are the blocks already written before `indexOffset`.
    public static func encode(_ entries: [(entity: UInt16, records: [(id: UInt64, offset: UInt64)])],
                              attributeIndexes: [AttributeIndex] = [], at indexOffset: Int) -> [UInt8] {
        var writer = ByteWriter(capacity: 8 + entries.count * entityHeaderSize + attributeIndexes.count * attributeIndexHeaderSize)
        writer.u32(UInt32(entries.count))
        writer.u32(UInt32(attributeIndexes.count))
        var next = indexOffset + 8 + entries.count * entityHeaderSize + attributeIndexes.count * attributeIndexHeaderSize
        for (entity, records) in entries {
            writer.u16(entity)
            writer.u16(0)
            writer.u32(0)
            writer.u64(UInt64(records.count))
            writer.u64(UInt64(next))
            next += records.count * entrySize
        }
        for index in attributeIndexes {
            writer.u16(index.entity)
            writer.u16(UInt16(index.attribute))
            writer.u32(index.checksum)
            writer.u64(UInt64(index.count))
            writer.u64(UInt64(index.blockOffset))
        }
        for (_, records) in entries {
            for record in records {
                writer.u64(record.id)
                writer.u64(record.offset)
            }
        }
        return writer.bytes
    }

    /// Decodes the tables of the index held in `file[indexOffset ..< indexOffset + indexLength]`
    /// and checks each entity's entries lie inside the index. A `version` 1 index has no
    /// attribute indexes (the field is reserved). Attribute index blocks are checked
    /// against the file by ``SnapshotReader``.
    public static func decode(file: UnsafeRawBufferPointer, indexOffset: Int, indexLength: Int,
                              version: UInt32 = FileHeader.currentVersion) throws -> SnapshotIndex {
        let region = UnsafeRawBufferPointer(rebasing: file[indexOffset..<(indexOffset + indexLength)])
        var reader = ByteReader(region, base: indexOffset)
        let count = Int(try reader.u32("index entity count"))
        guard count <= FormatLimits.maxEntities, count * entityHeaderSize <= reader.remaining - 4 else {
            throw CairnError.corrupt("index entity count \(count) does not fit the index", offset: indexOffset)
        }
        let attributeCount: Int
        if version < 2 {
            try reader.zeros(4, "index reserved field")
            attributeCount = 0
        } else {
            attributeCount = Int(try reader.u32("index attribute index count"))
            guard attributeCount <= reader.remaining / attributeIndexHeaderSize,
                  count * entityHeaderSize + attributeCount * attributeIndexHeaderSize <= reader.remaining else {
                throw CairnError.corrupt("index attribute index count \(attributeCount) does not fit the index",
                                         offset: indexOffset + 4)
            }
        }
        var entities: [EntityRange] = []
        entities.reserveCapacity(count)
        let entriesStart = indexOffset + 8 + count * entityHeaderSize + attributeCount * attributeIndexHeaderSize
        var expected = entriesStart
        var previous: UInt16 = 0
        for _ in 0..<count {
            let at = indexOffset + reader.position
            let entity = try reader.u16("entity number")
            try reader.zeros(6, "index entity reserved field")
            let records = try reader.u64("entity record count")
            let offset = try reader.u64("entity entries offset")
            guard entity > previous else {
                throw CairnError.corrupt("index entities are not in ascending order (\(entity) after \(previous))", offset: at)
            }
            guard offset == UInt64(expected), records <= UInt64(indexOffset + indexLength - expected) / UInt64(entrySize) else {
                throw CairnError.corrupt("index entries of entity \(entity) (\(records) at \(offset)) lie outside the index",
                                         offset: at)
            }
            entities.append(EntityRange(entity: entity, count: Int(records), entriesOffset: Int(offset)))
            expected += Int(records) * entrySize
            previous = entity
        }
        guard expected == indexOffset + indexLength else {
            throw CairnError.corrupt("index is \(indexLength) bytes but its entries end at \(expected - indexOffset)",
                                     offset: indexOffset)
        }
        var attributeIndexes: [AttributeIndex] = []
        attributeIndexes.reserveCapacity(attributeCount)
        var previousKey = -1
        var cursor = 0  // rows ascend in entity as the entity table does: one merge pass, not a search per row
        for _ in 0..<attributeCount {
            let at = indexOffset + reader.position
            let entity = try reader.u16("attribute index entity")
            let attribute = try reader.u16("attribute index position")
            let checksum = try reader.u32("attribute index checksum")
            let records = try reader.u64("attribute index entry count")
            let offset = try reader.u64("attribute index block offset")
            let key = Int(entity) << 16 | Int(attribute)
            guard key > previousKey else {
                throw CairnError.corrupt("attribute indexes are not in ascending order (entity \(entity), attribute \(attribute))",
                                         offset: at)
            }
            while cursor < entities.count, entities[cursor].entity < entity { cursor += 1 }
            guard cursor < entities.count, entities[cursor].entity == entity else {
                throw CairnError.corrupt("attribute index names entity \(entity), which has no row in the entity table", offset: at)
            }
            guard records == UInt64(entities[cursor].count) else {
                throw CairnError.corrupt("attribute index of entity \(entity) holds \(records) entries, not one per record of the entity",
                                         offset: at)
            }
            guard offset <= UInt64(indexOffset) else {
                throw CairnError.corrupt("attribute index block at \(offset) lies outside the file", offset: at)
            }
            attributeIndexes.append(AttributeIndex(entity: entity, attribute: Int(attribute), checksum: checksum,
                                                   count: entities[cursor].count, blockOffset: Int(offset)))
            previousKey = key
        }
        return SnapshotIndex(entities: entities, attributeIndexes: attributeIndexes)
    }
}

/// The schema block of a snapshot (FORMAT.md §6.2): `u32 length, u32 masked CRC`, then
/// the schema bytes (FORMAT.md §3), zero-padded to 8 bytes.
public enum SchemaBlock {
    public static func append(to writer: inout ByteWriter, schema bytes: [UInt8]) {
        writer.u32(UInt32(bytes.count))
        writer.u32(CRC32C.masked(bytes))
        writer.append(bytes)
        writer.pad(to: 8)
    }

    /// The schema bytes at `offset` and the offset after the block.
    public static func read(file: UnsafeRawBufferPointer, at offset: Int, limit: Int) throws -> (UnsafeRawBufferPointer, Int) {
        var reader = ByteReader(UnsafeRawBufferPointer(rebasing: file[offset..<limit]), base: offset)
        let length = Int(try reader.u32("schema length"))
        let stored = try reader.u32("schema checksum")
        let bytes = try reader.slice(length, "schema block")
        guard CRC32C.masked(bytes) == stored else {
            throw CairnError.corrupt("schema block checksum mismatch", offset: offset + 4)
        }
        let padded = (8 + length + 7) / 8 * 8
        try reader.zeros(padded - 8 - length, "schema block padding")
        return (bytes, offset + padded)
    }
}
