/// Hands every ``IDMap`` its own seed.
private let idMapSeeds = Protected<UInt64>(0)

/// A key of an ``IDMap``: 64 bits, of which 0 is kept apart (the buckets mark an empty
/// slot with it). Record IDs are keys as they are; so are raw `UInt64`s.
public protocol IDMapKey: Hashable {
    var rawValue: UInt64 { get }
    init(rawValue: UInt64)
}

extension UInt64: IDMapKey {
    @inline(__always) @inlinable public var rawValue: UInt64 { self }
    @inline(__always) @inlinable public init(rawValue: UInt64) { self = rawValue }
}

/// The buckets of an ``IDMap``, its one storage handle: key bits (0 = empty) and, for
/// occupied buckets only, initialized values. Shared between copies of a map until one
/// of them writes.
@usableFromInline final class IDMapBuckets<Value> {
    @usableFromInline let capacity: Int
    @usableFromInline let keys: UnsafeMutablePointer<UInt64>
    @usableFromInline let values: UnsafeMutablePointer<Value>
    /// What keeps `keys` and `values` alive when this object did not allocate them (a
    /// checkpoint's mapped tables, ``init(capacity:keys:values:owner:)``); nil otherwise.
    @usableFromInline let owner: AnyObject?

    @inlinable init(capacity: Int) {
        self.capacity = capacity
        keys = .allocate(capacity: capacity)
        keys.initialize(repeating: 0, count: capacity)
        values = .allocate(capacity: capacity)
        owner = nil
    }

    /// Buckets in memory `owner` keeps alive and this object may write (a copy-on-write
    /// mapping of a file): `capacity` keys, and a value of a trivial type for each
    /// bucket whose key is not 0. Nothing is freed when the buckets are.
    @usableFromInline init(capacity: Int, keys: UnsafeMutablePointer<UInt64>, values: UnsafeMutablePointer<Value>, owner: AnyObject) {
        precondition(_isPOD(Value.self), "only buckets of trivial values live in borrowed memory")
        self.capacity = capacity
        self.keys = keys
        self.values = values
        self.owner = owner
    }

    /// A copy with the same capacity and layout (for a write to a shared map).
    @inlinable func copy() -> IDMapBuckets {
        let copy = IDMapBuckets(capacity: capacity)
        copy.keys.update(from: keys, count: capacity)
        for index in 0..<capacity where keys[index] != 0 { (copy.values + index).initialize(to: values[index]) }
        return copy
    }

    deinit {
        guard owner == nil else { return }
        // (Values of a trivial type need no walk over the buckets.)
        if !_isPOD(Value.self) {
            for index in 0..<capacity where keys[index] != 0 { (values + index).deinitialize(count: 1) }
        }
        keys.deallocate()
        values.deallocate()
    }
}

/// A hash map keyed by record IDs, for the tables every object and record passes through
/// (a context's registered and changed objects, the store's log overlay and versions).
///
/// `Dictionary` hashes each key with SipHash; here a 64-bit mixer (SplitMix64's finalizer)
/// and a per-table seed pick the bucket: a few multiplications. The mixer is given the
/// key without its low three bits, so that each run of 8 consecutive IDs (a store hands
/// serials out in order) has one block of 8 buckets to itself, at a slot of its block
/// rotated by the mixed bits. Sequential IDs then fill one cache line of keys after
/// another, so a save, fetch or commit of many records does not take a cache miss at a
/// random bucket for each. The price: a run of 8 whose block is taken is displaced
/// whole, so keys lie further from their home buckets and a lookup compares more keys,
/// but in memory read in order. Strided IDs still spread as a random hash spreads them,
/// thanks to the rotation. Open addressing with linear probing; removal shifts later
/// entries back instead of leaving tombstones, so lookups never slow down with churn.
/// Iteration order is unspecified.
/// Buckets live in one raw buffer, copied on write like the standard collections.
///
/// The seed matters: without it, iterating one table (in bucket order, which is hash
/// order) into another with the same hash sends whole runs of keys to one bucket of the
/// smaller table, and inserting becomes quadratic. Each table takes its own seed from a
/// counter, so no two tables share one.
public struct IDMap<Key: IDMapKey, Value> {
    @usableFromInline var buckets: IDMapBuckets<Value>
    /// The value of key 0 (0 marks an empty bucket).
    @usableFromInline var zero: Value?
    /// 64 − log2(bucket count): the bucket is the top bits of the mixed key.
    @usableFromInline var shift: UInt64
    @usableFromInline let seed: UInt64
    /// The number of entries (``count``), changed only by this type's inserts and removals.
    @usableFromInline var storedCount = 0
    @inlinable public var count: Int { storedCount }
    /// Advanced by every insert and removal (a table replaced or resized has new buckets).
    @usableFromInline var changes: UInt = 0

