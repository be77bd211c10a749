#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// A fixed number of bits that threads set and test without a lock. A bit once set stays
/// set; relaxed ordering suffices for what Cairn keeps in one (a fact about immutable
/// bytes, such as "this frame's checksum was checked", which any thread may find again).
public final class AtomicBitmap: Sendable {
    public let count: Int
    // The words are allocated once, zeroed, and freed in deinit; they are read and written
    // only through `Atomic`'s operations, so sharing them is safe.
    // (Nil for a map of no bits.)
    nonisolated(unsafe) private let words: UnsafeMutablePointer<Atomic<UInt64>>?

    /// A map of `count` bits, all clear. (If the memory cannot be had, a map of no bits:
    /// every test finds its bit clear, so what it would record is found again, as before it
    /// was recorded.)
    public init(count: Int) {
        let wordCount = max((max(0, count) + 63) / 64, 1)
        // Zeroed by `calloc`, which takes a large map's pages from the system zeroed and
        // touches none of them: a map of a bit per record of a large snapshot costs its
        // open nothing until bits are set. (An `Atomic<UInt64>` of zero is its zero bytes:
        // the words need no other initialization, nor deinitialization.)
        if let memory = calloc(wordCount, MemoryLayout<Atomic<UInt64>>.stride) {
            self.count = max(0, count)
            words = memory.bindMemory(to: Atomic<UInt64>.self, capacity: wordCount)
        } else {
            self.count = 0
            words = nil
        }
    }

    deinit { free(words) }

    /// Whether bit `i` is set; false for a bit outside the map.
    @inline(__always) public func contains(_ i: Int) -> Bool {
        guard i >= 0, i < count, let words else { return false }
        return words[i &>> 6].load(ordering: .relaxed) & (1 &<< UInt64(i & 63)) != 0
    }

    /// Sets bit `i` (a bit outside the map is ignored).
    @inline(__always) public func insert(_ i: Int) {
        guard i >= 0, i < count, let words else { return }
        words[i &>> 6].bitwiseOr(1 &<< UInt64(i & 63), ordering: .relaxed)
    }
}
