import CairnCollections
import Dispatch

/// The first bytes of the strings of an index run (``SecondaryIndex``) that holds only
/// nils and strings, nils first: each string's first eight UTF-8 bytes, composed, as one
/// big-endian number (``ValueOrder/bytePrefix(_:)``), in the run's order. Two strings
/// whose prefixes differ are in the order of their prefixes, so an equality lookup
/// narrows the run to the strings sharing the wanted one's prefix by comparing numbers,
/// and compares strings only among those; a merge of two runs compares strings only on
/// equal prefixes.
struct StringPrefixes {
    /// How many nils the run starts with.
    var nulls: Int
    /// The prefix of the run's entry `nulls + i`.
    var prefixes: [UInt64]

    init(nulls: Int, prefixes: [UInt64]) {
        self.nulls = nulls
        self.prefixes = prefixes
    }

    /// The prefixes of `run`; nil if it holds anything but nils and strings.
    init?(_ run: [(value: Value, id: UInt64)]) {
        var nulls = 0
        while nulls < run.count, run[nulls].value.isNull { nulls += 1 }
        var prefixes: [UInt64] = []
        prefixes.reserveCapacity(run.count - nulls)
        for index in nulls..<run.count {
            guard let prefix = Self.prefix(of: run[index].value) else { return nil }
            prefixes.append(prefix)
        }
        self.init(nulls: nulls, prefixes: prefixes)
    }

    /// A string's prefix, as the index orders it (composed); nil for other values.
    static func prefix(of value: Value) -> UInt64? {
        guard case .string(let text) = value else { return nil }
        return ValueOrder.bytePrefix(ValueOrder.composed(text))
    }

    /// The run's positions whose prefix is `prefix`: every string equal to one with that
    /// prefix is among them.
    func range(of prefix: UInt64) -> Range<Int> {
        let low = prefixes.partitionPoint { $0 >= prefix }
        // The end, searched for from `low` in steps that double (probes at low, low + 2,
        // low + 5, …, then a binary search of the last gap): few strings share a prefix,
        // so a second search of the whole run would mostly read memory for nothing.
        var known = low, probe = low, step = 1
        while probe < prefixes.count, prefixes[probe] == prefix {
            known = probe + 1
            probe = known + step
            step *= 2
        }
        let high = prefixes[known..<min(probe, prefixes.count)].partitionPoint { $0 > prefix }
        return nulls + low..<nulls + high
    }
}

/// An index run over integers of one type and nils, in index order, as plain numbers:
/// the nils' IDs in ID order, then (integer, ID) pairs by integer, then ID. 16 bytes an
/// entry, where a run of `Value`s takes 32.
struct IntegerRun {
    var nulls: RunElements<UInt64>
    var keyed: RunElements<(key: Int64, id: UInt64)>
    var width: AttributeType

    init(nulls: [UInt64], keyed: [(key: Int64, id: UInt64)], width: AttributeType) {
        self.init(nulls: .array(nulls), keyed: .array(keyed), width: width)
    }

    init(nulls: RunElements<UInt64>, keyed: RunElements<(key: Int64, id: UInt64)>, width: AttributeType) {
        self.nulls = nulls
        self.keyed = keyed
        self.width = width
    }

    var count: Int { nulls.count + keyed.count }

    subscript(position: Int) -> (value: Value, id: UInt64) {
        if position < nulls.count { return (.null, nulls[position]) }
        let (key, id) = keyed[position - nulls.count]
        return (Value(integer: key, width: width), id)
    }

    /// The run as `Value`s.
    var values: SecondaryIndex.Run {
        var run: SecondaryIndex.Run = []
        run.reserveCapacity(count)
        nulls.withUnsafeBufferPointer { for id in $0 { run.append((.null, id)) } }
        keyed.withUnsafeBufferPointer { for (key, id) in $0 { run.append((Value(integer: key, width: width), id)) } }
        return run
    }
}

/// The elements of an ``IntegerRun``: an array, or a checkpoint's section read in place
/// (FORMAT.md §12.4), which the mapping keeps alive.
enum RunElements<Element> {
    case array([Element])
    case mapped(UnsafeBufferPointer<Element>, FileMapping)

    var count: Int {
        switch self {
        case .array(let elements): return elements.count
        case .mapped(let elements, _): return elements.count
        }
    }

