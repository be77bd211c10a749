import CairnCollections
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A file system in memory that remembers what has been made durable.
///
/// Used by in-memory stores (same engine, no disk) and by the crash tests, in the manner
/// of SQLite's crash VFS and LevelDB's fault-injection `Env`:
///
/// - every data write and size change to a file is *pending* until that file is synced;
/// - every create, rename and remove in a directory is *pending* until that directory is synced;
/// - ``crashImage(_:)`` returns the file system a machine would find after losing power
///   now: the durable state, plus each pending data write kept, dropped or garbled, plus a
///   prefix of the pending directory operations of each directory.
///
/// ``onSync`` is called before every file or directory sync, so a test can take crash
/// images at every sync point of a workload.
package final class MemoryFileSystem: FileSystem {
    /// How pending (unsynced) writes fare in a crash image.
    package enum CrashMode: Sendable {
        /// Every pending write and directory operation survives (a process kill).
        case keepAll
        /// Every pending write and directory operation is lost.
        case dropAll
        /// Each pending write is kept, dropped or overwritten with random bytes, and a
        /// random prefix of each directory's pending operations survives; seeded.
        case random(seed: UInt64)
    }

    /// The file system as another process finds it after this one was killed: every write
    /// stays, and what was not synced is still not durable (the kernel holds it, and a
    /// power loss may still lose it). Locks are not carried over.
    package func afterProcessKill() -> MemoryFileSystem {
        var image = state.withLock { $0 }
        image.locks = []
        image.syncCount = 0
        return MemoryFileSystem(state: image)
    }

    /// What is being synced when ``onSync`` is called.
    package enum SyncPoint: Sendable {
        case file(String)
        case directory(String)
    }

    struct Inode {
        var durable: [UInt8] = []
        var current: [UInt8] = []
        var pending: [PendingWrite] = []
        /// The file's live mappings (``MemoryFile/map(following:)``), which every write
        /// and size change updates. Not part of a crash image.
        var mappings: [WeakRegion] = []
    }

    enum PendingWrite {
        case write(offset: Int, bytes: [UInt8])
        case truncate(Int)
    }

    enum DirectoryOperation {
        case link(name: String, inode: Int)
        case unlink(name: String)
        case rename(from: String, to: String)
    }

    struct State {
        var inodes: [Int: Inode] = [:]
        var nextInode = 1
        /// Current entries: directory path → (name → inode).
        var entries: [String: [String: Int]] = [:]
        /// Durable entries, as of each directory's last sync.
        var durableEntries: [String: [String: Int]] = [:]
        /// Pending operations per directory, in order.
        var pendingDirectoryOperations: [String: [DirectoryOperation]] = [:]
        var locks: Set<String> = []
        var syncCount = 0
    }

    let state: Protected<State>
    private let hook: Protected<(@Sendable (MemoryFileSystem, SyncPoint) -> Void)?>

    package init() {
        state = Protected(State())
        hook = Protected(nil)
    }

    init(state: State) {
        self.state = Protected(state)
        hook = Protected(nil)
    }

    /// Called before each file or directory sync (outside any lock).
    package var onSync: (@Sendable (MemoryFileSystem, SyncPoint) -> Void)? {
        get { hook.withLock { $0 } }
        set { hook.withLock { $0 = newValue } }
    }

    /// The number of syncs (file and directory) performed so far.
    package var syncCount: Int { state.withLock { $0.syncCount } }

    // MARK: Paths

    static func split(_ path: String) -> (directory: String, name: String) {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return (".", String(trimmed)) }
        let directory = slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
        return (directory, String(trimmed[trimmed.index(after: slash)...]))
    }

    static func normalize(_ path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        return String(trimmed)
    }

    // MARK: FileSystem

    package func open(_ path: String, create: Bool, truncate: Bool) throws -> any StorageFile {
        let (directory, name) = Self.split(path)
        let inode: Int = try state.withLock { state in
            guard state.entries[directory] != nil else {
                throw CairnError(.notFound, "open failed: no such directory", path: path, errno: 2)
            }
            if let existing = state.entries[directory]![name] {
                if truncate { state.inodes[existing]!.apply(.truncate(0)) }
                return existing
            }
            guard create else { throw CairnError(.notFound, "open failed: no such file or directory", path: path, errno: 2) }
            let id = state.nextInode
            state.nextInode += 1
            state.inodes[id] = Inode()
            state.entries[directory]![name] = id
            state.pendingDirectoryOperations[directory, default: []].append(.link(name: name, inode: id))
            return id
        }
        return MemoryFile(fileSystem: self, inode: inode, path: path)
    }

    package func exists(_ path: String) -> Bool {
        let normalized = Self.normalize(path)
        let (directory, name) = Self.split(path)
        return state.withLock { $0.entries[normalized] != nil || $0.entries[directory]?[name] != nil }
    }

    package func isDirectory(_ path: String) -> Bool {
        let normalized = Self.normalize(path)
        return state.withLock { $0.entries[normalized] != nil }
    }

    package func listDirectory(_ path: String) throws -> [String] {
        let normalized = Self.normalize(path)
        return try state.withLock { state in
            guard let entries = state.entries[normalized] else {
                throw CairnError(.notFound, "opendir failed: no such directory", path: path, errno: 2)
            }
            let subdirectories = state.entries.keys.filter { $0 != normalized && Self.split($0).directory == normalized }
            return Array(entries.keys) + subdirectories.map { Self.split($0).name }
        }
    }

    /// Directories are created durable at once (a simplification: the store creates its
    /// directory before it writes anything that matters).
    package func createDirectory(_ path: String) throws {
        let normalized = Self.normalize(path)
        state.withLock { state in
            var prefix = normalized
            while state.entries[prefix] == nil {
                state.entries[prefix] = [:]
                state.durableEntries[prefix] = [:]
                let parent = Self.split(prefix).directory
                if parent == prefix { break }
                prefix = parent
            }
        }
    }

    package func rename(_ from: String, _ to: String) throws {
        let (fromDirectory, fromName) = Self.split(from)
        let (toDirectory, toName) = Self.split(to)
        guard fromDirectory == toDirectory else {
            throw CairnError(.invalidArgument, "rename across directories is not supported in memory", path: from)
        }
        try state.withLock { state in
            guard let inode = state.entries[fromDirectory]?[fromName] else {
                throw CairnError(.notFound, "rename failed: no such file or directory", path: from, errno: 2)
            }
            state.entries[fromDirectory]![fromName] = nil
            state.entries[toDirectory]![toName] = inode
            state.pendingDirectoryOperations[fromDirectory, default: []].append(.rename(from: fromName, to: toName))
        }
    }

    package func remove(_ path: String) throws {
        let (directory, name) = Self.split(path)
        try state.withLock { state in
            guard state.entries[directory]?[name] != nil else {
                throw CairnError(.notFound, "unlink failed: no such file or directory", path: path, errno: 2)
            }
            state.entries[directory]![name] = nil
            state.pendingDirectoryOperations[directory, default: []].append(.unlink(name: name))
        }
    }

    package func syncDirectory(_ path: String) throws {
        let normalized = Self.normalize(path)
        onSync?(self, .directory(normalized))
        try state.withLock { state in
            guard state.entries[normalized] != nil else {
                throw CairnError(.notFound, "open failed: no such directory", path: path, errno: 2)
            }
            state.syncCount += 1
            state.durableEntries[normalized] = state.entries[normalized]
            state.pendingDirectoryOperations[normalized] = nil
        }
    }

    package func openForReading(_ path: String) throws -> any StorageFile {
        let (directory, name) = Self.split(path)
        let inode: Int = try state.withLock { state in
            guard let existing = state.entries[directory]?[name] else {
                throw CairnError(.notFound, "open failed: no such file or directory", path: path, errno: 2)
            }
            return existing
        }
        return MemoryFile(fileSystem: self, inode: inode, path: path, readOnly: true)
    }

    /// This process's id while the lock at `path` is held (every holder here is this process).
    package func lockHolder(_ path: String) -> Int32? {
        state.withLock { $0.locks.contains(Self.normalize(path)) } ? currentProcessID() : nil
    }

    package func lock(_ path: String, storePath: String) throws -> any FileLock {
        let normalized = Self.normalize(path)
        try state.withLock { state in
            guard state.locks.insert(normalized).inserted else {
                throw CairnError(.locked, "store at \(storePath) is locked by pid \(currentProcessID()) (this process)",
                                 path: path)
            }
        }
        _ = try open(path, create: true, truncate: false)
        return MemoryLock(fileSystem: self, path: normalized)
    }

    // MARK: Crash images

    /// The file system as it would be found after a power loss at this moment.
    /// Locks are not carried over (the process died).
    package func crashImage(_ mode: CrashMode) -> MemoryFileSystem {
        var random = SplitMix64(seed: { if case .random(let seed) = mode { return seed } else { return 0 } }())
        let snapshot = state.withLock { $0 }
        var image = State()
        image.nextInode = snapshot.nextInode
        for (directory, durable) in snapshot.durableEntries {
            var entries = durable
            let pending = snapshot.pendingDirectoryOperations[directory] ?? []
            let kept: Int
            switch mode {
            case .keepAll: kept = pending.count
            case .dropAll: kept = 0
            case .random: kept = pending.isEmpty ? 0 : Int(random.next() % UInt64(pending.count + 1))
            }
            for operation in pending.prefix(kept) {
                switch operation {
                case .link(let name, let inode): entries[name] = inode
                case .unlink(let name): entries[name] = nil
                case .rename(let from, let to):
                    if let inode = entries[from] { entries[from] = nil; entries[to] = inode }
                }
            }
            image.entries[directory] = entries
            image.durableEntries[directory] = entries
        }
        for (id, inode) in snapshot.inodes {
            var contents = Inode()
            contents.current = inode.durable
            for write in inode.pending {
                let fate: UInt64
                switch mode {
                case .keepAll: fate = 0
                case .dropAll: fate = 1
                case .random: fate = random.next() % 3
                }
                switch (fate, write) {
                case (0, _): contents.apply(write)
                case (2, .write(let offset, let bytes)):
                    var garbage = bytes
                    for index in garbage.indices { garbage[index] = UInt8(truncatingIfNeeded: random.next()) }
                    contents.apply(.write(offset: offset, bytes: garbage))
                default: break
                }
            }
            contents.durable = contents.current
            contents.pending = []
            image.inodes[id] = contents
        }
        return MemoryFileSystem(state: image)
    }

    /// The current bytes of a file, or nil (for tests and tools).
    package func contents(of path: String) -> [UInt8]? {
        let (directory, name) = Self.split(path)
        return state.withLock { state in
            state.entries[directory]?[name].flatMap { state.inodes[$0]?.current }
        }
    }

    /// Replaces a file's bytes, durably (for tests that damage files).
    package func setContents(of path: String, to bytes: [UInt8]) throws {
        let file = try open(path, create: true, truncate: false)
        guard let inode = (file as? MemoryFile)?.inode else { return }
        state.withLock { state in
            state.inodes[inode]!.current = bytes
            state.inodes[inode]!.durable = bytes
            state.inodes[inode]!.pending = []
        }
        file.close()
    }

    func withInode<T>(_ id: Int, _ body: (inout Inode, inout State) throws -> T) rethrows -> T {
        try state.withLock { state in
            var inode = state.inodes[id]!
            state.inodes[id] = nil  // avoid a copy-on-write of the bytes
            defer { state.inodes[id] = inode }
            return try body(&inode, &state)
        }
    }
}

