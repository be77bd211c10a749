/// Sorting by a 64-bit key (record IDs, mostly) in linear time.
///
/// A least-significant-digit radix sort over bytes, stable, that skips every byte in
/// which all keys agree: record IDs of one entity share their top 16 bits and, in all but
/// huge stores, most of their serial's high bits, so a large sort takes few passes, each
/// linear, where a comparison sort costs many comparisons per ID.
public enum RadixSort {
    /// Below this many items a comparison sort is faster than counting bytes.
    public static let threshold = 256

    /// Sorts `items` by `key`, keeping the order of items with equal keys.
    @inline(__always)
    @inlinable public static func sort<T>(_ items: inout [T], by key: (T) -> UInt64) {
        let count = items.count
        guard count >= threshold else {
            items.sort { key($0) < key($1) }
            return
        }
        var union: UInt64 = 0, common: UInt64 = ~0
        for item in items {
            let k = key(item)
            union |= k
            common &= k
        }
        let varying = union ^ common
        guard varying != 0 else { return }  // every key equal: already sorted
        var other = items
        var histogram = [Int](repeating: 0, count: 256)
        var shift: UInt64 = 0
        while shift < 64 {
            defer { shift += 8 }
            guard (varying >> shift) & 0xFF != 0 else { continue }
            histogram.withUnsafeMutableBufferPointer { offsets in
                for index in 0..<256 { offsets[index] = 0 }
                items.withUnsafeBufferPointer { source in
                    for item in source { offsets[Int(truncatingIfNeeded: (key(item) >> shift) & 0xFF)] += 1 }
                    var total = 0
                    for index in 0..<256 {
                        let n = offsets[index]
                        offsets[index] = total
                        total += n
                    }
                    other.withUnsafeMutableBufferPointer { target in
                        for item in source {
                            let digit = Int(truncatingIfNeeded: (key(item) >> shift) & 0xFF)
                            target[offsets[digit]] = item
                            offsets[digit] += 1
                        }
                    }
                }
            }
            swap(&items, &other)
        }
    }

    /// `keys` in ascending order.
    @inlinable public static func sorted(_ keys: consuming [UInt64]) -> [UInt64] {
        var result = consume keys
        sort(&result) { $0 }
        return result
    }
}