    public init() {
        self.init(seed: idMapSeeds.withLock { counter in
            counter &+= 0x9E37_79B9_7F4A_7C15
            return counter
        })
    }

    /// A table whose seed is made from `seed` rather than taken from the process's counter
    /// (for tests, whose tables otherwise get seeds that depend on how many tables other
    /// tests running alongside made first).
    @inlinable public init(seed: UInt64) {
        self.seed = Self.mix(seed)
        buckets = IDMapBuckets(capacity: 8)
        shift = 61
    }

    /// A table over buckets in memory that `owner` keeps alive and this table may write
    /// (a copy-on-write mapping of a checkpoint): `bucketCount` keys, and a value for each
    /// bucket whose key is not 0, exactly as ``withUnsafeBuckets(_:)`` showed a table's
    /// buckets with seed `mixedSeed` holding `count` keys. The bucket count must be a power
    /// of two, at least 8, with at least one key 0; the values must be of a trivial type.
    /// Nothing is freed when the table is: a write first copies the buckets.
    public init(borrowingKeys keys: UnsafeMutablePointer<UInt64>, values: UnsafeMutablePointer<Value>,
                bucketCount: Int, mixedSeed: UInt64, count: Int, owner: AnyObject) {
        precondition(bucketCount >= 8 && bucketCount & (bucketCount - 1) == 0 && count < bucketCount)
        buckets = IDMapBuckets(capacity: bucketCount, keys: keys, values: values, owner: owner)
        seed = mixedSeed
        shift = UInt64(64 - bucketCount.trailingZeroBitCount)
        storedCount = count
    }

    /// The seed keys are placed by (for ``init(borrowingKeys:values:bucketCount:mixedSeed:count:owner:)``).
    public var mixedSeed: UInt64 { seed }

    /// Calls `body` with the buckets as they are, for writing them out: ``bucketCount``
    /// keys (0 marks an empty bucket, and key 0 itself is not among them) and the values
    /// beside them, initialized only where the key is not 0.
    public func withUnsafeBuckets<Result>(
        _ body: (UnsafeBufferPointer<UInt64>, UnsafePointer<Value>) throws -> Result
    ) rethrows -> Result {
        try withExtendedLifetime(buckets) {
            try body(UnsafeBufferPointer(start: buckets.keys, count: buckets.capacity), UnsafePointer(buckets.values))
        }
    }

    /// Room for `minimumCapacity` entries without growing.
    @inlinable public init(minimumCapacity: Int) {
        self.init()
        if minimumCapacity > 5 { resize(bucketsFor: minimumCapacity) }
    }

    @inline(__always) @inlinable static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    @inlinable public var isEmpty: Bool { count == 0 }

    @inline(__always) @inlinable var mask: Int { buckets.capacity &- 1 }

    /// The bucket a key's probe starts at (see the type's documentation).
    @inline(__always) @inlinable func home(_ bits: UInt64) -> Int {
        let mixed = Self.mix((bits >> 3) ^ seed)
        let block = Int(truncatingIfNeeded: mixed >> shift) & ~7
        let slot = Int(truncatingIfNeeded: (bits &+ mixed) & 7)
        return (block | slot) & mask
    }

    /// The bucket holding `bits`, or nil.
    @inline(__always) @inlinable func bucket(of bits: UInt64) -> Int? {
        let keys = buckets.keys, mask = self.mask
        var index = home(bits)
        while true {
            let key = keys[index]
            if key == bits { return index }
            if key == 0 { return nil }
            index = (index &+ 1) & mask
        }
    }

    /// Whether `key` has a value: a lookup that copies (and retains) nothing.
    @inline(__always) @inlinable public func contains(_ key: Key) -> Bool {
        let bits = key.rawValue
        if bits == 0 { return zero != nil }
        return bucket(of: bits) != nil
    }

    /// Whether `key` maps to `object` itself (a lookup that retains nothing).
    @inline(__always) @inlinable public func contains(_ key: Key, identicalTo object: AnyObject) -> Bool where Value: AnyObject {
        let bits = key.rawValue
        if bits == 0 { return zero === object }
        guard let index = bucket(of: bits) else { return false }
        return buckets.values[index] === object
    }

