/// The IO layer: the only code in Cairn that makes system calls.
///
/// Everything above talks to a ``FileSystem`` so tests can substitute
/// ``MemoryFileSystem`` (in memory, with crash simulation) or
/// `FaultInjectingFileSystem` (in `CairnTesting`: fails the N-th call). ``POSIXFileSystem`` is the real one.
///
/// Paths are plain strings; the store builds them by joining a directory and a file name.
package protocol FileSystem: Sendable {
    /// Opens a file. `create` makes it if missing; `truncate` empties it.
    func open(_ path: String, create: Bool, truncate: Bool) throws -> any StorageFile
    /// Opens an existing file for reading only (`O_RDONLY`): a reader's handle, which
    /// works on a file it may not write, and through which every write throws.
    func openForReading(_ path: String) throws -> any StorageFile
    /// The process id written in the lock file at `path` by the last process that locked
    /// it, when that process is still running (a writer may hold the store); nil when the
    /// file is missing, names no process, or names one that has ended. Reads only.
    func lockHolder(_ path: String) -> Int32?
    /// Whether something exists at `path`.
    func exists(_ path: String) -> Bool
    /// Whether `path` is a directory.
    func isDirectory(_ path: String) -> Bool
    /// The names (not paths) in a directory, in no particular order.
    func listDirectory(_ path: String) throws -> [String]
    /// Creates a directory (and its parents). No error if it exists.
    func createDirectory(_ path: String) throws
    /// Atomically renames `from` to `to`, replacing `to` if it exists (`rename(2)`).
    func rename(_ from: String, _ to: String) throws
    /// Removes a file (`unlink(2)`).
    func remove(_ path: String) throws
    /// Makes the directory's entries (creates, renames, removes) durable (`fsync` on the directory).
    func syncDirectory(_ path: String) throws
    /// Takes an exclusive advisory lock on the file at `path` (`flock(2)`, non-blocking),
    /// creating it, and writes this process's id into it. Throws `.locked` naming the holder.
    func lock(_ path: String, storePath: String) throws -> any FileLock
}

/// An open file. All offsets are absolute; there is no file position.
package protocol StorageFile: AnyObject, Sendable {
    /// The path the file was opened with.
    var path: String { get }
    /// Reads up to `count` bytes at `offset` (`pread(2)`); fewer only at end of file.
    func read(at offset: Int64, count: Int) throws -> [UInt8]
    /// Writes all of `bytes` at `offset` (`pwrite(2)`), extending the file if needed.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws
    /// The file's size in bytes (`fstat(2)`).
    func size() throws -> Int64
    /// Sets the file's size (`ftruncate(2)`); growing fills with zeros.
    func truncate(to size: Int64) throws
    /// Reserves space so the file is at least `size` bytes of zeros past its data
    /// (`posix_fallocate(3)` on Linux, `ftruncate(2)` elsewhere).
    func preallocate(to size: Int64) throws
    /// Makes the file's data durable (`fdatasync(2)`; `fcntl(F_FULLFSYNC)` on Apple platforms).
    func sync() throws
    /// The whole file as read-only bytes (`mmap(2)` for real files).
    func map() throws -> FileMapping
    /// The file's first `length` bytes as read-only bytes that follow later writes to the
    /// file through any handle (`mmap(2)` with `MAP_SHARED`): the log's record bodies are
    /// read through it while commits append. `length` may run past the end of the file,
    /// to leave room for appends; bytes past the end must not be read (a real mapping
    /// faults there) until a write or size change puts them inside the file.
    func map(following length: Int) throws -> FileMapping
    /// The whole file as bytes this process may also write, privately: writes change
    /// only its own copy of the pages they touch, never the file (`mmap(2)` with
    /// `MAP_PRIVATE`). Pages never written are read from the file when first touched.
    /// (A checkpoint's tables are used in place so, and changed by later commits.)
    func mapCopyOnWrite() throws -> FileMapping
    /// The first stretch at or after `offset` that may hold data (`lseek(2)` with
    /// `SEEK_DATA`, then `SEEK_HOLE`), or nil when none does: from `offset` on, the file
    /// reads as zeros. An answer may call a hole data (a file system that does not track
    /// holes says the whole rest is data), never the reverse; the range may run past
    /// the end of the file.
    func dataExtent(from offset: Int64) -> Range<Int64>?
    /// Closes the file. Further calls fail.
    func close()
}

