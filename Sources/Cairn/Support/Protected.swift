import Foundation

/// A value guarded by a lock: the only way to reach it is ``withLock(_:)``.
///
/// Used instead of `Synchronization.Mutex` because the thread sanitizer understands
/// `pthread_mutex` (under `NSLock`) but not `Mutex`'s futex on Linux, and the test suite
/// must run clean under it.
// Every access to `value` happens inside `lock`, so sharing across threads is safe.
final class Protected<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    /// Reached only inside `lock`, which is not recursive: a second access while one is
    /// under way would deadlock before it could overlap, so the runtime's exclusivity
    /// check (a call and a thread-local set for each ``withLock(_:)``) is skipped.
    @exclusivity(unchecked) private var value: Value

    init(_ value: Value) { self.value = value }

    @inline(__always)
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
