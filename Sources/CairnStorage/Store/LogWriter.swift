/// The tail of the current log file: where the next frame goes, how far space is
/// reserved, and what is known durable.
// Only touched while holding `Store.log` (a Protected lock), or by `close()` after taking it out
// of that mutex; never by two threads at once.
final class LogWriter: @unchecked Sendable {
    let file: any StorageFile
    let fileSystem: any FileSystem
    /// The manifest in force; compaction replaces it together with the writer.
    let manifest: Manifest
    private(set) var appendOffset: Int
    private(set) var allocatedEnd: Int
    /// The highest sequence number written to the file.
    var lastWritten: UInt64
    /// The highest sequence number known durable (FORMAT.md §4: written into each frame).
    private(set) var syncedThrough: UInt64
    /// The end of what the last successful sync covered: bytes past it may not be on disk.
    private(set) var syncedOffset: Int
    /// Whether the frames recovered at open may not be durable yet (a process killed after
    /// writing them left them in the page cache): the file is synced before the first new
    /// frame, which records them as synced-through (FORMAT.md §4.2), or at the first sync
    /// asked for, not on the open's path.
    private var recoveredUnsynced: Bool
    /// The end of everything written, which a frame written in pieces takes past
    /// `appendOffset` before it is whole.
    private var writtenEnd = 0
    let preallocationBytes: Int
    /// Reused commit buffer.
    var buffer = ByteWriter()
    /// The largest capacity ``buffer`` keeps between commits (one large transaction's
    /// buffer is let go after it, not held for the store's lifetime).
    static let keptBufferCapacity = 1 << 20

    /// A reader's log end moves past the frames it took in (``Store/advance()``); it
    /// writes nothing.
    func readerMoved(to offset: Int, lastSequence: UInt64) {
        appendOffset = offset
        lastWritten = lastSequence
    }

    /// The format version of the log's header: frames with history notes (FORMAT.md §5.1)
    /// go only into a log of version 5 or later, which older readers refuse.
    let version: UInt32

    init(file: any StorageFile, fileSystem: any FileSystem, manifest: Manifest, appendOffset: Int,
         allocatedEnd: Int, lastWritten: UInt64, syncedThrough: UInt64, preallocationBytes: Int,
         version: UInt32 = FileHeader.currentVersion, recoveredUnsynced: Bool = false) {
        self.recoveredUnsynced = recoveredUnsynced
        self.version = version
        self.file = file
        self.fileSystem = fileSystem
        self.manifest = manifest
        self.appendOffset = appendOffset
        self.allocatedEnd = allocatedEnd
        self.lastWritten = lastWritten
        self.syncedThrough = syncedThrough
        self.syncedOffset = appendOffset
        self.preallocationBytes = preallocationBytes
    }

    /// Creates a new, empty, synced log file: just its header (the directory is not synced here).
    static func create(at path: String, fileSystem: any FileSystem, header: FileHeader, manifest: Manifest,
                       preallocationBytes: Int) throws -> LogWriter {
        let file = try fileSystem.open(path, create: true, truncate: true)
        do {
            // Space is reserved on the first append, so an idle store stays small.
            try file.write(header.encoded(), at: 0)
            try file.sync()
        } catch {
            file.close()
            throw error
        }
        return LogWriter(file: file, fileSystem: fileSystem, manifest: manifest, appendOffset: FileHeader.size,
                         allocatedEnd: FileHeader.size, lastWritten: header.baseSequence,
                         syncedThrough: header.baseSequence, preallocationBytes: preallocationBytes, version: header.version)
    }

    /// Appends `buffer` at the tail with one write, reserving space ahead first if needed.
    func appendBuffer() throws {
        let end = appendOffset + buffer.count
        try reserve(through: end)
        writtenEnd = max(writtenEnd, end)
        try buffer.bytes.withUnsafeBytes { try file.write($0, at: Int64(appendOffset)) }
        appendOffset = end
    }

    /// Reserves file space (a multiple of the preallocation size) through `end`.
    private func reserve(through end: Int) throws {
        guard end > allocatedEnd else { return }
        let target = (end + preallocationBytes - 1) / preallocationBytes * preallocationBytes
        try file.preallocate(to: Int64(target))
        allocatedEnd = target
    }

