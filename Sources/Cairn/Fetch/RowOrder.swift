import Foundation

/// The order of a fetch's results: by each sort descriptor's key path in turn, and by
/// record ID where they all tie. One piece of code for the fetch's sort and for live
/// results placing a changed object among the ones they hold, so both agree.
struct RowOrder {
    private let descriptors: [SortDescriptor]
    private let paths: [CompiledPredicate.ResolvedPath]
    /// The locale read once, not at each comparison.
    private let localized: LocalizedOrder?

    init(_ descriptors: [SortDescriptor], entity: EntityDescription, schema: Schema) throws {
        self.descriptors = descriptors
        paths = try descriptors.map { try CompiledPredicate.resolve($0.keyPath, entity: entity, schema: schema) }
        localized = descriptors.contains { $0.localizedCaseInsensitive } ? LocalizedOrder() : nil
    }

    var isEmpty: Bool { descriptors.isEmpty }

    /// The values a row is sorted by (the first value each key path reaches, or null).
    func key(_ values: [Value], _ resolve: CompiledPredicate.Resolver) -> [Value] {
        paths.map { CompiledPredicate.follow($0, values, resolve).first ?? .null }
    }

    /// Whether the row with sort key `a` and ID `idA` comes before the one with `b`, `idB`.
    func precedes(_ a: [Value], _ idA: RecordID, _ b: [Value], _ idB: RecordID) -> Bool {
        for (index, descriptor) in descriptors.enumerated() {
            let order = ValueOrder.sortOrder(a[index], b[index], localized: descriptor.localizedCaseInsensitive ? localized : nil)
            if order == .orderedSame { continue }
            return (order == .orderedAscending) == descriptor.ascending
        }
        return idA < idB
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
    /// each (a fetch of the latest 20 of 100,000 records sorted them all). Sorting the rows
    /// themselves, each with an array of its keys, had cost about 900 instructions per
    /// comparison (retains, and an exclusivity check on the rows at each one).
    func sortedPositions(count: Int, ids: [RecordID], values: (Int) -> [Value], resolve: CompiledPredicate.Resolver,
                         first: Int? = nil) -> [Int] {
        let width = paths.count
        let wanted = min(count, max(0, first ?? count))
        guard wanted > 0 else { return [] }
        let slots = paths.map { path in path.hops.isEmpty && path.countOf == nil && !path.isMany ? path.last : nil }
        var keys: [Value] = []
        keys.reserveCapacity(count * width)
        var integers = width == 1 && !descriptors[0].localizedCaseInsensitive
        for row in 0..<count {
            let rowValues = values(row)
            for (index, slot) in slots.enumerated() {
                let key: Value
                if let slot { key = slot < rowValues.count ? rowValues[slot] : .null } else {
                    key = CompiledPredicate.follow(paths[index], rowValues, resolve).first ?? .null
                }
                if integers { integers = Self.integer(key) != nil }
                keys.append(key)
            }
        }
        if integers {
            // Radix-sorted by (key, ID): by ID first (rows need not come in ID order), then,
            // stably, by the key as an unsigned number in the order wanted.
            let ascending = descriptors[0].ascending
            var order = (0..<count).map { row -> (key: UInt64, id: UInt64, row: Int) in
                let key = UInt64(bitPattern: Self.integer(keys[row]) ?? 0) ^ (1 << 63)
                return (ascending ? key : ~key, ids[row].rawValue, row)
            }
            RadixSort.sort(&order) { $0.id }
            RadixSort.sort(&order) { $0.key }
            return order.prefix(wanted).map(\.row)
        }
        return keys.withUnsafeBufferPointer { keys in
            ids.withUnsafeBufferPointer { ids in
                func precedes(_ a: Int, _ b: Int) -> Bool {
                    for (index, descriptor) in descriptors.enumerated() {
                        let order = ValueOrder.sortOrder(keys[a * width + index], keys[b * width + index],
                                                         localized: descriptor.localizedCaseInsensitive ? localized : nil)
                        if order == .orderedSame { continue }
                        return (order == .orderedAscending) == descriptor.ascending
                    }
                    return ids[a] < ids[b]
                }
                if wanted <= count / 8 { return Self.first(wanted, of: count, by: precedes) }
                return (0..<count).sorted(by: precedes).prefix(wanted).map { $0 }
            }
        }
    }

    private static func integer(_ value: Value) -> Int64? {
        switch value {
        case .int64(let v): return v
        case .int32(let v): return Int64(v)
        case .int16(let v): return Int64(v)
        case .int8(let v): return Int64(v)
        default: return nil
        }
    }

    /// The first `wanted` of `0..<count` by `precedes` (a strict total order), in order: a
    /// heap whose root is the last of those kept so far, which each later position must
    /// precede to take its place.
    static func first(_ wanted: Int, of count: Int, by precedes: (Int, Int) -> Bool) -> [Int] {
        var heap: [Int] = []
        heap.reserveCapacity(wanted)
        func siftDown(_ start: Int) {
            var parent = start
            while true {
                var largest = parent
                let left = 2 * parent + 1, right = left + 1
                if left < heap.count && precedes(heap[largest], heap[left]) { largest = left }
                if right < heap.count && precedes(heap[largest], heap[right]) { largest = right }
                if largest == parent { return }
                heap.swapAt(parent, largest)
                parent = largest
            }
        }
        for position in 0..<count {
            if heap.count < wanted {
                heap.append(position)
                var child = heap.count - 1
                while child > 0 {
                    let parent = (child - 1) / 2
                    guard precedes(heap[parent], heap[child]) else { break }
                    heap.swapAt(parent, child)
                    child = parent
                }
            } else if precedes(position, heap[0]) {
                heap[0] = position
                siftDown(0)
            }
        }
        return heap.sorted(by: precedes)
    }
}
