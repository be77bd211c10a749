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
    let preallocationBytes: Int
    /// Reused commit buffer.
    var buffer = ByteWriter()
    /// The largest capacity ``buffer`` keeps between commits (one large transaction's
    /// buffer is let go after it, not held for the store's lifetime).
    static let keptBufferCapacity = 1 << 20

    init(file: any StorageFile, fileSystem: any FileSystem, manifest: Manifest, appendOffset: Int,
         allocatedEnd: Int, lastWritten: UInt64, syncedThrough: UInt64, preallocationBytes: Int) {
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
                         syncedThrough: header.baseSequence, preallocationBytes: preallocationBytes)
    }

    /// Appends `buffer` at the tail with one write, reserving space ahead first if needed.
    func appendBuffer() throws {
        let end = appendOffset + buffer.count
        if end > allocatedEnd {
            let target = (end + preallocationBytes - 1) / preallocationBytes * preallocationBytes
            try file.preallocate(to: Int64(target))
            allocatedEnd = target
        }
        try buffer.bytes.withUnsafeBytes { try file.write($0, at: Int64(appendOffset)) }
        appendOffset = end
    }

    /// Syncs the file if anything up to `sequence` may not be durable yet.
    func sync(through sequence: UInt64) throws {
        let target = max(sequence, lastWritten)
        guard syncedThrough < target else { return }
        try file.sync()
        syncedThrough = target
        syncedOffset = appendOffset
    }

    /// After a failed write or sync: cuts the file back to what the last successful sync
    /// covered, so a reopen in the same boot cannot trust frames that the page cache still
    /// holds but the disk may not (after a failed fsync the kernel may drop the dirty pages'
    /// error and mark them clean). Best effort: the store is poisoned either way, and
    /// recovery treats a cut or torn tail as uncommitted.
    func discardUnsynced() {
        guard appendOffset > syncedOffset else { return }
        do {
            try file.truncate(to: Int64(syncedOffset))
            try file.sync()
            appendOffset = syncedOffset
            allocatedEnd = syncedOffset
        } catch {
            // Nothing more to do: the next open cuts whatever tail it cannot trust.
        }
    }
}