extension MemoryFileSystem.Inode {
    mutating func apply(_ write: MemoryFileSystem.PendingWrite) {
        switch write {
        case .write(let offset, let bytes):
            if current.count < offset + bytes.count {
                current.append(contentsOf: repeatElement(0, count: offset + bytes.count - current.count))
            }
            current.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
            for mapping in mappings { mapping.region?.write(bytes, at: offset) }
        case .truncate(let size):
            if size < current.count {
                for mapping in mappings { mapping.region?.zero(from: size, to: current.count) }
                current.removeLast(current.count - size)
            } else {
                current.append(contentsOf: repeatElement(0, count: size - current.count))
            }
        }
        pending.append(write)
    }
}

/// The buffer of a live mapping of an in-memory file: the file's bytes when it was mapped,
/// then every write and truncation (under the file system's lock), as the page cache
/// shows a real file's through a shared mapping. Bytes cut off by a truncation read as
/// zeros (a real mapping would fault).
final class MemoryRegion: @unchecked Sendable {
    // @unchecked: written only under the file system's lock, and only at bytes past what
    // readers were told of (a commit publishes a record's place after its bytes are
    // written), or bytes a failed write leaves no reader relying on.
    let bytes: UnsafeMutableRawBufferPointer

    init?(length: Int, contents: [UInt8]) {
        // calloc: a large zeroed buffer costs no page until it is written.
        guard let base = calloc(max(length, 1), 1) else { return nil }
        bytes = UnsafeMutableRawBufferPointer(start: base, count: max(length, 1))
        write(contents, at: 0)
    }

