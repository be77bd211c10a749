/// Hands every ``IDMap`` its own seed.
private let idMapSeeds = Protected<UInt64>(0)

/// A key of an ``IDMap``: a record ID or its raw 64 bits.
protocol IDMapKey: Hashable {
    var idBits: UInt64 { get }
    init(idBits: UInt64)
}

extension UInt64: IDMapKey {
    @inline(__always) var idBits: UInt64 { self }
    @inline(__always) init(idBits: UInt64) { self = idBits }
}

extension RecordID: IDMapKey {
    @inline(__always) var idBits: UInt64 { rawValue }
    @inline(__always) init(idBits: UInt64) { self.init(rawValue: idBits) }
}

/// A hash map keyed by record IDs, for the tables every object and record passes through
/// (a context's registered and changed objects, the store's log overlay and versions).
///
/// `Dictionary` hashes each key with SipHash; here a 64-bit mixer (SplitMix64's finalizer)
/// of the key and a per-table seed picks the bucket: a few multiplications. Open
/// addressing with linear probing; removal shifts later entries back instead of leaving
/// tombstones, so lookups never slow down with churn. Iteration order is unspecified.
///
/// The seed matters: without it, iterating one table (in bucket order, which is hash
/// order) into another with the same hash sends whole runs of keys to one bucket of the
/// smaller table, and inserting becomes quadratic. Each table takes its own seed from a
/// counter, so no two tables share one.
struct IDMap<Key: IDMapKey, Value> {
    /// Key bits per bucket; 0 marks an empty bucket (key 0 lives in `zero`).
    private var bucketKeys: ContiguousArray<UInt64>
    private var bucketValues: ContiguousArray<Value?>
    private var zero: Value?
    /// 64 − log2(bucket count): the bucket is the top bits of the mixed key.
    private var shift: UInt64
    private let seed: UInt64
    private(set) var count = 0

    init() {
        seed = Self.mix(idMapSeeds.withLock { counter in
            counter &+= 0x9E37_79B9_7F4A_7C15
            return counter
        })
        bucketKeys = ContiguousArray(repeating: 0, count: 8)
        bucketValues = ContiguousArray(repeating: nil, count: 8)
        shift = 61
    }

    @inline(__always) private static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Room for `minimumCapacity` entries without growing.
    init(minimumCapacity: Int) {
        self.init()
        if minimumCapacity > 5 { resize(bucketsFor: minimumCapacity) }
    }

    var isEmpty: Bool { count == 0 }

    @inline(__always) private var mask: Int { bucketKeys.count &- 1 }

    @inline(__always) private func home(_ bits: UInt64) -> Int {
        Int(truncatingIfNeeded: Self.mix(bits ^ seed) >> shift)
    }

    /// The bucket holding `bits`, or nil.
    @inline(__always) private func bucket(of bits: UInt64) -> Int? {
        let start = home(bits)
        // The closure captures two integers, not `self` (which would retain both arrays).
        return bucketKeys.withUnsafeBufferPointer { keys in
            var index = start
            let mask = keys.count &- 1
            while true {
                let key = keys[index]
                if key == bits { return index }
                if key == 0 { return nil }
                index = (index &+ 1) & mask
            }
        }
    }

    subscript(key: Key) -> Value? {
        get {
            let bits = key.idBits
            if bits == 0 { return zero }
            guard let index = bucket(of: bits) else { return nil }
            return bucketValues[index]
        }
        set {
            let bits = key.idBits
            if bits == 0 {
                count += (newValue != nil ? 1 : 0) - (zero != nil ? 1 : 0)
                zero = newValue
                return
            }
            if let newValue { insert(bits, newValue) } else { _ = remove(bits) }
        }
    }

    /// The value for `key`, or `defaultValue()` (stored first) when there is none.
    subscript(key: Key, default defaultValue: @autoclosure () -> Value) -> Value {
        get { self[key] ?? defaultValue() }
        set { self[key] = newValue }
    }

