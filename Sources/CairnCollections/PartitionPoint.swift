extension RandomAccessCollection {
    /// The index of the first element for which `isAfter` holds, by binary search; the
    /// collection must be partitioned by it (false for a prefix, true for the rest).
    /// `endIndex` if it holds for none.
    @inlinable public func partitionPoint(where isAfter: (Element) throws -> Bool) rethrows -> Index {
        var low = startIndex, span = count
        while span > 0 {
            let half = span / 2
            let mid = index(low, offsetBy: half)
            if try isAfter(self[mid]) {
                span = half
            } else {
                low = index(after: mid)
                span -= half + 1
            }
        }
        return low
    }
}
