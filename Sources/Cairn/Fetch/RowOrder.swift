import CairnCollections
import CairnStorage
import Foundation

/// The order of a fetch's results: by each sort descriptor's key path in turn, and by
/// record ID where they all tie. One piece of code for the fetch's sort and for live
/// results placing a changed object among the ones they hold, so both agree.
struct RowOrder {
    private let paths: [CompiledPredicate.ResolvedPath]
    /// Each key's direction and whether it compares strings by the locale, apart from the
    /// descriptors (a descriptor copied out of its array would retain its key path, at
    /// every comparison).
    private let ascending: [Bool]
    private let localizedKeys: [Bool]
    /// The locale read once, not at each comparison.
    private let localized: LocalizedOrder?

    init(_ descriptors: [SortKey], entity: EntityDescription, schema: Schema) throws {
        paths = try descriptors.map { try CompiledPredicate.resolve($0.keyPath, entity: entity, schema: schema) }
        ascending = descriptors.map(\.ascending)
        localizedKeys = descriptors.map(\.localizedCaseInsensitive)
        localized = descriptors.contains { $0.localizedCaseInsensitive } ? LocalizedOrder() : nil
    }

    var isEmpty: Bool { paths.isEmpty }

    /// The values a row is sorted by (the first value each key path reaches, or null).
    func key(_ values: [Value], _ resolve: CompiledPredicate.Resolver) -> [Value] {
        paths.map { CompiledPredicate.follow($0, values, resolve).first ?? .null }
    }

    /// Whether the row with sort key `a` and ID `idA` comes before the one with `b`, `idB`.
    func precedes(_ a: [Value], _ idA: RecordID, _ b: [Value], _ idB: RecordID) -> Bool {
        precedes({ a[$0] }, idA, { b[$0] }, idB)
    }

    /// ``precedes(_:_:_:_:)`` with each key's values read by position, wherever they lie.
    @inline(__always)
    func precedes(_ a: (Int) -> Value, _ idA: RecordID, _ b: (Int) -> Value, _ idB: RecordID) -> Bool {
        for index in ascending.indices {
            let x = a(index), y = b(index)
            let order: ComparisonResult
            if case .int64(let i) = x, case .int64(let j) = y {
                order = i < j ? .orderedAscending : (i > j ? .orderedDescending : .orderedSame)  // (as sortOrder orders them)
            } else if let nan = ValueOrder.nanOrder(x, y) {
                order = nan
            } else {
                order = ValueOrder.sortOrder(x, y, localized: localizedKeys[index] ? localized : nil)
            }
            if order == .orderedSame { continue }
            return (order == .orderedAscending) == ascending[index]
        }
        return idA < idB
    }

    /// Each key's slot when every key path is an attribute of the record itself (nil if any
    /// follows a relationship or counts one).
    var ownSlots: [Int]? {
        var slots: [Int] = []
        for path in paths {
            guard path.hops.isEmpty, path.countOf == nil, !path.isMany, let slot = path.last else { return nil }
            slots.append(slot)
        }
        return slots
    }
}