    @discardableResult
    mutating func removeValue(forKey key: Key) -> Value? {
        let bits = key.idBits
        if bits == 0 {
            defer { if zero != nil { count -= 1 }; zero = nil }
            return zero
        }
        return remove(bits)
    }

    mutating func removeAll() {
        self = IDMap()
    }

    private mutating func insert(_ bits: UInt64, _ value: Value) {
        if let index = bucket(of: bits) {
            bucketValues[index] = value
            return
        }
        if (count + 1) * 10 > bucketKeys.count * 7 { resize(bucketsFor: count + 1) }
        var index = home(bits)
        let mask = self.mask
        while bucketKeys[index] != 0 { index = (index &+ 1) & mask }
        bucketKeys[index] = bits
        bucketValues[index] = value
        count += 1
    }

    private mutating func remove(_ bits: UInt64) -> Value? {
        guard var hole = bucket(of: bits) else { return nil }
        let removed = bucketValues[hole]
        let mask = self.mask
        // Backward shift: move later members of the probe run into the hole when their
        // home bucket does not lie (cyclically) between the hole and themselves.
        var next = (hole &+ 1) & mask
        while bucketKeys[next] != 0 {
            let want = home(bucketKeys[next])
            let distanceToHole = (next &- hole) & mask
            let distanceToHome = (next &- want) & mask
            if distanceToHome >= distanceToHole {
                bucketKeys[hole] = bucketKeys[next]
                bucketValues[hole] = bucketValues[next]
                hole = next
            }
            next = (next &+ 1) & mask
        }
        bucketKeys[hole] = 0
        bucketValues[hole] = nil
        count -= 1
        return removed
    }

    /// Rehashes into a power-of-two bucket count that holds `entries` at most 7/10 full.
    private mutating func resize(bucketsFor entries: Int) {
        var buckets = 8
        var log2: UInt64 = 3
        while entries * 10 > buckets * 7 { buckets <<= 1; log2 += 1 }
        let oldKeys = bucketKeys, oldSlots = bucketValues
        bucketKeys = ContiguousArray(repeating: 0, count: buckets)
        bucketValues = ContiguousArray(repeating: nil, count: buckets)
        shift = 64 - log2
        let mask = buckets - 1
        for index in oldKeys.indices where oldKeys[index] != 0 {
            var target = home(oldKeys[index])
            while bucketKeys[target] != 0 { target = (target &+ 1) & mask }
            bucketKeys[target] = oldKeys[index]
            bucketValues[target] = oldSlots[index]
        }
    }

    /// The longest distance of any key from its home bucket (for tests of the hash's spread).
    var longestProbe: Int {
        let mask = self.mask
        var longest = 0
        for index in bucketKeys.indices where bucketKeys[index] != 0 {
            longest = Swift.max(longest, (index &- home(bucketKeys[index])) & mask)
        }
        return longest
    }

    /// Every value, in unspecified order.
    var values: [Value] {
        var result: [Value] = []
        result.reserveCapacity(count)
        forEach { result.append($0.value) }
        return result
    }

    /// Every key, in unspecified order.
    var keys: [Key] {
        var result: [Key] = []
        result.reserveCapacity(count)
        forEach { result.append($0.key) }
        return result
    }
}

extension IDMap: Sequence {
    struct Iterator: IteratorProtocol {
        fileprivate let map: IDMap
        fileprivate var index = -1

        mutating func next() -> (key: Key, value: Value)? {
            if index == -1 {
                index = 0
                if let zero = map.zero { return (Key(idBits: 0), zero) }
            }
            while index < map.bucketKeys.count {
                defer { index += 1 }
                if map.bucketKeys[index] != 0, let value = map.bucketValues[index] { return (Key(idBits: map.bucketKeys[index]), value) }
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(map: self) }

    var underestimatedCount: Int { count }
}

extension IDMap: ExpressibleByDictionaryLiteral {
    init(dictionaryLiteral elements: (Key, Value)...) {
        self.init(minimumCapacity: elements.count)
        for (key, value) in elements { self[key] = value }
    }
}

extension IDMap: Sendable where Value: Sendable {}
