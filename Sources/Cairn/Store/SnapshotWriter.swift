/// Writes a snapshot file front to back, flushing its buffer every megabyte, so that a
/// snapshot of any size is written in bounded memory (plus 16 bytes of index per record).
struct SnapshotWriter {
    static let flushThreshold = 1 << 20

    let file: any StorageFile
    private var buffer = ByteWriter(capacity: SnapshotWriter.flushThreshold + 4096)
    private var flushed = 0
    private var entities: [(entity: UInt16, records: [(id: UInt64, offset: UInt64)])] = []
    private var recordCount: UInt64 = 0

    /// Starts the file: header and schema block.
    init(file: any StorageFile, header: FileHeader, schema: Schema) {
        self.file = file
        buffer.append(header.encoded())
        SchemaBlock.append(to: &buffer, schema: SchemaCoding.encode(schema))
    }

    private var position: Int { flushed + buffer.count }

    private mutating func flushIfNeeded(force: Bool = false) throws {
        guard force || buffer.count >= SnapshotWriter.flushThreshold, buffer.count > 0 else { return }
        try file.write(buffer.bytes, at: Int64(flushed))
        flushed += buffer.count
        buffer.removeAll()
    }

    /// Starts an entity's records; entities must come in ascending number order.
    mutating func beginEntity(_ entity: UInt16) {
        entities.append((entity, []))
    }

    /// Appends one record of the current entity; IDs must ascend.
    mutating func append(id: RecordID, body: UnsafeRawBufferPointer) throws {
        entities[entities.count - 1].records.append((id.rawValue, UInt64(position)))
        SnapshotRecord.append(to: &buffer, id: id, body: body)
        recordCount += 1
        try flushIfNeeded()
    }

    /// Writes index and footer, then syncs the file. Returns the file's size.
    mutating func finish(lastSequence: UInt64, nextSerial: UInt64) throws -> Int {
        let indexOffset = position
        let index = SnapshotIndex.encode(entities.filter { !$0.records.isEmpty }, at: indexOffset)
        entities = []
        buffer.append(index)
        let footer = SnapshotFooter(indexOffset: UInt64(indexOffset), indexLength: UInt64(index.count),
                                    schemaOffset: UInt64(FileHeader.size), recordCount: recordCount,
                                    lastSequence: lastSequence, nextSerial: nextSerial,
                                    indexChecksum: CRC32C.masked(index))
        buffer.append(footer.encoded())
        try flushIfNeeded(force: true)
        try file.sync()
        return flushed
    }
}
