#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The real file system, through POSIX calls. Every call retries on `EINTR` and turns
/// failures into ``CairnError`` with code `.io`, the path and the errno.
package struct POSIXFileSystem: FileSystem {
    package init() {}

    package func open(_ path: String, create: Bool, truncate: Bool) throws -> any StorageFile {
        var flags = O_RDWR | O_CLOEXEC
        if create { flags |= O_CREAT }
        if truncate { flags |= O_TRUNC }
        let fd = try retrying("open", path) { systemOpen(path, flags, 0o644) }
        return POSIXFile(fd: fd, path: path)
    }

    package func openForReading(_ path: String) throws -> any StorageFile {
        let fd = try retrying("open", path) { systemOpen(path, O_RDONLY | O_CLOEXEC, 0) }
        return POSIXFile(fd: fd, path: path)
    }

    package func lockHolder(_ path: String) -> Int32? {
        let fd = systemOpen(path, O_RDONLY | O_CLOEXEC, 0)
        guard fd >= 0 else { return nil }
        defer { _ = systemClose(fd) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 32, 0) }
        guard count > 0, let pid = Int32(String(decoding: buffer[0..<count], as: UTF8.self).trimmingWhitespace()), pid > 0 else {
            return nil
        }
        // Signal 0 checks the process exists; EPERM means it does, owned by another user.
        return kill(pid, 0) == 0 || errno == EPERM ? pid : nil
    }

    /// The file at `path`, opened read-only and mapped whole (for input a command reads,
    /// such as `cairn import`'s: a file that may be large and need not be writable).
    package func mapForReading(_ path: String) throws -> FileMapping {
        let fd = try retrying("open", path) { systemOpen(path, O_RDONLY | O_CLOEXEC, 0) }
        let file = POSIXFile(fd: fd, path: path)
        defer { file.close() }
        return try file.map()  // (a mapping outlives its descriptor)
    }

    package func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    package func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    package func listDirectory(_ path: String) throws -> [String] {
        guard let dir = opendir(path) else { throw ioError("opendir", path) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { pointer in
                pointer.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: entry.pointee.d_name)) {
                    String(cString: $0)
                }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    package func createDirectory(_ path: String) throws {
        if isDirectory(path) { return }
        var prefix = ""
        for component in path.split(separator: "/", omittingEmptySubsequences: false) {
            prefix += prefix.isEmpty && path.hasPrefix("/") ? "/" : (prefix.isEmpty ? "" : "/")
            prefix += component
            if component.isEmpty || isDirectory(prefix) { continue }
            if mkdir(prefix, 0o755) != 0 {
                if errno == EEXIST { continue }
                throw ioError("mkdir", prefix)
            }
            // The new directory's name lives in its parent: make it durable too.
            let cut = prefix.lastIndex(of: "/")
            let parent = cut.map { $0 == prefix.startIndex ? "/" : String(prefix[..<$0]) } ?? "."
            try syncDirectory(parent)
        }
    }

    package func rename(_ from: String, _ to: String) throws {
        _ = try retrying("rename", from) { systemRename(from, to) }
    }

    package func remove(_ path: String) throws {
        _ = try retrying("unlink", path) { unlink(path) }
    }

    package func syncDirectory(_ path: String) throws {
        let fd = try retrying("open", path) { systemOpen(path, O_RDONLY | O_CLOEXEC, 0) }
        defer { _ = systemClose(fd) }
        _ = try retrying("fsync", path) { fsync(fd) }
    }

    package func lock(_ path: String, storePath: String) throws -> any FileLock {
        let fd = try retrying("open", path) { systemOpen(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644) }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            var holder = ""
            var buffer = [UInt8](repeating: 0, count: 32)
            let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 32, 0) }
            if count > 0 { holder = String(decoding: buffer[0..<count], as: UTF8.self).trimmingWhitespace() }
            _ = systemClose(fd)
            if code == EWOULDBLOCK || code == EAGAIN {
                let who = holder.isEmpty ? "another opener" : "pid \(holder)"
                throw CairnError(.locked, "store at \(storePath) is locked by \(who)", path: path)
            }
            throw CairnError(.io, "flock failed: \(errorString(code))", path: path, errno: code)
        }
        // The holder's ID, padded with spaces to a fixed width so that each open overwrites
        // the last one in place: truncating the file first (to write a shorter ID) can be
        // slow on ext4 after heavy writes, and would add to every open.
        var record = Array("\(getpid())".utf8)
        record += [UInt8](repeating: UInt8(ascii: " "), count: max(0, lockRecordSize - 1 - record.count)) + [UInt8(ascii: "\n")]
        var info = stat()
        if fstat(fd, &info) != 0 || Int(info.st_size) > record.count { _ = ftruncate(fd, off_t(record.count)) }
        _ = record.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return POSIXLock(fd: fd)
    }
}

