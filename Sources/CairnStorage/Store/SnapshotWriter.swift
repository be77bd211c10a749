/// Writes a snapshot file front to back, flushing its buffer every megabyte, so that a
/// snapshot of any size is written in bounded memory (plus its index, about 3 bytes a
/// record, and while an entity is written, the values of its indexed attributes: a byte
/// or two a record for integers that ascend, see ``IndexColumn``).
struct SnapshotWriter {
    static let flushThreshold = 1 << 20

    let file: any StorageFile
    let schema: Schema
    private var buffer = ByteWriter(capacity: SnapshotWriter.flushThreshold + 4096)
    private var flushed = 0
    private var entities: [(entity: UInt16, entries: SnapshotIndex.Entries)] = []
    private(set) var recordCount: UInt64 = 0
    /// The current entity's indexed attributes (FORMAT.md §6.6) and their values so far.
    private var indexedSlots: [Int] = []
    private var indexedValues: [IndexColumn] = []
    /// Finished entities' attribute indexes: record positions in value order.
    private var attributeIndexes: [(entity: UInt16, attribute: Int, positions: IndexPositions)] = []

    /// Starts the file: header and schema block.
    init(file: any StorageFile, header: FileHeader, schema: Schema) {
        self.file = file
        self.schema = schema
        buffer.append(header.encoded())
        SchemaBlock.append(to: &buffer, schema: SchemaCoding.encode(schema))
    }

    /// Bytes written so far (the offset of the next).
    var position: Int { flushed + buffer.count }

    private mutating func flushIfNeeded(force: Bool = false) throws {
        guard force || buffer.count >= SnapshotWriter.flushThreshold, buffer.count > 0 else { return }
        try file.write(buffer.bytes, at: Int64(flushed))
        flushed += buffer.count
        buffer.removeAll()
    }

    /// Zero bytes up to the next multiple of 8 in the file (flushes leave the buffer at any offset).
    private mutating func padToEight() {
        for _ in 0..<((8 - position % 8) % 8) { buffer.u8(0) }
    }

    /// Starts an entity's records; entities must come in ascending number order. About
    /// `expected` records will follow (room is made for their index entries, not a limit).
    mutating func beginEntity(_ entity: UInt16, expected: Int = 0) {
        endEntity()
        entities.append((entity, SnapshotIndex.Entries(expected: expected)))
        indexedSlots = schema.entity(number: entity)?.storedIndexSlots ?? []
        indexedValues = indexedSlots.map { _ in IndexColumn() }
    }

    /// Sorts the current entity's indexed values into attribute indexes. An entity with no
    /// records has none (FORMAT.md §6.6), nor one with more than a `u32` can count.
    private mutating func endEntity() {
        guard let entity = entities.last?.entity else { return }
        let count = entities[entities.count - 1].entries.count
        if count > 0, count <= Int(UInt32.max) {
            for (k, slot) in indexedSlots.enumerated() {
                // (Taken out of the array first, so that its keys are sorted in place, not copied.)
                var column = indexedValues[k]
                indexedValues[k] = IndexColumn()
                attributeIndexes.append((entity, slot, column.takeSortedPositions()))
            }
        }
        indexedSlots = []
        indexedValues = []
    }

    /// Appends one record of the current entity; IDs must ascend.
    mutating func append(id: RecordID, body: UnsafeRawBufferPointer) throws {
        guard body.count >= SnapshotWriter.flushThreshold else {
            return try append(id: id, body: body) { SnapshotRecord.append(to: &$0, id: id, body: body) }
        }
        // A large body goes to the file from where it lies, not through the buffer.
        try append(id: id, body: body, then: body) { SnapshotRecord.appendHeader(to: &$0, id: id, body: body) }
    }

    /// Appends one record of the current entity as a whole frame, checked already, of a
    /// snapshot of the current format version (``SnapshotReader/currentFrame(at:id:)``):
    /// the same bytes ``append(id:body:)`` would write, without computing the checksum again.
    mutating func append(id: RecordID, frame: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer) throws {
        guard frame.count >= SnapshotWriter.flushThreshold else {
            return try append(id: id, body: body) { buffer in
                buffer.append(frame)
                return frame.count
            }
        }
        try append(id: id, body: body, then: frame) { _ in 0 }
    }

    /// One record: its index keys from `body`, its frame written by `write` (which
    /// returns the bytes it wrote) and then `direct`, written to the file from where it
    /// lies, its index entry.
    private mutating func append(id: RecordID, body: UnsafeRawBufferPointer, then direct: UnsafeRawBufferPointer? = nil,
                                 write: (inout ByteWriter) -> Int) throws {
        for (k, slot) in indexedSlots.enumerated() {
            indexedValues[k].append(try ValueCoding.value(at: slot, in: body) ?? .null)
        }
        let offset = position
        var size = write(&buffer)
        if let direct {
            try flushIfNeeded(force: true)
            try file.write(direct, at: Int64(flushed))
            flushed += direct.count
            size += direct.count
        }
        try entities[entities.count - 1].entries.add(id: id.rawValue, offset: offset, size: size)
        recordCount += 1
        try flushIfNeeded()
    }

