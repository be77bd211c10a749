import Foundation
import Testing
@testable import CairnStorage

/// A lookup that wants only the first matches of each value in ID order
/// (``SecondaryIndex/collect(_:count:first:prefixes:skipping:into:value:match:)`` with
/// `first`) relies on a stored index listing equal values in ID order (FORMAT.md §6.6), and
/// checks that as it walks: a run found out of order is taken whole instead.
@Suite struct IndexRunOrderTests {
    /// Runs of (value, ID) entries in index order.
    static func lookup(_ entries: [(Int64, UInt64)], wanting value: Int64, first: Int,
                       skipping: Set<UInt64> = []) throws -> (ids: [UInt64], completeThrough: UInt64?) {
        var result: [IndexMatch] = []
        let through = try SecondaryIndex.collect(.equal([.int64(value)]), count: entries.count, first: first,
                                                 skipping: { skipping.contains($0) }, into: &result,
                                                 value: { .int64(entries[$0].0) },
                                                 match: { IndexMatch(id: entries[$0].1, snapshotPlace: nil) })
        return (result.map(\.id), through)
    }

    @Test func anOrderedRunStopsAfterTheFirstMatches() throws {
        let entries: [(Int64, UInt64)] = [(1, 3), (5, 10), (5, 20), (5, 30), (5, 40), (9, 2)]
        let two = try Self.lookup(entries, wanting: 5, first: 2)
        #expect(two.ids == [10, 20] && two.completeThrough == 20)
        // A skipped entry (changed in the log) is passed over, and not counted.
        let skipping = try Self.lookup(entries, wanting: 5, first: 2, skipping: [10])
        #expect(skipping.ids == [20, 30] && skipping.completeThrough == 30)
        // A run shorter than the wanted count is complete.
        let all = try Self.lookup(entries, wanting: 5, first: 9)
        #expect(all.ids == [10, 20, 30, 40] && all.completeThrough == nil)
    }

    /// IDs that descend among the entries walked: the whole run, in index order, and no
    /// bound on where the matches are complete (the caller reads them all).
    @Test func aRunFoundOutOfOrderIsTakenWhole() throws {
        let entries: [(Int64, UInt64)] = [(1, 3), (5, 40), (5, 20), (5, 50), (5, 10), (9, 2)]
        for first in 1...3 {
            let found = try Self.lookup(entries, wanting: 5, first: first)
            if first == 1 {
                // One entry walked: its order shows nothing (see FORMAT.md §6.6).
                #expect(found.ids == [40] && found.completeThrough == 40)
            } else {
                #expect(found.ids == [40, 20, 50, 10] && found.completeThrough == nil, "first \(first)")
            }
        }
        // Out of order only past a skipped entry: the skipped entry's ID still counts.
        let past = try Self.lookup([(5, 30), (5, 20), (5, 40)], wanting: 5, first: 1, skipping: [30])
        #expect(past.ids == [20, 40] && past.completeThrough == nil)
    }
}
