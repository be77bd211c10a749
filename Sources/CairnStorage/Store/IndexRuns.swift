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
        let high = prefixes[low...].partitionPoint { $0 > prefix }
        return nulls + low..<nulls + high
    }
}

/// An index run over integers of one type and nils, in index order, as plain numbers:
/// the nils' IDs in ID order, then (integer, ID) pairs by integer, then ID. 16 bytes an
/// entry, where a run of `Value`s takes 32.
struct IntegerRun {
    var nulls: [UInt64]
    var keyed: [(key: Int64, id: UInt64)]
    var width: AttributeType

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
        for id in nulls { run.append((.null, id)) }
        for (key, id) in keyed { run.append((Value(integer: key, width: width), id)) }
        return run
    }
}

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
}
