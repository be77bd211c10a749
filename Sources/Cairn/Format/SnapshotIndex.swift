/// The snapshot index (FORMAT.md §6.3): for each entity, its records' IDs and frame
/// offsets, sorted by ID, so a record is found by binary search without decoding others.
///
/// ```
/// u32 entity count, u32 reserved (0)
/// per entity, 24 bytes: u16 entity number, u16 reserved, u32 reserved,
///                       u64 record count, u64 file offset of its entries
/// entries, 16 bytes each: u64 record ID, u64 file offset of the record frame
/// ```
public struct SnapshotIndex: Sendable {
    public struct EntityRange: Sendable, Equatable {
        public var entity: UInt16
        public var count: Int
        /// File offset of the first 16-byte entry.
        public var entriesOffset: Int
    }

    public static let entrySize = 16
    public static let entityHeaderSize = 24

    public var entities: [EntityRange]

    /// Encodes an index whose entries follow the entity table directly, entity by entity.
    /// `entries` maps each entity number to its (ID, frame offset) pairs sorted by ID.
    public static func encode(_ entries: [(entity: UInt16, records: [(id: UInt64, offset: UInt64)])],
                              at indexOffset: Int) -> [UInt8] {
        var writer = ByteWriter(capacity: 8 + entries.count * entityHeaderSize)
        writer.u32(UInt32(entries.count))
        writer.u32(0)
        var next = indexOffset + 8 + entries.count * entityHeaderSize
        for (entity, records) in entries {
            writer.u16(entity)
            writer.u16(0)
            writer.u32(0)
            writer.u64(UInt64(records.count))
            writer.u64(UInt64(next))
            next += records.count * entrySize
        }
        for (_, records) in entries {
            for record in records {
                writer.u64(record.id)
                writer.u64(record.offset)
            }
        }
        return writer.bytes
    }

    /// Decodes the entity table of the index held in `file[indexOffset ..< indexOffset + indexLength]`
    /// and checks each entity's entries lie inside the index.
    public static func decode(file: UnsafeRawBufferPointer, indexOffset: Int, indexLength: Int) throws -> SnapshotIndex {
        let region = UnsafeRawBufferPointer(rebasing: file[indexOffset..<(indexOffset + indexLength)])
        var reader = ByteReader(region, base: indexOffset)
        let count = Int(try reader.u32("index entity count"))
        guard count <= FormatLimits.maxEntities, count * entityHeaderSize <= reader.remaining - 4 else {
            throw CairnError.corrupt("index entity count \(count) does not fit the index", offset: indexOffset)
        }
        try reader.zeros(4, "index reserved field")
        var entities: [EntityRange] = []
        entities.reserveCapacity(count)
        let entriesStart = indexOffset + 8 + count * entityHeaderSize
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
        return SnapshotIndex(entities: entities)
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