    func write(_ source: [UInt8], at offset: Int) {
        guard offset < bytes.count else { return }
        let count = min(source.count, bytes.count - offset)
        source.withUnsafeBytes { source in
            if count > 0, let from = source.baseAddress { (bytes.baseAddress! + offset).copyMemory(from: from, byteCount: count) }
        }
    }

    func zero(from start: Int, to end: Int) {
        let end = min(end, bytes.count)
        if start < end { (bytes.baseAddress! + start).initializeMemory(as: UInt8.self, repeating: 0, count: end - start) }
    }

    deinit { free(bytes.baseAddress) }
}

/// A file's reference to one of its live mappings, which does not keep it alive.
struct WeakRegion {
    weak var region: MemoryRegion?
}

/// An open in-memory file.
final class MemoryFile: StorageFile {
    let fileSystem: MemoryFileSystem
    let inode: Int
    let path: String
    /// Opened for reading only (``MemoryFileSystem/openForReading(_:)``): every change throws.
    let readOnly: Bool
    private let closed = Atomic<Bool>(false)

    init(fileSystem: MemoryFileSystem, inode: Int, path: String, readOnly: Bool = false) {
        self.fileSystem = fileSystem
        self.inode = inode
        self.path = path
        self.readOnly = readOnly
    }

    private func checkOpen() throws {
        if closed.load(ordering: .acquiring) {
            throw CairnError(.io, "file is closed", path: path, errno: 9)
        }
    }

