/// The snapshot index (FORMAT.md §6.3): for each entity, its records' IDs and frame
/// offsets, sorted by ID, so a record is found by search without decoding others; from
/// format version 2 also a table of the attribute indexes stored before it (§6.6).
///
/// ```
/// u32 entity count E, u32 attribute index count A (version 1: reserved, 0)
/// per entity, 24 bytes: u16 entity number, u16 reserved, u32 reserved,
///                       u64 record count, u64 file offset of its entries
/// per attribute index, 24 bytes: u16 entity number, u16 attribute position,
///                       u32 masked CRC of its block, u64 entry count, u64 file offset of its block
/// entries, entity by entity:
///   versions 1–2: 16 bytes each: u64 record ID, u64 file offset of the record frame
///   version 3: one 20-byte anchor per group of 16 records (u64 first record ID,
///              u64 frame offset, u32 start of the group in the entry bytes), then the
///              entry bytes: per record, a varint ID delta (not for a group's first)
///              and a varint frame size
/// ```
package struct SnapshotIndex: Sendable {
    package struct EntityRange: Sendable, Equatable {
        package var entity: UInt16
        package var count: Int
        /// File offset of the first 16-byte entry (versions 1–2) or of the first anchor (3).
        package var entriesOffset: Int
        /// Version 3: file offset and length of the entry bytes after the anchors.
        package var entryBytesOffset: Int = 0
        package var entryBytesLength: Int = 0

        /// Version 3: the number of groups, and so of anchors.
        package var groups: Int { (count + SnapshotIndex.groupSize - 1) / SnapshotIndex.groupSize }
    }

    /// One stored attribute index (FORMAT.md §6.6): the positions of an entity's index
    /// entries, `count` little-endian integers of `entryWidth` bytes at `blockOffset`, in
    /// the attribute's value order.
    package struct AttributeIndex: Sendable, Equatable {
        package var entity: UInt16
        /// The attribute's position in the entity (its value slot).
        package var attribute: Int
        package var checksum: UInt32
        package var count: Int
        package var blockOffset: Int
        /// Bytes per entry: 4 in versions 1–2; in version 3 the fewest that hold `count − 1`.
        package var entryWidth: Int

        package init(entity: UInt16, attribute: Int, checksum: UInt32, count: Int, blockOffset: Int, entryWidth: Int) {
            self.entity = entity
            self.attribute = attribute
            self.checksum = checksum
            self.count = count
            self.blockOffset = blockOffset
            self.entryWidth = entryWidth
        }

        /// Bytes the entries take, without padding.
        package var length: Int { count * entryWidth }
        /// Where the block's entries lie in the file: what its checksum covers (not its padding).
        package var entryBytes: Range<Int> { blockOffset..<(blockOffset + length) }
        /// Bytes the block takes, with its padding.
        package var paddedLength: Int { (length + 7) / 8 * 8 }

        /// The entry width of a block of `count` entries in `version`.
        package static func entryWidth(count: Int, version: UInt32) -> Int {
            guard version >= 3 else { return 4 }
            switch count {
            case ...(1 << 8): return 1
            case ...(1 << 16): return 2
            case ...(1 << 24): return 3
            default: return 4
            }
        }

        /// Appends `position` in `width` little-endian bytes.
        package static func append(_ position: Int, width: Int, to writer: inout ByteWriter) {
            for k in 0..<width { writer.u8(UInt8(truncatingIfNeeded: position >> (8 * k))) }
        }
    }

    /// Version 3: records per anchor.
    package static let groupSize = 16
    package static let anchorSize = 20
    /// Versions 1–2: bytes per entry.
    package static let entrySize = 16
    package static let entityHeaderSize = 24
    package static let attributeIndexHeaderSize = 24

    package var entities: [EntityRange]
    package var attributeIndexes: [AttributeIndex] = []

    /// The version-3 entries of one entity, built record by record in ascending ID order.
    package struct Entries: Sendable {
        package private(set) var count = 0
        var anchors = ByteWriter()
        var bytes = ByteWriter()
        private var previous: UInt64 = 0

        package init() {}

        /// Entries with room for about `expected` records, made once: grown by doubling, the
        /// old buffer and the new would both be resident at each step. (Room not written is
        /// not resident.)
        package init(expected: Int) {
            anchors = ByteWriter(capacity: (expected / SnapshotIndex.groupSize + 1) * SnapshotIndex.anchorSize)
            bytes = ByteWriter(capacity: expected * 4)
        }

        /// Adds the next record: its ID (above the previous one), frame offset and size.
        package mutating func add(id: UInt64, offset: Int, size: Int) throws {
            if count % SnapshotIndex.groupSize == 0 {
                guard bytes.count <= Int(UInt32.max) else {
                    throw CairnError(.tooLarge, "an entity's snapshot index entries exceed 4 GiB")
                }
                anchors.u64(id)
                anchors.u64(UInt64(offset))
                anchors.u32(UInt32(bytes.count))
            } else {
                bytes.varint(id &- previous)
            }
            bytes.varint(UInt64(size))
            previous = id
            count += 1
        }

        var encodedCount: Int { anchors.count + bytes.count }
    }

    /// Encodes a version-3 index whose entries follow the tables directly, entity by entity
    /// in ascending number; `attributeIndexes` are the blocks already written before
    /// `indexOffset`.
    package static func encode(_ entities: [(entity: UInt16, entries: Entries)],
                              attributeIndexes: [AttributeIndex] = [], at indexOffset: Int) -> [UInt8] {
        let tables = 8 + entities.count * entityHeaderSize + attributeIndexes.count * attributeIndexHeaderSize
        var writer = ByteWriter(capacity: tables + entities.reduce(0) { $0 + $1.entries.encodedCount })
        writer.u32(UInt32(entities.count))
        writer.u32(UInt32(attributeIndexes.count))
        var next = indexOffset + tables
        for (entity, entries) in entities {
            writer.u16(entity)
            writer.u16(0)
            writer.u32(0)
            writer.u64(UInt64(entries.count))
            writer.u64(UInt64(next))
            next += entries.encodedCount
        }
        for index in attributeIndexes {
            writer.u16(index.entity)
            writer.u16(UInt16(index.attribute))
            writer.u32(index.checksum)
            writer.u64(UInt64(index.count))
            writer.u64(UInt64(index.blockOffset))
        }
        for (_, entries) in entities {
            writer.append(entries.anchors.bytes)
            writer.append(entries.bytes.bytes)
        }
        return writer.bytes
    }

    /// Decodes the tables of the index held in `file[indexOffset ..< indexOffset + indexLength]`
    /// and checks each entity's entries lie inside the index, back to back. A `version` 1
    /// index has no attribute indexes (the field is reserved). The entries themselves are
    /// checked by ``SnapshotReader``, and attribute index blocks against the file.
    package static func decode(file: UnsafeRawBufferPointer, indexOffset: Int, indexLength: Int,
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
        let indexEnd = indexOffset + indexLength
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
            // Version 3 entries take more than two bytes a record (an anchor per 16 records
            // and at least one entry byte each); their entry bytes end where the next
            // entity's entries start (checked below), so a row's offset may only not go back.
            let placed = version >= 3 && !entities.isEmpty
                ? offset >= UInt64(expected) && offset <= UInt64(indexEnd) : offset == UInt64(expected)
            let room = UInt64(indexEnd) - min(offset, UInt64(indexEnd))
            guard placed, records <= room / UInt64(version >= 3 ? 2 : entrySize) else {
                throw CairnError.corrupt("index entries of entity \(entity) (\(records) at \(offset)) lie outside the index",
                                         offset: at)
            }
            var range = EntityRange(entity: entity, count: Int(records), entriesOffset: Int(offset))
            if version >= 3 {
                range.entryBytesOffset = range.entriesOffset + range.groups * anchorSize
                expected = range.entryBytesOffset
            } else {
                expected += range.count * entrySize
            }
            entities.append(range)
            previous = entity
        }
        if version >= 3 {
            // Each entity's entry bytes run to the next entity's entries, the last to the
            // index end; the offsets above were only required not to go backwards.
            for k in entities.indices {
                let end = k + 1 < entities.count ? entities[k + 1].entriesOffset : indexEnd
                guard end >= entities[k].entryBytesOffset, entities[k].count <= end - entities[k].entryBytesOffset else {
                    throw CairnError.corrupt("index entries of entity \(entities[k].entity) overlap the next entity's",
                                             offset: indexOffset + 8 + k * entityHeaderSize)
                }
                entities[k].entryBytesLength = end - entities[k].entryBytesOffset
            }
        }
        if version < 3 || entities.isEmpty, expected != indexEnd {
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
                                                   count: entities[cursor].count, blockOffset: Int(offset),
                                                   entryWidth: AttributeIndex.entryWidth(count: entities[cursor].count, version: version)))
            previousKey = key
        }
        return SnapshotIndex(entities: entities, attributeIndexes: attributeIndexes)
    }
}

/// The schema block of a snapshot (FORMAT.md §6.2): `u32 length, u32 masked CRC`, then
/// the schema bytes (FORMAT.md §3), zero-padded to 8 bytes.
package enum SchemaBlock {
    package static func append(to writer: inout ByteWriter, schema bytes: [UInt8]) {
        writer.u32(UInt32(bytes.count))
        writer.u32(CRC32C.masked(bytes))
        writer.append(bytes)
        writer.pad(to: 8)
    }

    /// The schema bytes at `offset` and the offset after the block.
    package static func read(file: UnsafeRawBufferPointer, at offset: Int, limit: Int) throws -> (UnsafeRawBufferPointer, Int) {
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