    /// Appends one transaction frame (FORMAT.md §4) written in pieces of about `piece`
    /// bytes, through ``buffer``, rather than whole: a large transaction needs no buffer
    /// of its own size. `payloadLength` is the payload's exact size
    /// (``TransactionCoding/encodedSize(_:)``); `encode` writes the payload into the
    /// writer it is given, handing each piece to the closure it is given. The pieces go
    /// first and the header, whose checksum covers them, last: until the header is
    /// written the frame reads as unused space, and a crash that keeps only some pieces
    /// leaves a frame whose checksum fails, a torn tail, as a torn single write would.
    /// Returns the frame's stored (masked) checksum.
    @discardableResult
    func appendFrame(sequence: UInt64, payloadLength: Int, piece: Int,
                     encode: (inout ByteWriter, (inout ByteWriter) throws -> Void) throws -> Void) throws -> UInt32 {
        let start = appendOffset, end = start + LogFrame.frameSize(payloadLength: payloadLength)
        try reserve(through: end)
        buffer.removeAll()
        LogFrame.header(into: &buffer, length: payloadLength, sequence: sequence, syncedThrough: syncedThrough)
        let header = buffer.bytes
        var crc = header.withUnsafeBytes { CRC32C.update(0, UnsafeRawBufferPointer(rebasing: $0[4...])) }
        var position = start + LogFrame.headerSize
        func write(_ piece: inout ByteWriter, checksummed: Bool = true) throws {
            if checksummed { crc = piece.bytes.withUnsafeBytes { CRC32C.update(crc, $0) } }
            writtenEnd = max(writtenEnd, position + piece.count)
            try piece.bytes.withUnsafeBytes { try file.write($0, at: Int64(position)) }
            position += piece.count
            piece.removeAll()
        }
        buffer.removeAll()
        try encode(&buffer) { try write(&$0) }
        try write(&buffer)
        guard position == start + LogFrame.headerSize + payloadLength else {
            throw CairnError(.io, "internal error: a transaction of \(position - start - LogFrame.headerSize) bytes was sized at \(payloadLength)")
        }
        // Zero padding to the frame's end (outside the checksum), then the header with it.
        if end > position {
            buffer.append([UInt8](repeating: 0, count: end - position))
            try write(&buffer, checksummed: false)
        }
        var headerWithChecksum = ByteWriter()
        headerWithChecksum.append(header)
        headerWithChecksum.patch(u32: CRC32C.mask(crc), at: 0)
        writtenEnd = max(writtenEnd, end)
        try headerWithChecksum.bytes.withUnsafeBytes { try file.write($0, at: Int64(start)) }
        appendOffset = end
        return CRC32C.mask(crc)
    }

    /// Syncs the file if anything up to `sequence` may not be durable yet.
    func sync(through sequence: UInt64) throws {
        let target = max(sequence, lastWritten)
        guard syncedThrough < target || recoveredUnsynced else { return }
        try file.sync()
        recoveredUnsynced = false
        syncedThrough = target
        syncedOffset = appendOffset
    }

    /// Syncs the frames recovered at open, if that is still to do: before a new frame
    /// records them as synced-through.
    func syncRecovered() throws {
        guard recoveredUnsynced else { return }
        try file.sync()
        recoveredUnsynced = false
    }

    /// After a failed write or sync: zeroes the header of every frame the last successful
    /// sync did not cover, so a reopen in the same boot cannot trust frames that the page
    /// cache still holds but the disk may not (after a failed fsync the kernel may drop the
    /// dirty pages' error and mark them clean): recovery stops at the first, as at a torn
    /// write, and cuts the rest. Only headers: the bodies stay as they were, since a reader
    /// that took the store's view before the failure may still be reading them through
    /// the mapping (nor is the file shortened, which would make such a read fault). Best
    /// effort: the store is poisoned either way, and recovery treats a torn tail as
    /// uncommitted.
    func discardUnsynced() {
        let end = max(appendOffset, writtenEnd)
        guard end > syncedOffset else { return }
        do {
            let zeros = [UInt8](repeating: 0, count: LogFrame.headerSize)
            var position = syncedOffset
            while position + LogFrame.headerSize <= end {
                let header = try file.read(at: Int64(position), count: LogFrame.headerSize)
                // A header never written: the failed frame, the last; nothing follows it.
                guard header.count == LogFrame.headerSize, header.contains(where: { $0 != 0 }) else { break }
                try file.write(zeros, at: Int64(position))
                let length = header.withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 4, as: UInt32.self))) }
                guard length <= FormatLimits.maxFramePayload else { break }
                position += LogFrame.frameSize(payloadLength: length)
            }
            try file.sync()
            appendOffset = syncedOffset
            writtenEnd = syncedOffset
        } catch {
            // Nothing more to do: the next open cuts whatever tail it cannot trust.
        }
    }
}