extension RowOrder {
    /// The positions of `count` rows in this order (row `i` has the values `values(i)` and
    /// the ID `ids[i]`); with `first`, only the first `first` positions of that order.
    ///
    /// A fetch's sort. Each row's key is taken once into one array (a key path of the
    /// record's own attribute is its slot, read directly, not followed); rows are ordered
    /// by position, the keys and IDs read through unsafe buffers. One integer key (a sort
    /// by an integer attribute) is sorted by radix, in linear time. With `first` well
    /// below the count, a heap
    /// keeps the first ones met so far and the rest are passed over with one comparison
    /// each, not sorted. Sorting the rows themselves, each with an array of its keys, would
    /// cost retains, and an exclusivity check on the rows, at each comparison.
    ///
    /// `value(row, slot)` reads a row's own value (a row kept undecoded reads it in place);
    /// `values(row)` gives all of them, for a key path that follows a relationship.
    func sortedPositions(count: Int, ids: [RecordID], values: (Int) -> [Value], value: (Int, Int) -> Value,
                         resolve: CompiledPredicate.Resolver, first: Int? = nil) -> [Int] {
        let width = paths.count
        let wanted = min(count, max(0, first ?? count))
        guard wanted > 0 else { return [] }
        let slots = paths.map { path in path.hops.isEmpty && path.countOf == nil && !path.isMany ? path.last : nil }
        var keys: [Value] = []
        keys.reserveCapacity(count * width)
        var integers = width == 1 && !localizedKeys[0]
        for row in 0..<count {
            var rowValues: [Value]?  // all of them, once, for the first key path that needs them
            for (index, slot) in slots.enumerated() {
                let key: Value
                if let slot { key = value(row, slot) } else {
                    let all = rowValues ?? values(row)
                    rowValues = all
                    key = CompiledPredicate.follow(paths[index], all, resolve).first ?? .null
                }
                if integers { integers = key.integer != nil }
                keys.append(key)
            }
        }
        if integers {
            // Radix-sorted by (key, ID): by ID first (rows need not come in ID order), then,
            // stably, by the key as an unsigned number in the order wanted.
            let ascending = self.ascending[0]
            var order = (0..<count).map { row -> (key: UInt64, id: UInt64, row: Int) in
                let key = UInt64(bitPattern: keys[row].integer ?? 0) ^ (1 << 63)
                return (ascending ? key : ~key, ids[row].rawValue, row)
            }
            // (A scan's rows come in ID order: their sort by ID is then skipped.)
            if ids.indices.dropFirst().contains(where: { ids[$0 - 1] >= ids[$0] }) { RadixSort.sort(&order) { $0.id } }
            RadixSort.sort(&order) { $0.key }
            return order.prefix(wanted).map(\.row)
        }
        return keys.withUnsafeBufferPointer { keys in
            ids.withUnsafeBufferPointer { ids in
                func precedes(_ a: Int, _ b: Int) -> Bool {
                    self.precedes({ keys[a * width + $0] }, ids[a], { keys[b * width + $0] }, ids[b])
                }
                if wanted <= count / 8 { return Self.first(wanted, of: count, by: precedes) }
                return (0..<count).sorted(by: precedes).prefix(wanted).map { $0 }
            }
        }
    }

    /// The first `wanted` of `0..<count` by `precedes` (a strict total order), in order.
    static func first(_ wanted: Int, of count: Int, by precedes: (Int, Int) -> Bool) -> [Int] {
        var kept = KeptFirst()
        for position in 0..<count {
            if kept.count < wanted {
                kept.insert(position, by: precedes)
            } else if let last = kept.last, precedes(position, last) {
                kept.replaceLast(with: position, by: precedes)
            }
        }
        return kept.positions.sorted(by: precedes)
    }
}

/// The first positions met so far by an order, in a heap whose root is the last of them:
/// a position met later is kept in its place only if it precedes it.
struct KeptFirst {
    private(set) var positions: [Int] = []
    var count: Int { positions.count }
    /// The last kept position in the order.
    var last: Int? { positions.first }

    mutating func insert(_ position: Int, by precedes: (Int, Int) -> Bool) {
        positions.append(position)
        var child = positions.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard precedes(positions[parent], positions[child]) else { return }
            positions.swapAt(parent, child)
            child = parent
        }
    }

    /// Puts `position` where the last kept one was (which may be `position` itself, of a
    /// row changed in place), and moves it down to where it belongs.
    mutating func replaceLast(with position: Int, by precedes: (Int, Int) -> Bool) {
        guard !positions.isEmpty else { return }
        positions[0] = position
        var parent = 0
        while true {
            var later = parent
            let left = 2 * parent + 1, right = left + 1
            if left < positions.count && precedes(positions[later], positions[left]) { later = left }
            if right < positions.count && precedes(positions[later], positions[right]) { later = right }
            if later == parent { return }
            positions.swapAt(parent, later)
            parent = later
        }
    }
}
