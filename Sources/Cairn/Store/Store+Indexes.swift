import Foundation

/// What an index lookup asks for.
public enum IndexCondition: Sendable, Hashable {
    /// Values equal to any of these (`==`, `IN`).
    case equal([Value])
    /// Values in a range; a nil bound is open.
    case range(lower: Value?, lowerInclusive: Bool, upper: Value?, upperInclusive: Bool)
}

/// An in-memory secondary index over one attribute of one entity: a sorted run plus a
/// small unsorted delta of changes since, folded in when it grows. Built on first use
/// (one scan of the entity), then kept up to date by every commit. Not stored on disk.
// Mutated and read only under the store's state lock.
final class SecondaryIndex: @unchecked Sendable {
    let slot: Int
    private(set) var sorted: [(value: Value, id: UInt64)] = []
    /// IDs whose entry in `sorted` is out of date.
    private var stale = Set<UInt64>()
    /// Current values of IDs changed since `sorted` was built.
    private var delta: [UInt64: Value] = [:]

    init(slot: Int, entries: [(Value, UInt64)]) {
        self.slot = slot
        if let fast = Self.sortedIntegers(entries) {
            sorted = fast
        } else {
            sorted = entries.map { ($0.0, $0.1) }
            sorted.sort(by: Self.less)
        }
    }

    /// The common case, an integer attribute, sorted as plain (Int64, ID) pairs: the
    /// same order as `less` (nils first, then by value, then by ID) without comparing
    /// `Value`s. Nil if the entries are not all nil or integers of one width.
    private static func sortedIntegers(_ entries: [(Value, UInt64)]) -> [(value: Value, id: UInt64)]? {
        var nulls: [UInt64] = []
        var keyed: [(key: Int64, id: UInt64)] = []
        keyed.reserveCapacity(entries.count)
        var width: UInt8 = 0
        for (value, id) in entries {
            let key: Int64, kind: UInt8
            switch value {
            case .null: nulls.append(id); continue
            case .int8(let v): (key, kind) = (Int64(v), 1)
            case .int16(let v): (key, kind) = (Int64(v), 2)
            case .int32(let v): (key, kind) = (Int64(v), 3)
            case .int64(let v): (key, kind) = (v, 4)
            default: return nil
            }
            if width == 0 { width = kind } else if width != kind { return nil }
            keyed.append((key, id))
        }
        nulls.sort()
        keyed.sort { $0.key != $1.key ? $0.key < $1.key : $0.id < $1.id }
        var result: [(value: Value, id: UInt64)] = []
        result.reserveCapacity(entries.count)
        for id in nulls { result.append((.null, id)) }
        for (key, id) in keyed {
            switch width {
            case 1: result.append((.int8(Int8(truncatingIfNeeded: key)), id))
            case 2: result.append((.int16(Int16(truncatingIfNeeded: key)), id))
            case 3: result.append((.int32(Int32(truncatingIfNeeded: key)), id))
            default: result.append((.int64(key), id))
            }
        }
        return result
    }

    static func less(_ a: (value: Value, id: UInt64), _ b: (value: Value, id: UInt64)) -> Bool {
        switch ValueOrder.sortOrder(a.value, b.value, localizedCaseInsensitive: false) {
        case .orderedAscending: return true
        case .orderedDescending: return false
        case .orderedSame: return a.id < b.id
        }
    }

    func update(_ id: UInt64, to value: Value?) {
        stale.insert(id)
        delta[id] = value
        if delta.count + stale.count > max(4096, sorted.count / 8) { fold() }
    }

    private func fold() {
        var merged = sorted.filter { !stale.contains($0.id) }
        let added = delta.map { (value: $0.value, id: $0.key) }.sorted(by: Self.less)
        merged.reserveCapacity(merged.count + added.count)
        // Merge two sorted runs.
        var result: [(value: Value, id: UInt64)] = []
        result.reserveCapacity(merged.count + added.count)
        var i = 0, j = 0
        while i < merged.count || j < added.count {
            if j == added.count || (i < merged.count && Self.less(merged[i], added[j])) {
                result.append(merged[i]); i += 1
            } else {
                result.append(added[j]); j += 1
            }
        }
        sorted = result
        stale = []
        delta = [:]
    }