    /// Writes attribute index blocks, index and footer, then syncs the file. Returns the file's size.
    mutating func finish(lastSequence: UInt64, nextSerial: UInt64) throws -> Int {
        endEntity()
        padToEight()  // the record area ends with zero padding; blocks and index start at multiples of 8
        var blocks: [SnapshotIndex.AttributeIndex] = []
        for (entity, attribute, positions) in attributeIndexes {
            let width = SnapshotIndex.AttributeIndex.entryWidth(count: positions.count, version: FileHeader.currentVersion)
            // Written through the buffer as it is made, its checksum taken at each flush (the
            // buffer holds only the block's bytes from here), not made whole in memory first.
            try flushIfNeeded(force: true)
            let blockOffset = position
            var crc: UInt32 = 0
            try positions.forEach { place in
                SnapshotIndex.AttributeIndex.append(place, width: width, to: &buffer)
                if buffer.count >= SnapshotWriter.flushThreshold {
                    crc = buffer.bytes.withUnsafeBytes { CRC32C.update(crc, $0) }
                    try flushIfNeeded(force: true)
                }
            }
            crc = buffer.bytes.withUnsafeBytes { CRC32C.update(crc, $0) }
            blocks.append(SnapshotIndex.AttributeIndex(entity: entity, attribute: attribute, checksum: CRC32C.mask(crc),
                                                       count: positions.count, blockOffset: blockOffset, entryWidth: width))
            padToEight()
            try flushIfNeeded()
        }
        attributeIndexes = []
        let indexOffset = position
        let index = SnapshotIndex.encode(entities.filter { $0.entries.count > 0 }, attributeIndexes: blocks, at: indexOffset)
        entities = []
        buffer.append(index)
        let footer = SnapshotFooter(indexOffset: UInt64(indexOffset), indexLength: UInt64(index.count),
                                    schemaOffset: UInt64(FileHeader.size), recordCount: recordCount,
                                    lastSequence: lastSequence, nextSerial: nextSerial,
                                    indexChecksum: index.withUnsafeBytes { ChecksumInParts.masked($0) })
        buffer.append(footer.encoded())
        try flushIfNeeded(force: true)
        try file.sync()
        return flushed
    }
}

/// One indexed attribute's values over an entity's records, in record order. Integers of
/// one width, the usual indexed values, are kept as plain numbers (8 bytes each, not a
/// `Value`'s 24), with the positions of nils; while they do not descend (counters,
/// timestamps, IDs), as the varint differences between them, a byte or two each, and in
/// that order they need no sort. The first other value turns the column into values.
struct IndexColumn {
    /// The integers' differences, each from the one before (the first from 0), while none
    /// descends; nil once one did, and the integers are in `keys`.
    private var rising: ByteWriter? = ByteWriter()
    /// The last integer appended.
    private var last: Int64 = 0
    private var integerCount = 0
    private var keys: [Int64] = []
    private var nullPositions: [Int] = []
    /// The integers' type, once one is seen.
    private var width: AttributeType?
    private var values: [Value]?
    private var count = 0

    mutating func append(_ value: Value) {
        defer { count += 1 }
        if values != nil {
            values!.append(value)
            return
        }
        if case .null = value {
            nullPositions.append(count)
            return
        }
        guard let (key, kind) = value.integerAndWidth, kind == width ?? kind else {
            values = materialized()
            values!.append(value)
            return
        }
        width = kind
        defer { (last, integerCount) = (key, integerCount + 1) }
        if rising != nil {
            if integerCount == 0 || key >= last {
                // (The difference of two Int64s, one not below the other, fits a UInt64.)
                rising!.varint(UInt64(bitPattern: key) &- UInt64(bitPattern: integerCount == 0 ? 0 : last))
                return
            }
            keys = risingKeys()
            rising = nil
        }
        keys.append(key)
    }

    /// The integers so far, from `rising`.
    private func risingKeys() -> [Int64] {
        guard let rising else { return keys }
        var result: [Int64] = []
        result.reserveCapacity(integerCount + 1)
        var key: UInt64 = 0, at = 0
        rising.bytes.withUnsafeBytes { buffer in
            // (Varints this column wrote: each reads.)
            while let difference = Varint.read(buffer, &at, limit: buffer.count) {
                key &+= difference
                result.append(Int64(bitPattern: key))
            }
        }
        return result
    }

    /// The values so far, as `Value`s.
    private func materialized() -> [Value] {
        let keys = risingKeys()
        var result: [Value] = []
        result.reserveCapacity(count + 1)
        var nextNull = 0, key = 0
        for position in 0..<count {
            if nextNull < nullPositions.count, nullPositions[nextNull] == position {
                result.append(.null)
                nextNull += 1
                continue
            }
            result.append(Value(integer: keys[key], width: width ?? .int64))
            key += 1
        }
        return result
    }

    /// The record positions in index order (``IndexOrder``). The integers are sorted in
    /// place: the column is left empty.
    mutating func takeSortedPositions() -> IndexPositions {
        defer { self = IndexColumn() }
        if let values { return .listed(IndexOrder.sortedPositions(values).map { UInt32(truncatingIfNeeded: $0) }) }
        if rising != nil { return .nullsFirst(nullPositions, count: count) }
        return .listed(IndexOrder.sortedPositions(integerKeys: &keys, nullPositions: nullPositions, count: count))
    }
}

/// An attribute index's record positions in index order: listed, or (for values that
/// did not descend) the nils' positions, then every other position in order.
enum IndexPositions: Equatable {
    case listed([UInt32])
    case nullsFirst([Int], count: Int)

    var count: Int {
        switch self {
        case .listed(let positions): return positions.count
        case .nullsFirst(_, let count): return count
        }
    }

    func forEach(_ body: (Int) throws -> Void) rethrows {
        switch self {
        case .listed(let positions):
            for position in positions { try body(Int(position)) }
        case .nullsFirst(let nulls, let count):
            for position in nulls { try body(position) }
            var nextNull = 0
            for position in 0..<count {
                if nextNull < nulls.count, nulls[nextNull] == position {
                    nextNull += 1
                    continue
                }
                try body(position)
            }
        }
    }

    /// The positions, listed.
    var listed: [Int] {
        var result: [Int] = []
        result.reserveCapacity(count)
        forEach { result.append($0) }
        return result
    }
}