/// An open POSIX file descriptor.
final class POSIXFile: StorageFile {
    // The descriptor is only read after init; the kernel serialises concurrent
    // pread/pwrite on one descriptor, and close is called once by the owner.
    nonisolated(unsafe) private var fd: Int32
    let path: String

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { if fd >= 0 { _ = systemClose(fd) } }

    func read(at offset: Int64, count: Int) throws -> [UInt8] {
        guard count > 0 else { return [] }
        var result = [UInt8](repeating: 0, count: count)
        var done = 0
        try result.withUnsafeMutableBytes { buffer in
            while done < count {
                let n = try retrying("pread", path) {
                    pread(fd, buffer.baseAddress! + done, count - done, off_t(offset) + off_t(done))
                }
                if n == 0 { break }
                done += n
            }
        }
        if done < count { result.removeLast(count - done) }
        return result
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        var done = 0
        while done < bytes.count {
            let n = try retrying("pwrite", path) {
                pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            }
            done += n
        }
    }

    func size() throws -> Int64 {
        var info = stat()
        _ = try retrying("fstat", path) { fstat(fd, &info) }
        return Int64(info.st_size)
    }

    func truncate(to size: Int64) throws {
        _ = try retrying("ftruncate", path) { ftruncate(fd, off_t(size)) }
    }

    func preallocate(to size: Int64) throws {
        #if os(Linux)
        let current = try self.size()
        guard size > current else { return }
        var result: Int32
        repeat { result = posix_fallocate(fd, off_t(current), off_t(size - current)) } while result == EINTR
        if result == 0 { return }
        if result != EOPNOTSUPP && result != EINVAL && result != ENOSYS {
            throw CairnError(.io, "posix_fallocate failed: \(errorString(result))", path: path, errno: result)
        }
        #endif
        try truncate(to: size)
    }

    func sync() throws {
        #if canImport(Darwin)
        if fcntl(fd, F_FULLFSYNC) == 0 { return }
        _ = try retrying("fsync", path) { fsync(fd) }
        #else
        _ = try retrying("fdatasync", path) { fdatasync(fd) }
        #endif
    }

    func map() throws -> FileMapping {
        let length = Int(try size())
        guard length > 0 else { return FileMapping(copying: []) }
        guard let address = mmap(nil, length, PROT_READ, MAP_SHARED, fd, 0), address != MAP_FAILED else {
            throw ioError("mmap", path)
        }
        return FileMapping(bytes: UnsafeRawBufferPointer(start: address, count: length), evict: evictPages) { region in
            _ = munmap(UnsafeMutableRawPointer(mutating: region.baseAddress), region.count)
        }
    }

    func map(following length: Int) throws -> FileMapping {
        guard length > 0 else { return FileMapping(copying: []) }
        guard let address = mmap(nil, length, PROT_READ, MAP_SHARED, fd, 0), address != MAP_FAILED else {
            throw ioError("mmap", path)
        }
        return FileMapping(bytes: UnsafeRawBufferPointer(start: address, count: length), evict: evictPages) { region in
            _ = munmap(UnsafeMutableRawPointer(mutating: region.baseAddress), region.count)
        }
    }

