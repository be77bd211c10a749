import CairnCollections
import Cairn
import CairnStorage
import Synchronization

/// Wraps a file system and fails chosen calls, to test that every I/O error is handled:
/// the operation throws, nothing half-applied is visible, and the store reopens.
///
/// Every call through the wrapper — file-system calls and calls on files it opened —
/// is numbered from 1. The call whose number is in ``failingCalls`` fails with the
/// configured errno (`EIO` by default) without doing anything.
package final class FaultInjectingFileSystem: FileSystem {
    package let base: any FileSystem
    private let counter = Atomic<Int>(0)
    private let plan: Protected<(calls: Set<Int>, errno: Int32)>

    /// - Parameters:
    ///   - failingCalls: the call numbers (1-based) that fail.
    ///   - errno: the error number reported (5 is `EIO`, 28 is `ENOSPC`).
    package init(base: any FileSystem, failingCalls: Set<Int> = [], errno: Int32 = 5) {
        self.base = base
        self.plan = Protected((failingCalls, errno))
    }

    /// The number of calls made so far.
    package var callCount: Int { counter.load(ordering: .relaxed) }

    /// Replaces the set of failing calls (numbers continue from ``callCount``).
    package func fail(calls: Set<Int>, errno: Int32 = 5) {
        plan.withLock { $0 = (calls, errno) }
    }

    func tick(_ call: String, _ path: String) throws {
        let number = counter.add(1, ordering: .relaxed).newValue
        let (calls, code) = plan.withLock { $0 }
        if calls.contains(number) {
            let name = code == 28 ? "no space left on device" : "input/output error"
            throw CairnError(.io, "\(call) failed: \(name) (injected at call \(number))", path: path, errno: code)
        }
    }

    package func open(_ path: String, create: Bool, truncate: Bool) throws -> any StorageFile {
        try tick("open", path)
        return FaultInjectingFile(base: try base.open(path, create: create, truncate: truncate), owner: self)
    }
    package func openForReading(_ path: String) throws -> any StorageFile {
        try tick("open", path)
        return FaultInjectingFile(base: try base.openForReading(path), owner: self)
    }
    package func lockHolder(_ path: String) -> Int32? { base.lockHolder(path) }
    package func exists(_ path: String) -> Bool { base.exists(path) }
    package func isDirectory(_ path: String) -> Bool { base.isDirectory(path) }
    package func listDirectory(_ path: String) throws -> [String] {
        try tick("opendir", path); return try base.listDirectory(path)
    }
    package func createDirectory(_ path: String) throws { try tick("mkdir", path); try base.createDirectory(path) }
    package func rename(_ from: String, _ to: String) throws { try tick("rename", from); try base.rename(from, to) }
    package func remove(_ path: String) throws { try tick("unlink", path); try base.remove(path) }
    package func syncDirectory(_ path: String) throws { try tick("fsync", path); try base.syncDirectory(path) }
    package func lock(_ path: String, storePath: String) throws -> any FileLock {
        try tick("flock", path); return try base.lock(path, storePath: storePath)
    }
}

final class FaultInjectingFile: StorageFile {
    let base: any StorageFile
    let owner: FaultInjectingFileSystem
    init(base: any StorageFile, owner: FaultInjectingFileSystem) { self.base = base; self.owner = owner }
    var path: String { base.path }
    func read(at offset: Int64, count: Int) throws -> [UInt8] {
        try owner.tick("pread", path); return try base.read(at: offset, count: count)
    }
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        try owner.tick("pwrite", path); try base.write(bytes, at: offset)
    }
    func size() throws -> Int64 { try owner.tick("fstat", path); return try base.size() }
    func truncate(to size: Int64) throws { try owner.tick("ftruncate", path); try base.truncate(to: size) }
    func preallocate(to size: Int64) throws { try owner.tick("fallocate", path); try base.preallocate(to: size) }
    func sync() throws { try owner.tick("fdatasync", path); try base.sync() }
    func map() throws -> FileMapping { try owner.tick("mmap", path); return try base.map() }
    func map(following length: Int) throws -> FileMapping {
        try owner.tick("mmap", path); return try base.map(following: length)
    }
    func mapCopyOnWrite() throws -> FileMapping { try owner.tick("mmap", path); return try base.mapCopyOnWrite() }
    /// Not a point of failure: a failed seek answers "data" (see ``POSIXFile``), which
    /// only costs a read.
    func dataExtent(from offset: Int64) -> Range<Int64>? { base.dataExtent(from: offset) }
    func close() { base.close() }
}