    @inline(__always) @inlinable mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&buckets) { buckets = buckets.copy() }
    }

    @inlinable public subscript(key: Key) -> Value? {
        get {
            let bits = key.rawValue
            if bits == 0 { return zero }
            guard let index = bucket(of: bits) else { return nil }
            return buckets.values[index]
        }
        set {
            let bits = key.rawValue
            if bits == 0 {
                storedCount += (newValue != nil ? 1 : 0) - (zero != nil ? 1 : 0)
                zero = newValue
                changes &+= 1
                return
            }
            if let newValue { _ = insert(bits, newValue) } else { _ = remove(bits) }
        }
    }

    /// Sets the value for `key` and returns the one it replaces, in one probe (a lookup
    /// and then a store probed twice).
    @discardableResult
    @inlinable public mutating func updateValue(_ value: Value, forKey key: Key) -> Value? {
        let bits = key.rawValue
        if bits == 0 {
            defer { if zero == nil { storedCount += 1 }; zero = value; changes &+= 1 }
            return zero
        }
        return insert(bits, value)
    }

    /// The value for `key`, or `defaultValue()` (stored first) when there is none.
    @inlinable public subscript(key: Key, default defaultValue: @autoclosure () -> Value) -> Value {
        get { self[key] ?? defaultValue() }
        set { self[key] = newValue }
    }

    @discardableResult
    @inlinable public mutating func removeValue(forKey key: Key) -> Value? {
        let bits = key.rawValue
        if bits == 0 {
            defer { if zero != nil { storedCount -= 1 }; zero = nil; changes &+= 1 }
            return zero
        }
        return remove(bits)
    }

    @inlinable public mutating func removeAll() {
        self = IDMap()
    }

    /// The value for `key`; if there is none, `make()`'s, stored for it first (nothing
    /// is stored when `make` gives nil). One probe either way, where a lookup and then an
    /// insert probed the key's run twice. (`make` may change this map: then the value is
    /// stored with a probe of its own.)
    @inline(__always)
    @inlinable public mutating func value(forKey key: Key, orInsert make: () -> Value?) -> Value? {
        let bits = key.rawValue
        guard bits != 0 else {
            if let zero { return zero }
            guard let made = make() else { return nil }
            self[key] = made
            return made
        }
        let keys = buckets.keys, mask = self.mask
        var index = home(bits)
        while true {
            let found = keys[index]
            if found == bits { return buckets.values[index] }
            if found == 0 { break }
            index = (index &+ 1) & mask
        }
        let before = (buckets: ObjectIdentifier(buckets), changes: changes)
        guard let made = make() else { return nil }
        if before != (ObjectIdentifier(buckets), changes) || (count + 1) * 10 > buckets.capacity * 7 {
            _ = insert(bits, made)
        } else {
            makeUnique()
            buckets.keys[index] = bits
            (buckets.values + index).initialize(to: made)
            storedCount += 1
            changes &+= 1
        }
        return made
    }

    /// Stores `value` for `bits` (not 0); returns the value it replaces.
    @inlinable mutating func insert(_ bits: UInt64, _ value: Value) -> Value? {
        changes &+= 1
        // One probe finds the key, or the empty bucket that ends its run: a new key goes
        // there unless the table grows first (a copy made for a shared table keeps every
        // bucket's place). Probing once for the key and again for the empty bucket walked
        // each run twice.
        var index = home(bits)
        do {
            let keys = buckets.keys, mask = self.mask
            while true {
                let key = keys[index]
                if key == bits {
                    makeUnique()
                    let replaced = (buckets.values + index).move()
                    (buckets.values + index).initialize(to: value)
                    return replaced
                }
                if key == 0 { break }
                index = (index &+ 1) & mask
            }
        }
        if (count + 1) * 10 > buckets.capacity * 7 {
            resize(bucketsFor: count + 1)
            index = home(bits)
            let keys = buckets.keys, mask = self.mask
            while keys[index] != 0 { index = (index &+ 1) & mask }
        } else {
            makeUnique()
        }
        buckets.keys[index] = bits
        (buckets.values + index).initialize(to: value)
        storedCount += 1
        return nil
    }

    @inlinable mutating func remove(_ bits: UInt64) -> Value? {
        guard var hole = bucket(of: bits) else { return nil }
        changes &+= 1
        makeUnique()
        let keys = buckets.keys, values = buckets.values, mask = self.mask
        let removed = (values + hole).move()
        // Backward shift: move later members of the probe run into the hole when their
        // home bucket does not lie (cyclically) between the hole and themselves.
        var next = (hole &+ 1) & mask
        while keys[next] != 0 {
            let distanceToHole = (next &- hole) & mask
            let distanceToHome = (next &- home(keys[next])) & mask
            if distanceToHome >= distanceToHole {
                keys[hole] = keys[next]
                (values + hole).moveInitialize(from: values + next, count: 1)
                hole = next
            }
            next = (next &+ 1) & mask
        }
        keys[hole] = 0
        storedCount -= 1
        return removed
    }

    /// Buckets in the table (for tests of growth).
    @inlinable public var bucketCount: Int { buckets.capacity }

    /// Room for `minimumCapacity` entries in all, so that inserting up to that many grows
    /// the table at most once, here.
    @inlinable public mutating func reserveCapacity(_ minimumCapacity: Int) {
        if minimumCapacity * 10 > buckets.capacity * 7 { resize(bucketsFor: minimumCapacity) }
    }

    /// Rehashes into a power-of-two bucket count that holds `entries` at most 7/10 full.
    @inlinable mutating func resize(bucketsFor entries: Int) {
        var capacity = 8
        var log2: UInt64 = 3
        while entries * 10 > capacity * 7 { capacity <<= 1; log2 += 1 }
        // Values move when the old buckets are this map's alone, and are copied otherwise.
        let moving = isKnownUniquelyReferenced(&buckets)
        let old = buckets
        let fresh = IDMapBuckets<Value>(capacity: capacity)
        shift = 64 - log2
        buckets = fresh
        let mask = capacity - 1
        for index in 0..<old.capacity where old.keys[index] != 0 {
            var target = home(old.keys[index])
            while fresh.keys[target] != 0 { target = (target &+ 1) & mask }
            fresh.keys[target] = old.keys[index]
            if moving {
                (fresh.values + target).moveInitialize(from: old.values + index, count: 1)
                // (Marks the value moved, for the old buckets' deinit; trivial values need no
                // mark, and the keys of borrowed buckets are not written for nothing.)
                if !_isPOD(Value.self) { old.keys[index] = 0 }
            } else {
                (fresh.values + target).initialize(to: old.values[index])
            }
        }
    }

    /// The longest distance of any key from its home bucket (for tests of the hash's spread).
    @inlinable public var longestProbe: Int { probeDistances.max() ?? 0 }

    /// The mean distance of the keys from their home buckets (for tests of the hash's spread).
    @inlinable public var meanProbe: Double {
        let distances = probeDistances
        return distances.isEmpty ? 0 : Double(distances.reduce(0, +)) / Double(distances.count)
    }

    /// Each key's distance from its home bucket, in bucket order.
    @inlinable var probeDistances: [Int] {
        let mask = self.mask
        return (0..<buckets.capacity).filter { buckets.keys[$0] != 0 }.map { ($0 &- home(buckets.keys[$0])) & mask }
    }

    /// Every value, in unspecified order.
    @inlinable public var values: [Value] {
        var result: [Value] = []
        result.reserveCapacity(count)
        forEach { result.append($0.value) }
        return result
    }

    /// Every key, in unspecified order. Read from the key buffer alone: going through the
    /// map's iteration would copy (retain and release) every value on the way.
    @inlinable public var keys: [Key] {
        var result: [Key] = []
        result.reserveCapacity(count)
        if zero != nil { result.append(Key(rawValue: 0)) }
        let keys = buckets.keys
        for index in 0..<buckets.capacity where keys[index] != 0 { result.append(Key(rawValue: keys[index])) }
        return result
    }
}