    func mapCopyOnWrite() throws -> FileMapping {
        let length = Int(try size())
        guard length > 0 else { return FileMapping(copying: []) }
        guard let address = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0), address != MAP_FAILED else {
            throw ioError("mmap", path)
        }
        return FileMapping(bytes: UnsafeRawBufferPointer(start: address, count: length), evict: evictPages) { region in
            _ = munmap(UnsafeMutableRawPointer(mutating: region.baseAddress), region.count)
        }
    }

    /// (Read-only shared pages are dropped without loss: they are read again from the file.)
    private let evictPages: @Sendable (UnsafeRawBufferPointer) -> Void = { region in
        _ = madvise(UnsafeMutableRawPointer(mutating: region.baseAddress), region.count, MADV_DONTNEED)
    }

    func dataExtent(from offset: Int64) -> Range<Int64>? {
        // (The constants are not in the imported headers; their values differ by system.)
        #if os(Linux)
        let seekData: Int32 = 3, seekHole: Int32 = 4
        #elseif canImport(Darwin)
        let seekData: Int32 = 4, seekHole: Int32 = 3
        #else
        return offset..<Int64.max
        #endif
        let start = lseek(fd, off_t(offset), seekData)
        if start < 0 { return errno == ENXIO ? nil : offset..<Int64.max }  // ENXIO: no data past `offset`
        let end = lseek(fd, start, seekHole)
        return Int64(start)..<(end > start ? Int64(end) : Int64.max)
    }

    func close() {
        if fd >= 0 { _ = systemClose(fd); fd = -1 }
    }
}

/// A held `flock`; closing the descriptor releases it.
final class POSIXLock: FileLock {
    // Written once in init and once in unlock by the single owner (the store's close).
    nonisolated(unsafe) private var fd: Int32
    init(fd: Int32) { self.fd = fd }
    deinit { unlock() }
    /// Blanks the holder's ID (in place, as the open wrote it) before letting go, so
    /// that a reader does not take a process that has closed the store for its writer
    /// (``POSIXFileSystem/lockHolder(_:)``); a holder that dies keeps its ID there, and
    /// is seen to have ended.
    func unlock() {
        guard fd >= 0 else { return }
        let blank = [UInt8](repeating: UInt8(ascii: " "), count: lockRecordSize - 1) + [UInt8(ascii: "\n")]
        _ = blank.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        _ = flock(fd, LOCK_UN)
        _ = systemClose(fd)
        fd = -1
    }
}

// MARK: - Helpers

private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    #if canImport(Glibc) || canImport(Musl)
    return Glibc.open(path, flags, mode)
    #else
    return Darwin.open(path, flags, mode)
    #endif
}

private func systemClose(_ fd: Int32) -> Int32 {
    #if canImport(Glibc) || canImport(Musl)
    return Glibc.close(fd)
    #else
    return Darwin.close(fd)
    #endif
}

private func systemRename(_ from: String, _ to: String) -> Int32 {
    #if canImport(Glibc) || canImport(Musl)
    return Glibc.rename(from, to)
    #else
    return Darwin.rename(from, to)
    #endif
}

/// Calls `body` until it does not fail with `EINTR`; a negative result becomes a `CairnError`.
private func retrying<T: BinaryInteger>(_ call: String, _ path: String, _ body: () -> T) throws -> T {
    while true {
        let result = body()
        if result >= 0 { return result }
        if errno == EINTR { continue }
        throw ioError(call, path)
    }
}

private func ioError(_ call: String, _ path: String) -> CairnError {
    let code = errno
    if code == ENOENT {
        return CairnError(.notFound, "\(call) failed: no such file or directory", path: path, errno: code)
    }
    return CairnError(.io, "\(call) failed: \(errorString(code))", path: path, errno: code)
}

private func errorString(_ code: Int32) -> String {
    guard let text = strerror(code) else { return "errno \(code)" }
    return String(cString: text)
}

extension String {
    func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let c = s.first, c.isWhitespace { s.removeFirst() }
        while let c = s.last, c.isWhitespace { s.removeLast() }
        return String(s)
    }
}

/// The size of what an opener writes in `LOCK`: its process ID in decimal, spaces, `\n`
/// (FORMAT.md §8 "Lock"); wide enough for any `Int32`.
let lockRecordSize = 12

/// This process's id (`getpid(2)`).
func currentProcessID() -> Int32 { getpid() }