extension StorageFile {
    package func write(_ bytes: [UInt8], at offset: Int64) throws {
        try bytes.withUnsafeBytes { try write($0, at: offset) }
    }

    /// Reads exactly `count` bytes or throws `.corrupt` (short file).
    package func readExactly(at offset: Int64, count: Int) throws -> [UInt8] {
        let bytes = try read(at: offset, count: count)
        guard bytes.count == count else {
            throw CairnError(.corrupt, "file is shorter than expected: wanted \(count) bytes, found \(bytes.count)",
                             path: path, offset: offset)
        }
        return bytes
    }
}

/// A held lock; released by ``unlock()`` or when the object is freed.
package protocol FileLock: AnyObject, Sendable {
    func unlock()
}

/// What a reader holds in place of the lock: nothing. Readers take no lock, so a writer
/// in another process never waits for one, nor is refused because of one.
package final class NoLock: FileLock {
    package init() {}
    package func unlock() {}
}

/// Read-only bytes of a file: an `mmap` region, or an owned copy for in-memory files.
/// The bytes stay valid as long as the mapping is alive.
package final class FileMapping: Sendable {
    // The pointer is immutable, and this process only reads through it. A mapping that
    // follows writes (`map(following:)`) changes only where the file is written, which the
    // store does only at bytes no reader has been told of yet (FORMAT.md's frames are
    // appended; a failed sync zeroes frame headers, which readers never read).
    nonisolated(unsafe) package let bytes: UnsafeRawBufferPointer
    private let release: @Sendable (UnsafeRawBufferPointer) -> Void
    private let evict: (@Sendable (UnsafeRawBufferPointer) -> Void)?

    init(bytes: UnsafeRawBufferPointer, evict: (@Sendable (UnsafeRawBufferPointer) -> Void)? = nil,
         release: @escaping @Sendable (UnsafeRawBufferPointer) -> Void) {
        self.bytes = bytes
        self.evict = evict
        self.release = release
    }

    /// Lets go of the pages of the file this process holds through the mapping
    /// (`madvise(MADV_DONTNEED)`): they stay in the kernel's page cache and are mapped
    /// again when read, but no longer count in the process's resident set. For a reader
    /// that has passed over a large part of a file (the log at open, a compaction's inputs).
    package func dropResidentPages() { evict?(bytes) }

    /// ``dropResidentPages()`` for the pages that lie wholly inside `range` of the bytes.
    /// On a copy-on-write mapping (``StorageFile/mapCopyOnWrite()``) a page written to
    /// would lose what was written: only for pages nothing has written yet.
    package func dropResidentPages(in range: Range<Int>) {
        guard let evict, let base = bytes.baseAddress, range.lowerBound >= 0, range.upperBound <= bytes.count else { return }
        let page = 1 << 16
        let start = (Int(bitPattern: base) + range.lowerBound + page - 1) & ~(page - 1)
        let end = (Int(bitPattern: base) + range.upperBound) & ~(page - 1)
        guard end > start, let pointer = UnsafeRawPointer(bitPattern: start) else { return }
        evict(UnsafeRawBufferPointer(start: pointer, count: end - start))
    }

    /// A mapping that owns a copy of `contents`.
    package convenience init(copying contents: [UInt8]) {
        self.init(owning: contents.withUnsafeBytes { Self.copy($0) })
    }

    /// A mapping that owns a copy of `contents` (valid for the call).
    package convenience init(copying contents: UnsafeRawBufferPointer) {
        self.init(owning: Self.copy(contents))
    }

    private convenience init(owning copy: UnsafeRawBufferPointer) {
        self.init(bytes: copy) { region in UnsafeMutableRawPointer(mutating: region.baseAddress)?.deallocate() }
    }

    /// A copy of `contents` in memory of its own (at least a byte, so it has an address).
    private static func copy(_ contents: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(contents.count, 1), alignment: 16)
        if let source = contents.baseAddress, let target = storage.baseAddress { target.copyMemory(from: source, byteCount: contents.count) }
        return UnsafeRawBufferPointer(start: storage.baseAddress, count: contents.count)
    }

    deinit { release(bytes) }
}

/// Joins a directory and a name with one slash.
@inline(__always)
package func joinPath(_ directory: String, _ name: String) -> String {
    directory.hasSuffix("/") ? directory + name : directory + "/" + name
}