extension IDMap where Value: AnyObject {
    /// Every key with its value, in ascending key order (a save takes its changed objects
    /// so): valid while this map (or a copy of it) holds the values, and the same while
    /// ``storage`` and ``changeCount`` are (a caller may keep it for the next walk). The
    /// buckets are read once, front to back, and the entries then sorted: looking the values
    /// up in key order instead would read the table at random, a cache miss or two an entry
    /// once it outgrows the caches.
    @inlinable public func valuesInKeyOrder() -> KeyOrderedValues<Value> {
        var pairs: [(key: UInt64, value: Unmanaged<Value>)] = []
        pairs.reserveCapacity(count)
        if let zero { pairs.append((0, Unmanaged.passUnretained(zero))) }
        let keys = buckets.keys, values = buckets.values
        for index in 0..<buckets.capacity where keys[index] != 0 {
            // (A plain reference is taken as its bits, not loaded: loading it would retain
            // and release it, a visit to each object in hash order.)
            if MemoryLayout<Value>.size == MemoryLayout<UnsafeRawPointer>.size {
                pairs.append((keys[index], Unmanaged.fromOpaque(UnsafeRawPointer(values + index).load(as: UnsafeRawPointer.self))))
            } else {
                pairs.append((keys[index], Unmanaged.passUnretained(values[index])))
            }
        }
        RadixSort.sort(&pairs) { $0.key }
        return KeyOrderedValues(pairs: pairs)
    }
}

