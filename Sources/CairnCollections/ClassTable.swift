import Synchronization

/// Values by class, read without a lock: an insert-only, open-addressed table of atomic
/// slots, each set at most once to an entry that is never freed.
///
/// For the per-class caches that every object creation consults (a class's property
/// layout), so that a lookup takes no mutex and no SipHash hash on every object created.
/// It holds a bounded number of classes; when full, ``insert(_:for:)`` does
/// nothing and the caller keeps its own (locked) table as the fallback.
public final class ClassTable<Value: AnyObject & Sendable>: @unchecked Sendable {
    // Safe to share: `slots` is allocated once and only ever read and written through
    // atomics; a slot goes from 0 to the address of an immutable `Entry` exactly once
    // (compare-exchange, releasing) and readers load it acquiring; entries are retained
    // for the table's lifetime and their fields are `let`.
    @usableFromInline final class Entry: Sendable {
        public let key: ObjectIdentifier
        public let value: Value
        @inlinable public init(key: ObjectIdentifier, value: Value) {
            self.key = key
            self.value = value
        }
    }

    public let capacity: Int
    @usableFromInline let mask: Int
    @usableFromInline let slots: UnsafeMutablePointer<Atomic<UInt>>

    /// A table of `capacity` slots (rounded up to a power of two).
    @inlinable public init(capacity: Int = 512) {
        var size = 1
        while size < max(1, capacity) { size *= 2 }
        self.capacity = size
        mask = size - 1
        slots = .allocate(capacity: size)
        for index in 0..<size { (slots + index).initialize(to: Atomic(0)) }
    }

    deinit {
        for index in 0..<capacity {
            let raw = slots[index].load(ordering: .acquiring)
            if let address = UnsafeRawPointer(bitPattern: raw) { Unmanaged<Entry>.fromOpaque(address).release() }
        }
        slots.deinitialize(count: capacity)
        slots.deallocate()
    }

    @inline(__always) @inlinable func home(_ key: ObjectIdentifier) -> Int {
        let bits = UInt64(UInt(bitPattern: key)) &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: bits >> 32) & mask
    }

    /// The value stored for `type`, if any.
    @inline(__always)
    @inlinable public func value(for type: AnyClass) -> Value? {
        let key = ObjectIdentifier(type)
        var index = home(key)
        for _ in 0..<capacity {
            guard let address = UnsafeRawPointer(bitPattern: slots[index].load(ordering: .acquiring)) else { return nil }
            // (Read without retaining the entry, which this table holds until it goes: a
            // retain and a release of one object that every object creation reads, two
            // atomic operations on one cache line for all threads.)
            let entry = Unmanaged<Entry>.fromOpaque(address)
            if entry._withUnsafeGuaranteedRef({ $0.key == key }) { return entry._withUnsafeGuaranteedRef { $0.value } }
            index = (index &+ 1) & mask
        }
        return nil
    }

    /// Stores `value` for `type` unless the table is full. (Two threads inserting the same
    /// class both succeed; lookups return the first, so values must be interchangeable.)
    @inlinable public func insert(_ value: Value, for type: AnyClass) {
        let key = ObjectIdentifier(type)
        let entry = Unmanaged.passRetained(Entry(key: key, value: value))
        let raw = UInt(bitPattern: entry.toOpaque())
        var index = home(key)
        for _ in 0..<capacity {
            if slots[index].compareExchange(expected: 0, desired: raw, ordering: .acquiringAndReleasing).exchanged { return }
            index = (index &+ 1) & mask
        }
        entry.release()  // full: the caller's own table serves this class
    }
}
