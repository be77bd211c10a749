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
    /// then by key, equal keys in position order. Keys already ascending need no sort;
    /// others are sorted in place (`keys` is left in key order), with no more memory than
    /// the positions returned. `count` is at most `UInt32.max`.
    package static func sortedPositions(integerKeys keys: inout [Int64], nullPositions: [Int], count: Int) -> [UInt32] {
        var positions: [UInt32] = []
        positions.reserveCapacity(count)
        for position in nullPositions { positions.append(UInt32(truncatingIfNeeded: position)) }
        var nextNull = 0
        for position in 0..<count {
            if nextNull < nullPositions.count, nullPositions[nextNull] == position {
                nextNull += 1
                continue
            }
            positions.append(UInt32(truncatingIfNeeded: position))
        }
        guard !zip(keys, keys.dropFirst()).allSatisfy({ $0 <= $1 }) else { return positions }
        let nulls = nullPositions.count
        keys.withUnsafeMutableBufferPointer { keys in
            positions.withUnsafeMutableBufferPointer { positions in
                InPlaceRadix.sort(keys: keys, positions: UnsafeMutableBufferPointer(rebasing: positions[nulls...]))
            }
        }
        return positions
    }

    /// The common case, an integer attribute, sorted as plain (Int64, position) pairs: the
    /// same order without comparing `Value`s. Nil unless every value is nil or an integer
    /// of one width.
    private static func sortedIntegerPositions(_ values: [Value]) -> [Int]? {
        // (Positions are sorted as `UInt32`s: more values take the general path.)
        guard values.count <= Int(UInt32.max) else { return nil }
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
        return sortedPositions(integerKeys: &keys, nullPositions: nulls, count: values.count).map { Int($0) }
    }
}

/// Sorts integer keys and the positions beside them by key, then position, in place: a
/// most-significant-digit radix sort that moves entries within their arrays (American
/// flag sort), so that sorting takes no second copy of either. Short ranges are sorted by
/// insertion.
enum InPlaceRadix {
    static func sort(keys: UnsafeMutableBufferPointer<Int64>, positions: UnsafeMutableBufferPointer<UInt32>) {
        precondition(keys.count == positions.count, "one position per key")
        var union: UInt64 = 0, common: UInt64 = ~0
        for key in keys {
            union |= digits(key)
            common &= digits(key)
        }
        let varying = union ^ common
        // (Every key equal: the positions, appended in order, are sorted already.)
        guard varying != 0 else { return }
        sort(keys, positions, 0..<keys.count, shift: (63 - varying.leadingZeroBitCount) / 8 * 8)
    }

    /// The key's bits in the order of the signed keys (the sign bit flipped).
    @inline(__always) private static func digits(_ key: Int64) -> UInt64 { UInt64(bitPattern: key) ^ (1 << 63) }

    /// Sorts `range`, whose keys agree above the byte at `shift`.
    private static func sort(_ keys: UnsafeMutableBufferPointer<Int64>, _ positions: UnsafeMutableBufferPointer<UInt32>,
                             _ range: Range<Int>, shift: Int) {
        if range.count <= 32 {
            insertionSort(keys, positions, range)
            return
        }
        @inline(__always) func digit(_ index: Int) -> Int { Int(truncatingIfNeeded: (digits(keys[index]) >> UInt64(shift)) & 0xFF) }
        // (On the stack: a sort of millions of keys makes hundreds of thousands of calls.)
        withUnsafeTemporaryAllocation(of: Int.self, capacity: 3 * 256) { table in
            let counts = UnsafeMutableBufferPointer(rebasing: table[0..<256])
            let starts = UnsafeMutableBufferPointer(rebasing: table[256..<512])
            let next = UnsafeMutableBufferPointer(rebasing: table[512..<768])
            counts.initialize(repeating: 0)
            for index in range { counts[digit(index)] += 1 }
            var total = range.lowerBound
            for bucket in 0..<256 {
                starts[bucket] = total
                next[bucket] = total
                total += counts[bucket]
            }
            // Each entry swapped straight into the next free place of its bucket.
            permute(keys, positions, counts: counts, starts: starts, next: next, digit: digit)
            for bucket in 0..<256 where counts[bucket] > 1 {
                let bucketRange = starts[bucket]..<(starts[bucket] + counts[bucket])
                if shift == 0 {
                    // Equal keys: their positions in order.
                    var equal = UnsafeMutableBufferPointer(rebasing: positions[bucketRange])
                    equal.sort()
                } else {
                    sort(keys, positions, bucketRange, shift: shift - 8)
                }
            }
        }
    }

    @inline(__always)
    private static func permute(_ keys: UnsafeMutableBufferPointer<Int64>, _ positions: UnsafeMutableBufferPointer<UInt32>,
                                counts: UnsafeMutableBufferPointer<Int>, starts: UnsafeMutableBufferPointer<Int>,
                                next: UnsafeMutableBufferPointer<Int>, digit: (Int) -> Int) {
        for bucket in 0..<256 {
            let end = starts[bucket] + counts[bucket]
            while next[bucket] < end {
                let index = next[bucket]
                let target = digit(index)
                if target == bucket {
                    next[bucket] += 1
                } else {
                    keys.swapAt(index, next[target])
                    positions.swapAt(index, next[target])
                    next[target] += 1
                }
            }
        }
    }

    private static func insertionSort(_ keys: UnsafeMutableBufferPointer<Int64>, _ positions: UnsafeMutableBufferPointer<UInt32>,
                                      _ range: Range<Int>) {
        guard range.count > 1 else { return }
        for index in (range.lowerBound + 1)..<range.upperBound {
            let key = keys[index], position = positions[index]
            var hole = index
            while hole > range.lowerBound, keys[hole - 1] > key || (keys[hole - 1] == key && positions[hole - 1] > position) {
                keys[hole] = keys[hole - 1]
                positions[hole] = positions[hole - 1]
                hole -= 1
            }
            keys[hole] = key
            positions[hole] = position
        }
    }
}
