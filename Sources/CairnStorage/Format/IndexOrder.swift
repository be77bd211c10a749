import Foundation

/// The order of an attribute index (FORMAT.md §6.6), stored or in memory: values by
/// ``ValueOrder/sortOrder(_:_:localizedCaseInsensitive:)`` (nil first), a NaN after every
/// other value (``ValueOrder/nanOrder(_:_:)``, from format version 4), equal values by
/// record ID. One definition, so a stored index and a lookup agree; it is the order of a
/// fetch sorted ascending by the attribute.
package enum IndexOrder {
    package static func compare(_ a: Value, _ b: Value) -> ComparisonResult {
        ValueOrder.nanOrder(a, b) ?? ValueOrder.sortOrder(a, b, localizedCaseInsensitive: false)
    }

    /// Whether a stored index of an attribute of `type` in a snapshot of format `version`
    /// is in ``compare(_:_:)``'s order: before version 4 a NaN real, decimal or date went
    /// by its encoded bytes, so such an index may be in no order, and is not used (it is
    /// built in memory on first use instead, until a compaction writes it anew).
    package static func storedOrderHolds(_ type: AttributeType, version: UInt32) -> Bool {
        switch type {
        case .float, .double, .decimal, .date: return version >= 4
        default: return true
        }
    }

    /// The positions of `values` (one per record, in ascending ID order) in index order.
    package static func sortedPositions(_ values: [Value]) -> [Int] {
        sortedPositionsAndPrefixes(values).positions
    }

    /// ``sortedPositions(_:)`` and, when every value is nil or a string, how many nils come
    /// first and the first eight bytes of each string after them, in that order, as the
    /// sort compared them (``ValueOrder/bytePrefix(_:)`` of the composed string).
    package static func sortedPositionsAndPrefixes(_ values: [Value]) -> (positions: [Int], strings: (nulls: Int, prefixes: [UInt64])?) {
        if let fast = sortedIntegerPositions(values) { return (fast, nil) }
        if let (positions, nulls, prefixes) = sortedStringPositions(values) { return (positions, (nulls, prefixes)) }
        var positions = Array(values.indices)
        positions.sort { i, j in
            switch compare(values[i], values[j]) {
            case .orderedAscending: return true
            case .orderedDescending: return false
            case .orderedSame: return i < j
            }
        }
        return (positions, nil)
    }

    /// A string attribute (nil or a string each), sorted as (String, position) pairs, each
    /// string composed once and then compared by its bytes (``ValueOrder/stringOrder(_:_:)``,
    /// the order of two strings without options): the same order, without the cost of
    /// comparing `Value`s. Each pair carries its string's first eight bytes as one
    /// big-endian number, compared first: two strings whose first eight bytes differ are
    /// ordered by them, most pairs of most keys, without reading the strings. Nil for any
    /// other values; with the positions, how many nils come first and the prefixes of the
    /// strings after them.
    private static func sortedStringPositions(_ values: [Value]) -> (positions: [Int], nulls: Int, prefixes: [UInt64])? {
        var nulls: [Int] = []
        var keyed: [(prefix: UInt64, key: String, position: Int)] = []
        keyed.reserveCapacity(values.count)
        for position in values.indices {
            switch values[position] {
            case .null: nulls.append(position)
            case .string(let text):
                let key = ValueOrder.composed(text)
                keyed.append((ValueOrder.bytePrefix(key), key, position))
            default: return nil
            }
        }
        keyed.sort { a, b in
            if a.prefix != b.prefix { return a.prefix < b.prefix }
            switch ValueOrder.composedOrder(a.key, b.key) {
            case .orderedAscending: return true
            case .orderedDescending: return false
            case .orderedSame: return a.position < b.position
            }
        }
        var positions = nulls
        positions.reserveCapacity(values.count)
        var prefixes: [UInt64] = []
        prefixes.reserveCapacity(keyed.count)
        for entry in keyed {
            positions.append(entry.position)
            prefixes.append(entry.prefix)
        }
        return (positions, nulls.count, prefixes)
    }

    /// The positions of `count` values in index order, where the values are nil at
    /// `nullPositions` (ascending) and, elsewhere in order, the integers `keys`: nils first,
    /// then by key, equal keys in position order. Keys already ascending need no sort.
    package static func sortedPositions(integerKeys keys: [Int64], nullPositions: [Int], count: Int) -> [Int] {
        var positions = nullPositions
        positions.reserveCapacity(count)
        var keyed: [(key: Int64, position: Int)] = []
        let ascending = zip(keys, keys.dropFirst()).allSatisfy { $0 <= $1 }
        if !ascending { keyed.reserveCapacity(keys.count) }
        var nextNull = 0, key = 0
        for position in 0..<count {
            if nextNull < nullPositions.count, nullPositions[nextNull] == position {
                nextNull += 1
                continue
            }
            if ascending { positions.append(position) } else { keyed.append((keys[key], position)) }
            key += 1
        }
        guard !ascending else { return positions }
        if keyed.count >= RadixSort.threshold {
            RadixSort.sort(&keyed) { UInt64(bitPattern: $0.key) ^ (1 << 63) }
        } else {
            keyed.sort { $0.key != $1.key ? $0.key < $1.key : $0.position < $1.position }
        }
        for entry in keyed { positions.append(entry.position) }
        return positions
    }

    /// The common case, an integer attribute, sorted as plain (Int64, position) pairs: the
    /// same order without comparing `Value`s. Nil unless every value is nil or an integer
    /// of one width.
    private static func sortedIntegerPositions(_ values: [Value]) -> [Int]? {
        var nulls: [Int] = []
        var keys: [Int64] = []
        keys.reserveCapacity(values.count)
        // Values read in place (iterating the array would copy each).
        let integers = values.withUnsafeBufferPointer { buffer -> Bool in
            var width: AttributeType?
            for position in buffer.indices {
                if case .null = buffer[position] {
                    nulls.append(position)
                    continue
                }
                guard let (key, kind) = buffer[position].integerAndWidth, kind == width ?? kind else { return false }
                width = kind
                keys.append(key)
            }
            return true
        }
        guard integers else { return nil }
        return sortedPositions(integerKeys: keys, nullPositions: nulls, count: values.count)
    }
}