    /// The IDs whose value meets `condition`, in no particular order.
    func lookup(_ condition: IndexCondition) -> [UInt64] {
        var result: [UInt64] = []
        func matches(_ value: Value) -> Bool {
            switch condition {
            case .equal(let wanted): return wanted.contains { ValueOrder.equal(value, $0, []) }
            case .range(let lower, let lowerInclusive, let upper, let upperInclusive):
                if value.isNull { return false }
                if let lower {
                    guard let order = ValueOrder.order(value, lower, []) else { return false }
                    if order == .orderedAscending || (order == .orderedSame && !lowerInclusive) { return false }
                }
                if let upper {
                    guard let order = ValueOrder.order(value, upper, []) else { return false }
                    if order == .orderedDescending || (order == .orderedSame && !upperInclusive) { return false }
                }
                return true
            }
        }
        // The first position whose value is not below `bound` (nil sorts first).
        func start(_ bound: Value) -> Int {
            var low = 0, high = sorted.count
            while low < high {
                let mid = (low + high) / 2
                if ValueOrder.sortOrder(sorted[mid].value, bound, localizedCaseInsensitive: false) == .orderedAscending {
                    low = mid + 1
                } else {
                    high = mid
                }
            }
            return low
        }
        func scan(from: Int, while condition: (Value) -> Bool) {
            var index = from
            while index < sorted.count, condition(sorted[index].value) {
                if !stale.contains(sorted[index].id) && matches(sorted[index].value) { result.append(sorted[index].id) }
                index += 1
            }
        }
        switch condition {
        case .equal(let wanted):
            for value in wanted {
                scan(from: start(value)) { ValueOrder.sortOrder($0, value, localizedCaseInsensitive: false) != .orderedDescending }
            }
        case .range(let lower, _, let upper, _):
            // Numbers of other types sort by value, so one run covers the range.
            let first = lower.map(start) ?? sorted.firstIndex { !$0.value.isNull } ?? sorted.count
            scan(from: first) { value in
                guard let upper else { return true }
                return ValueOrder.sortOrder(value, upper, localizedCaseInsensitive: false) != .orderedDescending
            }
        }
        for (id, value) in delta where matches(value) { result.append(id) }
        if case .equal(let wanted) = condition, wanted.count > 1 { return Array(Set(result)) }
        return result
    }
}

struct IndexKey: Hashable, Sendable {
    let entity: UInt16
    let slot: Int
}

extension Store {
    /// The IDs of an entity's records whose attribute at `slot` meets `condition`, from
    /// a secondary index (built on first use).
    public func indexedIDs(entity: UInt16, slot: Int, matching condition: IndexCondition) throws -> [RecordID] {
        guard let description = schema.entity(number: entity), slot >= 0, slot < description.attributes.count else {
            throw CairnError(.invalidArgument, "no attribute \(slot) in entity \(entity) to index")
        }
        let key = IndexKey(entity: entity, slot: slot)
        if state.withLock({ $0.indexes[key] }) == nil { try buildIndex(key) }
        return state.withLock { state in
            (state.indexes[key]?.lookup(condition) ?? []).map { RecordID(rawValue: $0) }
        }
    }

    /// Whether an index over this attribute exists already (for `explain`).
    public func hasIndex(entity: UInt16, slot: Int) -> Bool {
        state.withLock { $0.indexes[IndexKey(entity: entity, slot: slot)] != nil }
    }

    private func buildIndex(_ key: IndexKey) throws {
        // Build under the log lock so no commit lands between the scan and the publish.
        try log.withLock { _ in
            var entries: [(Value, UInt64)] = []
            try scan(entity: key.entity) { id, body in
                var reader = ByteReader(body)
                let count = try reader.count("value count", maximum: FormatLimits.maxValuesPerRecord)
                guard key.slot < count else { return }
                for _ in 0..<key.slot { _ = try reader.value() }
                entries.append((try reader.value(), id.rawValue))
            }
            let index = SecondaryIndex(slot: key.slot, entries: entries)
            state.withLock { $0.indexes[key] = index }
        }
    }
}

extension StoreState {
    /// Keeps the indexes of `id`'s entity in step with a put (`body`) or delete (nil).
    func updateIndexes(_ id: RecordID, body: [UInt8]?) {
        let affected = indexes.filter { $0.key.entity == id.entity }
        guard !affected.isEmpty else { return }
        let values = body.flatMap { try? ValueCoding.decode($0) }
        for (key, index) in affected {
            if body == nil {
                index.update(id.rawValue, to: nil)
            } else {
                index.update(id.rawValue, to: values.flatMap { key.slot < $0.count ? $0[key.slot] : nil } ?? .null)
            }
        }
    }
}
