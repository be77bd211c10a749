import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Equality lookups in an index of strings, whose in-memory runs are searched by each
/// string's first eight bytes before the strings are compared (``StringPrefixes``).
@Suite struct StringIndexTests {
    static let schema = Schema(entities: [
        EntityDescription(name: "Tagged", number: 1,
                          attributes: [AttributeDescription(name: "tag", type: .string, isOptional: true, isIndexed: true),
                                       AttributeDescription(name: "n", type: .int64)]),
    ])

    /// Strings that share their first eight bytes or differ only past them, proper
    /// prefixes of one another, NULs against a shorter string's end, both normal forms of
    /// one string (equal, and composed alike whether the mark falls before or past the
    /// eighth byte), the empty string, and nil.
    static let pool: [Value] = {
        var texts = ["", "a", "abcdefg", "abcdefgh", "abcdefgh\0", "abcdefgh\0\0", "abcdefghi", "abcdefghij", "abcdefgi",
                     "abcdefg\0", "abcdefg\0h", "abcdefgé", "abcdefge\u{301}", "abcdefge", "abcdefgée", "abcdefge\u{301}e",
                     "abcdefgh\u{E9}", "abcdefghe\u{301}", "é", "e\u{301}", "\u{FFFF}", "\u{10FFFF}zz", "zzzzzzzzzzzzzzzz"]
        for i in 0..<12 { texts.append("shared-prefix-\(i)") }
        return texts.map { .string($0) } + [.null]
    }()

    /// Random puts, changes and deletes, thousands at a time so that the index's delta
    /// folds into its recent run and that run into the sorted one many times over: after
    /// each commit, an equality lookup of every string of the pool (and of strings no
    /// record holds) finds exactly the records a test of every record finds, in memory
    /// and, after a compaction, over the stored index with the log's changes, before and
    /// after a reopen.
    @Test(arguments: [UInt64(1), 2]) func equalityLookupsFindWhatAScanFinds(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let fs = MemoryFileSystem()
        var store = try Store.open(at: "/db", schema: Self.schema, options: memoryOptions(fs))
        defer { try? store.close() }
        var rows: [RecordID: Value] = [:]
        let targets = Self.pool + ["abcdefgh\0\0\0", "abcdefgf", "b", "shared-prefix-99"].map { Value.string($0) }
        var mismatches = 0
        for round in 0..<10 {
            var changes: [Change] = []
            let committed = rows.keys.sorted()  // (sorted: a dictionary's order differs from run to run)
            for _ in 0..<2_500 {
                let value = Self.pool[Int(random.next() % UInt64(Self.pool.count))]
                if !committed.isEmpty && random.next() % 3 == 0 {
                    let id = committed[Int(random.next() % UInt64(committed.count))]
                    if random.next() % 4 == 0, rows[id] != nil {
                        rows[id] = nil
                        changes.append(.delete(id))
                    } else {
                        rows[id] = value
                        changes.append(.put(id, [value, .int64(0)]))
                    }
                } else {
                    let id = try store.allocateID(entity: 1)
                    rows[id] = value
                    changes.append(.put(id, [value, .int64(0)]))
                }
            }
            // (One record changed twice in a transaction is one change.)
            var seen = Set<RecordID>()
            let last = changes.reversed().filter { change in
                switch change {
                case .put(let id, _), .delete(let id): return seen.insert(id).inserted
                }
            }
            try store.commit(last.reversed())
            if round == 6 { try store.compact() }
            if round == 8 {
                // Reopened over the stored index and a log tail of two rounds' changes,
                // whose run is made at the open (``SecondaryIndex/init(snapshot:block:changes:)``).
                try store.close()
                store = try Store.open(at: "/db", options: memoryOptions(fs))
            }
            for target in targets {
                let found = try store.indexedIDs(entity: 1, slot: 0, matching: .equal([target]))
                let expected = Set(rows.filter { SecondaryIndex.matches($0.value, .equal([target])) }.keys)
                if Set(found) != expected || found.count != expected.count {
                    mismatches += 1
                    if mismatches <= 3 {
                        Issue.record("seed \(seed) round \(round) \(target): found \(found.count), expected \(expected.count)")
                    }
                }
            }
        }
        #expect(mismatches == 0)
    }
    /// The positions of a prefix are exactly those a test of every prefix finds, in runs
    /// where prefixes repeat from once to hundreds of times, and for prefixes before,
    /// between and after them all.
    @Test func prefixRangesAreWhatATestOfEachFinds() {
        var random = SplitMix64(seed: 3)
        for _ in 0..<200 {
            let distinct = 1 + Int(random.next() % 40)
            var prefixes: [UInt64] = []
            for value in 0..<distinct {
                let copies = random.next() % 4 == 0 ? Int(random.next() % 300) : Int(random.next() % 3)
                prefixes += Array(repeating: UInt64(value * 2 + 1), count: copies)
            }
            let nulls = Int(random.next() % 3)
            let run = StringPrefixes(nulls: nulls, prefixes: prefixes)
            for wanted in 0...UInt64(distinct * 2 + 1) {
                let positions = prefixes.indices.filter { prefixes[$0] == wanted }.map { $0 + nulls }
                let range = run.range(of: wanted)
                #expect(Array(range) == positions, "\(wanted) in \(prefixes)")
            }
        }
    }
}