/// The entries of an ``IDMap`` of objects in ascending key order
/// (``IDMap/valuesInKeyOrder()``), the objects unretained: to be walked only while the map
/// they came from holds them.
public struct KeyOrderedValues<Value: AnyObject> {
    @usableFromInline let pairs: [(key: UInt64, value: Unmanaged<Value>)]

    @inlinable init(pairs: [(key: UInt64, value: Unmanaged<Value>)]) { self.pairs = pairs }

    /// The number of entries.
    @inlinable public var count: Int { pairs.count }

    /// Calls `body` with each key and its object, in key order. The objects are not
    /// retained for the call: the map they came from holds them, and the caller keeps it
    /// (a copy of it, whose storage no write changes) alive and holding them meanwhile.
    @inlinable public func forEach(_ body: (UInt64, Value) throws -> Void) rethrows {
        for pair in pairs { try pair.value._withUnsafeGuaranteedRef { try body(pair.key, $0) } }
    }
}

extension IDMap {
    /// The storage this map shares with its copies: with ``changeCount``, what tells that
    /// a map is in the state a cache of it was made from. (A new storage for every map
    /// made, grown, or copied on write; held weakly by such a cache, it cannot be taken
    /// for another that reuses its address.)
    @inlinable public var storage: AnyObject { buckets }
    /// Advances with every insert, replacement and removal.
    @inlinable public var changeCount: UInt { changes }
}

extension IDMap: Sequence {
    public struct Iterator: IteratorProtocol {
        @usableFromInline let buckets: IDMapBuckets<Value>
        @usableFromInline let zero: Value?
        @usableFromInline var index = -1

        @inlinable init(buckets: IDMapBuckets<Value>, zero: Value?) { (self.buckets, self.zero) = (buckets, zero) }

        @inlinable public mutating func next() -> (key: Key, value: Value)? {
            if index == -1 {
                index = 0
                if let zero { return (Key(rawValue: 0), zero) }
            }
            while index < buckets.capacity {
                defer { index += 1 }
                let bits = buckets.keys[index]
                if bits != 0 { return (Key(rawValue: bits), buckets.values[index]) }
            }
            return nil
        }
    }

    @inlinable public func makeIterator() -> Iterator { Iterator(buckets: buckets, zero: zero) }

    /// Calls `body` with the entries of the buckets of `part` of `parts` equal ranges (key
    /// 0's with part 0) until it returns false: the parts together hold every entry once,
    /// for reading one map on several threads.
    @inlinable public func forEach(part: Int, of parts: Int, _ body: (Key, Value) throws -> Bool) rethrows {
        if part == 0, let zero { guard try body(Key(rawValue: 0), zero) else { return } }
        let capacity = buckets.capacity
        for index in (capacity * part / parts)..<(capacity * (part + 1) / parts) {
            let bits = buckets.keys[index]
            if bits != 0 { guard try body(Key(rawValue: bits), buckets.values[index]) else { return } }
        }
    }

    @inlinable public var underestimatedCount: Int { count }
}

extension IDMap: ExpressibleByDictionaryLiteral {
    @inlinable public init(dictionaryLiteral elements: (Key, Value)...) {
        self.init(minimumCapacity: elements.count)
        for (key, value) in elements { self[key] = value }
    }
}

// The buckets are a class only for copy-on-write: a map writes to them only when it holds
// the sole reference (`makeUnique`), so values shared between copies are never mutated,
// exactly as with the standard library's collections.
extension IDMap: @unchecked Sendable where Value: Sendable {}
