import Foundation

/// A value guarded by a lock: the only way to reach it is ``withLock(_:)``.
///
/// Used instead of `Synchronization.Mutex` because the thread sanitizer understands
/// `pthread_mutex` (under `NSLock`) but not `Mutex`'s futex on Linux, and the test suite
/// must run clean under it.
// Every access to `value` happens inside `lock`, so sharing across threads is safe.
public final class Protected<Value: Sendable>: @unchecked Sendable {
    @usableFromInline let lock = NSLock()
    /// Reached only inside `lock`, which is not recursive: a second access while one is
    /// under way would deadlock before it could overlap, so the runtime's exclusivity
    /// check (a call and a thread-local set for each ``withLock(_:)``) is skipped.
    @exclusivity(unchecked) @usableFromInline var value: Value

    @inlinable public init(_ value: Value) { self.value = value }

    @inline(__always)
    @inlinable public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