    subscript(position: Int) -> Element {
        switch self {
        case .array(let elements): return elements[position]
        case .mapped(let elements, _): return elements[position]
        }
    }

    /// Calls `body` with the elements' memory.
    func withUnsafeBufferPointer<T>(_ body: (UnsafeBufferPointer<Element>) throws -> T) rethrows -> T {
        switch self {
        case .array(let elements): return try elements.withUnsafeBufferPointer(body)
        case .mapped(let elements, let mapping): return try withExtendedLifetime(mapping) { try body(elements) }
        }
    }
}

// A mapped run's memory is only read, and its mapping is `Sendable`.
extension RunElements: @unchecked Sendable where Element: Sendable {}

/// An index's large sorted run (``SecondaryIndex``): of `Value`s, or of integers.
enum SortedRun {
    case values(SecondaryIndex.Run)
    case integers(IntegerRun)

    var count: Int {
        switch self {
        case .values(let run): return run.count
        case .integers(let run): return run.count
        }
    }

    subscript(position: Int) -> (value: Value, id: UInt64) {
        switch self {
        case .values(let run): return run[position]
        case .integers(let run): return run[position]
        }
    }

    /// The run as `Value`s.
    var values: SecondaryIndex.Run {
        switch self {
        case .values(let run): return run
        case .integers(let run): return run.values
        }
    }
}

extension SecondaryIndex {
    typealias Run = [(value: Value, id: UInt64)]

    /// Two runs in index order merged into one, with the entries of `a` whose IDs
    /// `keeping` refuses left out, and the merged run's prefixes when both runs have
    /// theirs (the prefixes decide every pair of strings that differ in them).
    static func merge(_ a: Run, _ aPrefixes: StringPrefixes?, keeping: (UInt64) -> Bool,
                      _ b: Run, _ bPrefixes: StringPrefixes?) -> (Run, StringPrefixes?) {
        guard let p = aPrefixes ?? (a.isEmpty ? StringPrefixes(nulls: 0, prefixes: []) : nil),
              let q = bPrefixes ?? (b.isEmpty ? StringPrefixes(nulls: 0, prefixes: []) : nil) else {
            let run = merge(a.filter { keeping($0.id) }, b)
            return (run, StringPrefixes(run))
        }
        var run: Run = []
        run.reserveCapacity(a.count + b.count)
        var prefixes: [UInt64] = []
        prefixes.reserveCapacity(a.count + b.count - p.nulls - q.nulls)
        var i = 0, j = 0
        // The nils, in ID order.
        while i < p.nulls || j < q.nulls {
            if j == q.nulls || (i < p.nulls && a[i].id < b[j].id) {
                if keeping(a[i].id) { run.append(a[i]) }
                i += 1
            } else {
                run.append(b[j])
                j += 1
            }
        }
        let nulls = run.count
        while i < a.count || j < b.count {
            let takeA: Bool
            if j == b.count {
                takeA = true
            } else if i == a.count {
                takeA = false
            } else {
                let x = p.prefixes[i - p.nulls], y = q.prefixes[j - q.nulls]
                takeA = x != y ? x < y : less(a[i], b[j])
            }
            if takeA {
                if keeping(a[i].id) {
                    run.append(a[i])
                    prefixes.append(p.prefixes[i - p.nulls])
                }
                i += 1
            } else {
                run.append(b[j])
                prefixes.append(q.prefixes[j - q.nulls])
                j += 1
            }
        }
        return (run, StringPrefixes(nulls: nulls, prefixes: prefixes))
    }

    /// Two runs in index order merged into one.
    static func merge(_ a: Run, _ b: Run) -> Run {
        if b.isEmpty { return a }
        if a.isEmpty { return b }
        var result: Run = []
        result.reserveCapacity(a.count + b.count)
        var i = 0, j = 0
        while i < a.count || j < b.count {
            if j == b.count || (i < a.count && less(a[i], b[j])) {
                result.append(a[i]); i += 1
            } else {
                result.append(b[j]); j += 1
            }
        }
        return result
    }

    /// ``sortedRun(unordered:)`` when every value is nil or an integer of one width (the
    /// common case): sorted as plain (integer, ID) pairs, nils first, with no `Value`
    /// compared or moved. Nil for any other values.
    /// `produce` hands each of about `count` entries to the closure it is given, and stops
    /// when that returns false (at the first value that is not an integer of the width).
    static func integerRun(count: Int, _ produce: ((Value, UInt64) -> Bool) -> Void) -> IntegerRun? {
        var pairs = IntegerPairs()
        pairs.keyed.reserveCapacity(count)
        produce { pairs.add($0, $1) }
        return integerRun(PerRun(count: 1, initial: pairs))
    }