    /// As a descriptor opened `O_RDONLY` answers a write: EBADF.
    private func checkWritable(_ call: String) throws {
        try checkOpen()
        if readOnly { throw CairnError(.io, "\(call) failed: bad file descriptor (opened for reading)", path: path, errno: 9) }
    }

    func read(at offset: Int64, count: Int) throws -> [UInt8] {
        try checkOpen()
        return fileSystem.withInode(inode) { inode, _ in
            let start = min(Int(offset), inode.current.count)
            let end = min(start + count, inode.current.count)
            return Array(inode.current[start..<end])
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        try checkWritable("pwrite")
        let copy = [UInt8](bytes)
        fileSystem.withInode(inode) { inode, _ in inode.apply(.write(offset: Int(offset), bytes: copy)) }
    }

    func size() throws -> Int64 {
        try checkOpen()
        return fileSystem.withInode(inode) { inode, _ in Int64(inode.current.count) }
    }

    func truncate(to size: Int64) throws {
        try checkWritable("ftruncate")
        fileSystem.withInode(inode) { inode, _ in inode.apply(.truncate(Int(size))) }
    }

    func preallocate(to size: Int64) throws {
        try checkWritable("fallocate")
        fileSystem.withInode(inode) { inode, _ in
            if inode.current.count < Int(size) { inode.apply(.truncate(Int(size))) }
        }
    }

    func sync() throws {
        try checkOpen()
        fileSystem.onSync?(fileSystem, .file(path))
        fileSystem.withInode(inode) { inode, state in
            state.syncCount += 1
            inode.durable = inode.current
            inode.pending = []
        }
    }

    func map() throws -> FileMapping {
        try checkOpen()
        return FileMapping(copying: fileSystem.withInode(inode) { inode, _ in inode.current })
    }

    func mapCopyOnWrite() throws -> FileMapping { try map() }

    func map(following length: Int) throws -> FileMapping {
        try checkOpen()
        return try fileSystem.withInode(inode) { inode, _ in
            guard let region = MemoryRegion(length: length, contents: inode.current) else {
                throw CairnError(.io, "no memory to map \(length) bytes of an in-memory file", path: path, errno: 12)
            }
            inode.mappings.removeAll { $0.region == nil }
            inode.mappings.append(WeakRegion(region: region))
            let bytes = UnsafeRawBufferPointer(start: region.bytes.baseAddress, count: length)
            return FileMapping(bytes: bytes) { _ in withExtendedLifetime(region) {} }
        }
    }

    /// As a file system with 4 KiB blocks that tracks holes would answer: data up to the
    /// end of the block holding the last byte that is not zero.
    func dataExtent(from offset: Int64) -> Range<Int64>? {
        let end = fileSystem.withInode(inode) { inode, _ in
            (inode.current.lastIndex { $0 != 0 }).map { ($0 / 4096 + 1) * 4096 } ?? 0
        }
        return offset < Int64(end) ? offset..<Int64(end) : nil
    }

    func close() { closed.store(true, ordering: .releasing) }
}

final class MemoryLock: FileLock {
    let fileSystem: MemoryFileSystem
    let path: String
    private let held = Atomic<Bool>(true)

    init(fileSystem: MemoryFileSystem, path: String) {
        self.fileSystem = fileSystem
        self.path = path
    }

    deinit { unlock() }

    func unlock() {
        if held.exchange(false, ordering: .acquiringAndReleasing) {
            _ = fileSystem.state.withLock { $0.locks.remove(path) }
        }
    }
}

/// A small, fast, seeded random number generator (SplitMix64), for replayable tests
/// and crash images.
package struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    package init(seed: UInt64) { state = seed }
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
