import Synchronization

/// A fixed number of bits that threads set and test without a lock. A bit once set stays
/// set; relaxed ordering suffices for what Cairn keeps in one (a fact about immutable
/// bytes, such as "this frame's checksum was checked", which any thread may find again).
public final class AtomicBitmap: Sendable {
    public let count: Int
    // The words are allocated once, initialized here and freed in deinit; they are read
    // and written only through `Atomic`'s operations, so sharing them is safe.
    nonisolated(unsafe) private let words: UnsafeMutablePointer<Atomic<UInt64>>
    private let wordCount: Int

    public init(count: Int) {
        self.count = max(0, count)
        wordCount = (self.count + 63) / 64
        words = .allocate(capacity: max(wordCount, 1))
        for i in 0..<wordCount { (words + i).initialize(to: Atomic(0)) }
    }

    deinit {
        words.deinitialize(count: wordCount)
        words.deallocate()
    }

    /// Whether bit `i` is set; false for a bit outside the map.
    @inline(__always) public func contains(_ i: Int) -> Bool {
        guard i >= 0, i < count else { return false }
        return words[i &>> 6].load(ordering: .relaxed) & (1 &<< UInt64(i & 63)) != 0
    }

    /// Sets bit `i` (a bit outside the map is ignored).
    @inline(__always) public func insert(_ i: Int) {
        guard i >= 0, i < count else { return }
        words[i &>> 6].bitwiseOr(1 &<< UInt64(i & 63), ordering: .relaxed)
    }
}