    /// The run of the pairs collected in `parts`, nil unless all hold integers of one width:
    /// each part sorted on a thread of its own, then the parts merged. `whenRead` is called
    /// before the sorts.
    static func integerRun(_ parts: PerRun<IntegerPairs>, whenRead: () -> Void = {}) -> IntegerRun? {
        var width: AttributeType?
        for part in 0..<parts.count {
            guard parts[part].integers else { return nil }
            if let kind = parts[part].width {
                guard kind == width ?? kind else { return nil }
                width = kind
            }
        }
        whenRead()
        let sort: @Sendable (Int) -> Void = { part in
            // (Taken out of its slot first, so that the sort does not copy the arrays.)
            var pairs = parts[part]
            parts[part] = IntegerPairs()
            RadixSort.sort(&pairs.nulls) { $0 }
            Self.sortByKeyThenID(&pairs.keyed)
            parts[part] = pairs
        }
        if parts.count > 1 { DispatchQueue.concurrentPerform(iterations: parts.count, execute: sort) } else { sort(0) }
        var all = (0..<parts.count).map { part in
            defer { parts[part] = IntegerPairs() }
            return parts[part]
        }
        guard all.count > 1 else { return IntegerRun(nulls: all[0].nulls, keyed: all[0].keyed, width: width ?? .int64) }
        var nulls = all.flatMap(\.nulls)
        RadixSort.sort(&nulls) { $0 }
        var keyed: [(key: Int64, id: UInt64)] = []
        keyed.reserveCapacity(all.reduce(0) { $0 + $1.keyed.count })
        // The parts' sorted pairs merged: the least of their next pairs each time.
        var next = [Int](repeating: 0, count: all.count)
        while true {
            var least = -1
            for part in all.indices where next[part] < all[part].keyed.count {
                guard least >= 0 else { least = part; continue }
                let a = all[part].keyed[next[part]], b = all[least].keyed[next[least]]
                if a.key < b.key || (a.key == b.key && a.id < b.id) { least = part }
            }
            guard least >= 0 else { break }
            keyed.append(all[least].keyed[next[least]])
            next[least] += 1
            if next[least] == all[least].keyed.count { all[least].keyed = [] }
        }
        return IntegerRun(nulls: nulls, keyed: keyed, width: width ?? .int64)
    }

    /// Sorts (key, ID) pairs by key, then ID: by key (the sign bit flipped to order
    /// negative keys first), then each run of equal keys by ID, a long run (a flag, a
    /// category) by radix, a short one by comparison. Most indexed keys repeat little, so
    /// that is one radix sort of the whole, not two.
    static func sortByKeyThenID(_ keyed: inout [(key: Int64, id: UInt64)]) {
        RadixSort.sort(&keyed) { UInt64(bitPattern: $0.key) ^ (1 << 63) }
        var start = 0
        while start < keyed.count {
            var end = start + 1
            while end < keyed.count, keyed[end].key == keyed[start].key { end += 1 }
            if end - start >= RadixSort.threshold {
                var group = Array(keyed[start..<end])
                RadixSort.sort(&group) { $0.id }
                keyed.replaceSubrange(start..<end, with: group)
            } else if end - start > 1 {
                keyed[start..<end].sort { $0.id < $1.id }
            }
            start = end
        }
    }
}

/// (Integer, ID) pairs of one integer type and the IDs of nils, collected from an index's
/// values in any order (``SecondaryIndex``'s run of integers).
struct IntegerPairs {
    var nulls: [UInt64] = []
    var keyed: [(key: Int64, id: UInt64)] = []
    /// The integers' type, once one is seen.
    var width: AttributeType?
    /// False once a value was neither nil nor an integer of `width`.
    var integers = true

    /// Adds `value` of record `id`; false (and nothing added) unless it is nil or an
    /// integer of the type of those before it.
    mutating func add(_ value: Value, _ id: UInt64) -> Bool {
        if case .null = value {
            nulls.append(id)
            return true
        }
        guard let (key, kind) = value.integerAndWidth, kind == width ?? kind else {
            integers = false
            return false
        }
        width = kind
        keyed.append((key, id))
        return true
    }
}
