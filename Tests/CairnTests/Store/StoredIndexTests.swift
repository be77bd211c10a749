import CairnCollections
import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Attribute indexes stored in the snapshot (FORMAT.md §6.6): written by compaction, read
/// in place after open, kept right by later commits, checked, and refused when damaged.
@Suite struct StoredIndexTests {
    /// Index order (values by `ValueOrder`, nil first, equal values by position) from the
    /// integer fast path, radix-sorted from 256 values up, is the order the general
    /// comparison gives: negative and positive keys, many duplicates, nils, every width.
    @Test(arguments: [0, 1, 255, 256, 257, 3_000])
    func integerIndexOrderIsTheGeneralOrder(count: Int) {
        var random = SplitMix64(seed: UInt64(count) + 5)
        for width in 0..<4 {
            let values: [Value] = (0..<count).map { _ in
                let r = random.next()
                if r % 11 == 0 { return .null }
                let key = Int64(bitPattern: r >> 8) >> Int64(r % 60)  // some huge, most small, negatives too
                switch width {
                case 0: return .int8(Int8(truncatingIfNeeded: key % 7))
                case 1: return .int16(Int16(truncatingIfNeeded: key))
                case 2: return .int32(Int32(truncatingIfNeeded: key % 1_000))
                default: return .int64(key)
                }
            }
            let reference = values.indices.sorted { i, j in
                switch IndexOrder.compare(values[i], values[j]) {
                case .orderedAscending: return true
                case .orderedDescending: return false
                case .orderedSame: return i < j
                }
            }
            let same = IndexOrder.sortedPositions(values) == reference  // (not the arrays: thousands of numbers)
            #expect(same, "width \(width)")
        }
    }

    /// A run built from changes in any order is in index order, equal values in ID order,
    /// as the general comparison orders it: integers of each width (the fast path), nils,
    /// duplicates, and values the fast path leaves to the general one (mixed widths,
    /// strings, doubles).
    @Test(arguments: [0, 1, 2, 300, 3_000])
    func aRunFromUnorderedChangesIsInIndexOrder(count: Int) {
        var random = SplitMix64(seed: UInt64(count) + 41)
        for kind in 0..<7 {
            var ids = Array(Set((0..<count).map { _ in random.next() % 1_000_000 + 1 }))
            ids.shuffle(using: &random)
            let entries: [(Value, UInt64)] = ids.map { id in
                let r = random.next()
                if r % 9 == 0 { return (.null, id) }
                let key = Int64(bitPattern: r >> 8) >> Int64(r % 60)
                switch kind {
                case 0: return (.int8(Int8(truncatingIfNeeded: key % 5)), id)
                case 1: return (.int16(Int16(truncatingIfNeeded: key)), id)
                case 2: return (.int32(Int32(truncatingIfNeeded: key % 100)), id)
                case 3: return (.int64(key % 50), id)
                case 4: return (r % 2 == 0 ? .int64(key % 20) : .int32(Int32(truncatingIfNeeded: key % 20)), id)
                case 5: return (r % 2 == 0 ? .string("s\(key % 30)") : .double(Double(key % 30)), id)
                default:  // strings alone (their own fast path): duplicates, long ones, é composed and not
                    let texts = ["", "a", "B", "b", "é", "e\u{301}", "z", "aa", String(repeating: "long", count: 9) + "\(key % 3)"]
                    return (.string(texts[Int(r >> 9) % texts.count] + (r % 3 == 0 ? "\(key % 4)" : "")), id)
                }
            }
            let reference = entries.sorted { a, b in
                switch IndexOrder.compare(a.0, b.0) {
                case .orderedAscending: return true
                case .orderedDescending: return false
                case .orderedSame: return a.1 < b.1
                }
            }
            let run = SecondaryIndex.sortedRun(unordered: entries)
            let same = run.count == reference.count
                && zip(run, reference).allSatisfy { $0.value == $1.0 && $0.id == $1.1 && $0.value.kindBit == $1.0.kindBit }
            #expect(same, "kind \(kind): \(zip(run, reference).first { !($0.value == $1.0 && $0.id == $1.1) }.map { "\($0.0) vs \($0.1)" } ?? "count")")
        }
    }

    /// `Item`: an indexed int64, an optional indexed string, an unindexed int64, and a
    /// uniqueness group whose first attribute (`code`) is indexed through it.
    static let schema = Schema(entities: [
        EntityDescription(name: "Item", number: 1,
                          attributes: [AttributeDescription(name: "rank", type: .int64, isIndexed: true),
                                       AttributeDescription(name: "label", type: .string, isOptional: true, isIndexed: true),
                                       AttributeDescription(name: "plain", type: .int64),
                                       AttributeDescription(name: "code", type: .int32)],
                          uniqueness: [["code"]]),
        EntityDescription(name: "Empty", number: 2,
                          attributes: [AttributeDescription(name: "rank", type: .int64, isIndexed: true)]),
    ])

    static func values(_ random: inout SplitMix64, serial: UInt64) -> [Value] {
        let label: Value = random.next() % 5 == 0 ? .null : .string(["ant", "bee", "cat", "Dog", "ému", ""][Int(random.next() % 6)])
        return [.int64(Int64(random.next() % 41) - 20), label, .int64(Int64(random.next() % 7)), .int32(Int32(serial))]
    }

    static func conditions(_ random: inout SplitMix64, slot: Int) -> [IndexCondition] {
        if slot == 1 {
            return [.equal([.string("bee")]), .equal([.null]), .equal([.string("cat"), .string("ant"), .string("cat")]),
                    .range(lower: .string("b"), lowerInclusive: true, upper: .string("d"), upperInclusive: false),
                    .range(lower: nil, lowerInclusive: true, upper: .string("cat"), upperInclusive: true),
                    .range(lower: .string("Dog"), lowerInclusive: false, upper: nil, upperInclusive: true)]
        }
        let a = Int64(random.next() % 50) - 25, b = a + Int64(random.next() % 20)
        return [.equal([.int64(a)]), .equal([.int64(a), .int64(b), .int32(Int32(a + 1))]), .equal([.double(Double(a))]),
                .range(lower: .int64(a), lowerInclusive: random.next() % 2 == 0, upper: .int64(b), upperInclusive: random.next() % 2 == 0),
                .range(lower: nil, lowerInclusive: true, upper: .int64(a), upperInclusive: false),
                .range(lower: .double(Double(a) + 0.5), lowerInclusive: true, upper: nil, upperInclusive: true),
                // Bounds of another type compare with nothing: every candidate is tested, none matches.
                .range(lower: nil, lowerInclusive: true, upper: .string("z"), upperInclusive: true),
                .range(lower: nil, lowerInclusive: true, upper: nil, upperInclusive: true)]
    }

    /// What an index lookup must return, by brute force over the model.
    static func expected(_ model: Contents, slot: Int, _ condition: IndexCondition) -> Set<RecordID> {
        Set(model.filter { $0.key.entity == 1 && SecondaryIndex.matches($0.value[slot], condition) }.keys)
    }

    /// `count` small transactions on `Item` (inserts, updates, a delete), for canonical stores.
    static func transactions(_ count: Int) -> [[Change]] {
        var random = SplitMix64(seed: 5)
        return (0..<count).map { t in
            var changes: [Change] = (0..<3).map { k in
                let serial = UInt64(3 * t + k + 1)
                return .put(RecordID(entity: 1, serial: serial), values(&random, serial: serial))
            }
            if t > 0 { changes.append(.delete(RecordID(entity: 1, serial: UInt64(3 * t - 1)))) }
            return changes
        }
    }

    /// An indexed scan hands over each match as a plain read finds it, in ID order, with
    /// its version: records the snapshot's stored index found (where it says their frames
    /// are), records the log changed since, and records an index built on first use
    /// found (which knows no frames). And it reads one state, the lookup's: a commit made
    /// during the scan, changing or deleting a later match, is not seen.
    @Test func anIndexedScanReadsTheStateOfItsLookup() throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: Self.schema, options: memoryOptions(fs))
        defer { try? store.close() }
        var random = SplitMix64(seed: 41)
        let ids = try (0..<300).map { _ in try store.allocateID(entity: 1) }
        try store.commit(ids.map { .put($0, Self.values(&random, serial: $0.serial)) })
        try store.compact()
        // The log: some records changed, some deleted, some new.
        let more = try (0..<20).map { _ in try store.allocateID(entity: 1) }
        try store.commit(stride(from: 0, to: 300, by: 9).map { .put(ids[$0], Self.values(&random, serial: ids[$0].serial)) }
                         + stride(from: 4, to: 300, by: 23).map { .delete(ids[$0]) }
                         + more.map { .put($0, Self.values(&random, serial: $0.serial)) })
        // Slot 0 is indexed in the snapshot; slot 2 is not, and is indexed on first use.
        for (slot, condition) in [(0, IndexCondition.range(lower: .int64(-5), lowerInclusive: true, upper: .int64(5), upperInclusive: true)),
                                  (2, IndexCondition.equal([.int64(3), .int64(5)]))] {
            let expected = try (ids + more).sorted().compactMap { id -> (RecordID, [Value], UInt64)? in
                guard let (record, version) = try store.getVersioned(id), SecondaryIndex.matches(record.values[slot], condition) else { return nil }
                return (id, record.values, version)
            }
            #expect(expected.count > 20 && Set(expected.map(\.2)).count >= 2)  // (records of both commits)
            var seen: [(RecordID, [Value], UInt64)] = []
            try store.scanIndexed(entity: 1, slot: slot, matching: condition) { id, version, body in
                seen.append((id, try body.values(), version))
                if seen.count == 1 {
                    // Mid-scan: the last match changed, the one before it deleted.
                    let last = expected[expected.count - 1].0, before = expected[expected.count - 2].0
                    try store.commit([.put(last, [.int64(1_000), .null, .int64(1_000), .int32(Int32(last.serial))]), .delete(before)])
                }
            }
            #expect(seen.map(\.0) == expected.map(\.0), "slot \(slot)")
            #expect(seen.map(\.1) == expected.map(\.1), "slot \(slot)")
            #expect(seen.map(\.2) == expected.map(\.2), "slot \(slot)")
            // And the commit did land: a new scan sees it.
            var after: [RecordID] = []
            try store.scanIndexed(entity: 1, slot: slot, matching: condition) { id, _, _ in after.append(id) }
            #expect(after == expected.dropLast(2).map(\.0), "slot \(slot)")
        }
    }

    /// Lookups of strings in both Unicode normal forms, sharing prefixes (pairs Swift's `<`
    /// orders neither way on Linux), find every record whose string equals the one asked
    /// for, or falls in the range, and only those: through the stored index and the log's.
    @Test func stringsInBothNormalFormsAreFound() throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: Self.schema, options: memoryOptions(fs))
        defer { try? store.close() }
        var texts: [String] = []
        for base in ["e", "é", "e\u{301}", "o\u{308}", "ö", "x"] {
            texts.append(base)
            for tail in ["", "0", "1", "é", "e\u{301}"] { texts.append(base + tail) }
        }
        var labels: [RecordID: String] = [:]
        var random = SplitMix64(seed: 3)
        for round in 0..<2 {
            var changes: [Change] = []
            for _ in 0..<150 {
                let id = try store.allocateID(entity: 1)
                let text = texts[Int(random.next() % UInt64(texts.count))]
                labels[id] = text
                changes.append(.put(id, [.int64(0), .string(text), .int64(0), .int32(Int32(id.serial))]))
            }
            try store.commit(changes)
            if round == 0 { try store.compact() }
        }
        for text in texts {
            let found = try store.indexedIDs(entity: 1, slot: 1, matching: .equal([.string(text)])).sorted()
            #expect(found == labels.filter { $0.value == text }.keys.sorted(), "== \(text.unicodeScalars.map(\.value))")
            let range = IndexCondition.range(lower: .string(text), lowerInclusive: true, upper: .string(text + "1"), upperInclusive: false)
            let inRange = try store.indexedIDs(entity: 1, slot: 1, matching: range).sorted()
            let expected = labels.filter { SecondaryIndex.matches(.string($0.value), range) }.keys.sorted()
            #expect(inRange == expected, "range from \(text.unicodeScalars.map(\.value)): extra \(inRange.filter { !expected.contains($0) }.map { labels[$0]!.unicodeScalars.map(\.value) }), missing \(expected.filter { !inRange.contains($0) }.map { labels[$0]!.unicodeScalars.map(\.value) })")
        }
    }

    /// An equality lookup in an index of reals holding a NaN (whose place among reals the
    /// index order gives by encoded bytes, FORMAT.md §6.6: 1.0 before NaN before 0.1)
    /// finds the equal values on both sides of it, in a run built in memory and in the
    /// stored block, as the search over the whole run did; a lookup of integers and strings,
    /// whose order is total, finds its many equal entries by searching on from the first.
    @Test func equalValuesAroundANaNAreFound() throws {
        let schema = Schema(entities: [
            EntityDescription(name: "Reading", number: 1,
                              attributes: [AttributeDescription(name: "value", type: .double, isIndexed: true),
                                           AttributeDescription(name: "level", type: .int64, isIndexed: true),
                                           AttributeDescription(name: "tag", type: .string, isIndexed: true)]),
        ])
        func store(_ rows: [[Value]]) throws -> Store {
            let store = try Store.open(at: "/db", schema: schema, options: memoryOptions(MemoryFileSystem()))
            try store.commit(try rows.map { .put(try store.allocateID(entity: 1), $0) })
            return store
        }
        let reals = try store([1.0, .nan, 0.1, 1.0, 1.0, 1.0].map { [.double($0), .int64(0), .string("")] })
        defer { try? reals.close() }
        let many = try store((0..<300).map { i in [.double(2), .int64(Int64(i % 3)), .string(["a", "b", "c"][i % 3])] })
        defer { try? many.close() }
        func check(_ label: String) throws {
            #expect(try reals.indexedIDs(entity: 1, slot: 0, matching: .equal([.double(1)])).count == 4, "\(label)")
            #expect(try reals.indexedIDs(entity: 1, slot: 0, matching: .equal([.double(0.1)])).count == 1, "\(label)")
            #expect(try many.indexedIDs(entity: 1, slot: 1, matching: .equal([.int64(1)])).count == 100, "\(label)")
            #expect(try many.indexedIDs(entity: 1, slot: 1, matching: .equal([.int64(0), .int64(2)])).count == 200, "\(label)")
            #expect(try many.indexedIDs(entity: 1, slot: 1, matching: .equal([.int64(3)])).isEmpty, "\(label)")
            for (tag, count) in [("a", 100), ("c", 100), ("", 0), ("d", 0)] {
                #expect(try many.indexedIDs(entity: 1, slot: 2, matching: .equal([.string(tag)])).count == count, "\(label) \(tag)")
            }
        }
        try check("built in memory")
        try reals.compact()
        try many.compact()
        try check("stored")
    }

    /// Lookups in indexes of reals and dates holding NaNs (and nils, and equal values)
    /// find exactly what testing every record finds, by equality and by ranges, through
    /// an index built in memory, the stored one, and the stored one with log changes over
    /// it. (The index order placed a NaN among reals by its encoded bytes, which is no
    /// order: 1.0 before NaN before 0.1, and 0.1 before 1.0.)
    @Test func lookupsAmongNaNsFindWhatAScanFinds() throws {
        let schema = Schema(entities: [
            EntityDescription(name: "Reading", number: 1,
                              attributes: [AttributeDescription(name: "value", type: .double, isOptional: true, isIndexed: true),
                                           AttributeDescription(name: "when", type: .date, isOptional: true, isIndexed: true)]),
        ])
        let reals: [Double?] = [nil, .nan, -.nan, 0.1, 1.0, 2.0, -1.0, 0, -0.0, .infinity, 1e300]
        var random = SplitMix64(seed: 5)
        var mismatches = 0
        for round in 0..<40 {
            let store = try Store.open(at: "/db", schema: schema, options: memoryOptions(MemoryFileSystem()))
            defer { try? store.close() }
            var rows: [RecordID: [Value]] = [:]
            func row() -> [Value] {
                let real = reals[Int(random.next() % UInt64(reals.count))]
                let time = reals[Int(random.next() % UInt64(reals.count))]
                return [real.map { .double($0) } ?? .null, time.map { .date(Date(timeIntervalSinceReferenceDate: $0)) } ?? .null]
            }
            var changes: [Change] = []
            for _ in 0..<(3 + Int(random.next() % 30)) {
                let id = try store.allocateID(entity: 1)
                rows[id] = row()
                changes.append(.put(id, rows[id]!))
            }
            try store.commit(changes)
            func check(_ label: String) throws {
                for slot in 0..<2 {
                    var targets: [Value] = reals.compactMap { $0 }.map { .double($0) }
                    if slot == 1 { targets = targets.map { if case .double(let x) = $0 { .date(Date(timeIntervalSinceReferenceDate: x)) } else { $0 } } }
                    var conditions: [IndexCondition] = targets.map { .equal([$0]) }
                    for lower in targets {
                        for upper in targets {
                            conditions.append(.range(lower: lower, lowerInclusive: true, upper: upper, upperInclusive: random.next() % 2 == 0))
                        }
                        conditions.append(.range(lower: lower, lowerInclusive: false, upper: nil, upperInclusive: false))
                        conditions.append(.range(lower: nil, lowerInclusive: false, upper: lower, upperInclusive: true))
                    }
                    for condition in conditions {
                        let found = Set(try store.indexedIDs(entity: 1, slot: slot, matching: condition))
                        let expected = Set(rows.filter { SecondaryIndex.matches($0.value[slot], condition) }.keys)
                        if found != expected {
                            mismatches += 1
                            if mismatches <= 3 { Issue.record("round \(round), \(label), slot \(slot), \(condition): found \(found.count), expected \(expected.count)") }
                        }
                    }
                }
            }
            try check("built in memory")
            try store.compact()
            try check("stored")
            var later: [Change] = []
            for id in rows.keys.sorted().prefix(4) {
                rows[id] = row()
                later.append(.put(id, rows[id]!))
            }
            try store.commit(later)
            try check("stored, with changes in the log")
        }
        #expect(mismatches == 0)
    }

    /// A walk of an index (``Store/scanInIndexOrder(entity:slot:ascending:_:)``) hands over
    /// every record in index order (value, then ID), or its reverse, with its indexed value
    /// and body, and stops when told: through every tier of the index — stored in the
    /// snapshot or built on first use, the sorted run, the recent run and the delta, as
    /// thousands of puts, changes and deletes fold them — for an integer, a string with
    /// nils and an unindexed (built) attribute.
    @Test func anIndexWalkIsTheIndexOrder() throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: Self.schema, options: memoryOptions(fs))
        defer { try? store.close() }
        var random = SplitMix64(seed: 77)
        var live: [RecordID] = []
        func check(_ label: String) throws {
            for slot in [0, 1, 2] {
                var expected: [(value: Value, id: RecordID)] = []
                for id in live { if let (record, _) = try store.getVersioned(id) { expected.append((record.values[slot], id)) } }
                expected.sort { a, b in
                    let order = IndexOrder.compare(a.value, b.value)
                    return order == .orderedSame ? a.id < b.id : order == .orderedAscending
                }
                for ascending in [true, false] {
                    let wanted = ascending ? expected : expected.reversed()
                    var seen: [RecordID] = []
                    var valuesAgree = true
                    try store.scanInIndexOrder(entity: 1, slot: slot, ascending: ascending) { id, _, value, body in
                        seen.append(id)
                        if try body.values()[slot] != value { valuesAgree = false }
                        return true
                    }
                    #expect(seen == wanted.map(\.id), "\(label), slot \(slot), ascending \(ascending)")
                    #expect(valuesAgree, "\(label), slot \(slot)")
                    var few: [RecordID] = []
                    try store.scanInIndexOrder(entity: 1, slot: slot, ascending: ascending) { id, _, _, _ in
                        few.append(id)
                        return few.count < 7
                    }
                    #expect(few == Array(wanted.prefix(7).map(\.id)), "\(label), slot \(slot), ascending \(ascending): stops")
                }
            }
        }
        for round in 0..<6 {
            let fresh = try (0..<2_000).map { _ in try store.allocateID(entity: 1) }
            var operations: [Change] = fresh.map { .put($0, Self.values(&random, serial: $0.serial)) }
            let changed = stride(from: round % 2, to: live.count, by: 2).map { live[$0] }
            operations += changed.map { .put($0, Self.values(&random, serial: $0.serial)) }
            let gone = stride(from: round, to: live.count, by: 11).map { live[$0] }
            operations += gone.map { .delete($0) }
            try store.commit(operations)
            live = live.filter { !Set(gone).contains($0) } + fresh
            if round == 2 { try store.compact() }
            try check("round \(round)")
        }
    }

    /// Every bit of a small snapshot with stored indexes: the open, the read of every
    /// record, or a lookup through each stored index fails with an error naming the file.
    @Test func everyBitOfASnapshotWithStoredIndexesIsDetected() throws {
        let canonical = try CanonicalStore(Self.transactions(5), compactAfter: 5, schema: Self.schema)
        try canonical.withEveryBitFlipped(in: canonical.snapshotPath) { fs, byte, bit in
            do {
                let store = try Store.open(at: "/db", options: memoryOptions(fs))
                defer { try? store.close() }
                _ = try contents(of: store)
                for slot in [0, 1, 3] {
                    _ = try store.indexedIDs(entity: 1, slot: slot, matching: .range(lower: nil, lowerInclusive: true, upper: nil, upperInclusive: true))
                }
                Issue.record("damage at byte \(byte) bit \(bit) not detected")
            } catch let error as CairnError {
                #expect(error.path == canonical.snapshotPath && error.offset != nil, "byte \(byte) bit \(bit): \(error)")
            }
        }
    }

    /// An index in memory through tens of thousands of puts and deletes over a thousand
    /// to twelve thousand IDs (its delta folded into the recent run many times, that run
    /// into the large one several times), looked up by value and by range between
    /// changes: every answer is what a scan of the current values gives.
    @Test(arguments: [(1_000, false), (12_000, false), (3_000, true)])
    func anIndexInMemoryAnswersAsAScanThroughManyChanges(ids: Int, mixed: Bool) throws {
        var random = SplitMix64(seed: UInt64(ids))
        // Mixed: integers, integral reals equal to them, other reals and strings (values
        // with and without a hashed key in the delta).
        func value() -> Value {
            let n = Int64(random.next() % 50)
            guard mixed else { return .int64(n) }
            switch random.next() % 4 {
            case 0: return .double(Double(n))
            case 1: return .double(Double(n) + 0.5)
            case 2: return .string("s\(n)")
            default: return .int64(n)
            }
        }
        var model: [UInt64: Value] = [:]
        var initial: [(Value, UInt64)] = []
        for id in 1...UInt64(3_000) { let v = value(); model[id] = v; initial.append((v, id)) }
        let index = SecondaryIndex(slot: 0, entries: initial)
        var overlay = IDMap<UInt64, OverlayEntry>()
        var bodies = LogBodies(log: nil)
        for step in 0..<20_000 {
            let id = random.next() % UInt64(ids) + 1
            if random.next() % 5 == 0 {
                model[id] = nil
                overlay[id] = .deleted
            } else {
                let v = value()
                model[id] = v
                overlay[id] = ValueCoding.encode([v]).withUnsafeBytes { bodies.hold($0) }
            }
            index.noteChange(id)
            guard step % 97 == 0 else { continue }
            let low = Int64(random.next() % 50), high = low + Int64(random.next() % 10)
            var conditions: [IndexCondition] = [.equal([.int64(low)]), .equal([.int64(low), .int64(high)]),
                                                .range(lower: .int64(low), lowerInclusive: step % 2 == 0, upper: .int64(high), upperInclusive: true)]
            if mixed {
                conditions += [.equal([.double(Double(low))]), .equal([.double(Double(low) + 0.5), .string("s\(high)")]),
                               .equal([.int32(Int32(high)), .string("s\(low)")])]
            }
            for condition in conditions {
                let found = try index.lookup(condition, changes: EntityOverlay(overlay, bodies: bodies)).matches.map(\.id)
                let expected = Set(model.filter { SecondaryIndex.matches($0.value, condition) }.keys)
                #expect(found.count == Set(found).count && Set(found) == expected, "step \(step) \(condition)")
                // Asked for the first few in ID order only, the lookup finds those, and
                // nothing that does not match.
                let first = 1 + step % 4
                let (some, through) = try index.lookup(condition, changes: EntityOverlay(overlay, bodies: bodies), first: first)
                let someIDs = some.map(\.id).filter { $0 <= through ?? .max }
                #expect(Set(someIDs).isSubset(of: expected) && someIDs.count == Set(someIDs).count, "step \(step) \(condition) first \(first)")
                #expect(Array(someIDs.sorted().prefix(first)) == Array(expected.sorted().prefix(first)), "step \(step) \(condition) first \(first)")
            }
        }
    }

    @Test(arguments: Seeds.list()) func lookupsMatchAScanAcrossCommitsCompactionsAndReopens(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let fs = MemoryFileSystem()
        var store = try Store.open(at: "/db", schema: Self.schema, options: memoryOptions(fs))
        defer { try? store.close() }
        var model: Contents = [:]
        var serial: UInt64 = 0
        for round in 0..<12 {
            // A transaction or several: inserts, updates and deletes.
            for _ in 0..<Int(random.next() % 4 + 1) {
                var changes: [Change] = []
                for _ in 0..<Int(random.next() % 40) {
                    let live = model.keys.sorted()
                    if live.isEmpty || random.next() % 3 == 0 {
                        serial += 1
                        let id = try store.allocateID(entity: 1)
                        changes.append(.put(id, Self.values(&random, serial: UInt64(serial))))
                    } else if random.next() % 4 == 0 {
                        changes.append(.delete(live[Int(random.next() % UInt64(live.count))]))
                    } else {
                        let id = live[Int(random.next() % UInt64(live.count))]
                        var values = Self.values(&random, serial: serial)
                        values[3] = model[id]?[3] ?? values[3]  // keep codes unique
                        changes.append(.put(id, values))
                    }
                    apply([changes.last!], to: &model)
                }
                try store.commit(changes)
            }
            switch random.next() % 3 {
            case 0: try store.compact()
            case 1:
                try store.close()
                store = try Store.open(at: "/db", options: memoryOptions(fs))
            default: break
            }
            // Slots 0, 1 and 3 have stored indexes; 2 is built in memory on its first use.
            for slot in [0, 1, 2, 3] {
                for condition in Self.conditions(&random, slot: slot) {
                    let found = try store.indexedIDs(entity: 1, slot: slot, matching: condition)
                    #expect(found.count == Set(found).count, "seed \(seed) round \(round) slot \(slot) \(condition): duplicates")
                    #expect(Set(found) == Self.expected(model, slot: slot, condition), "seed \(seed) round \(round) slot \(slot) \(condition)")
                }
            }
            #expect(store.verify().isEmpty, "seed \(seed) round \(round)")
        }
        // Indexes on attributes the schema does not index are built in memory, as before.
        let found = try store.indexedIDs(entity: 1, slot: 2, matching: .equal([.int64(3)]))
        #expect(Set(found) == Self.expected(model, slot: 2, .equal([.int64(3)])))
    }

    /// A store with a snapshot holding `count` items (rank = serial % 10) and its files.
    static func compactedStore(_ count: Int = 100) throws -> MemoryFileSystem {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: schema, options: memoryOptions(fs))
        var changes: [Change] = []
        for i in 0..<count {
            changes.append(.put(try store.allocateID(entity: 1), [.int64(Int64(i % 10)), .string("l\(i % 3)"), .int64(0), .int32(Int32(i))]))
        }
        try store.commit(changes)
        try store.compact()
        try store.close()
        return fs
    }

    static func snapshotPath(_ fs: MemoryFileSystem) throws -> String {
        "/db/" + StoreFileName.snapshot(try Store.readManifest(in: "/db", fileSystem: fs).snapshotNumber)
    }

    @Test func compactionStoresTheSchemasIndexesAndOpenReadsThemWithoutAScan() throws {
        let fs = try Self.compactedStore()
        let store = try Store.open(at: "/db", options: memoryOptions(fs))
        defer { try? store.close() }
        // rank, label and code (through its uniqueness group); not plain; none for the empty entity.
        #expect(store.statistics.storedIndexes == 3)
        #expect(store.statistics.snapshotFormatVersion == FileHeader.currentVersion)
        #expect(store.hasIndex(entity: 1, slot: 0) && store.hasIndex(entity: 1, slot: 1) && store.hasIndex(entity: 1, slot: 3))
        #expect(!store.hasIndex(entity: 1, slot: 2) && !store.hasIndex(entity: 2, slot: 0))
        #expect(try store.indexedIDs(entity: 1, slot: 0, matching: .equal([.int64(4)])).count == 10)
        #expect(try store.indexedIDs(entity: 1, slot: 3, matching: .range(lower: .int32(10), lowerInclusive: true,
                                                                            upper: .int32(20), upperInclusive: false)).count == 10)
    }

    /// Over a long log tail, the open attaches no stored index (it would sort the tail's
    /// values for each); the first lookup does, reading the changes the log held at open
    /// and those committed since. Over a short tail, the open attaches them. A compaction
    /// lets go of them until the next lookup.
    @Test func aStoredIndexOverALongTailIsAttachedOnFirstUseWithEveryChange() throws {
        let fs = try Self.compactedStore()
        var options = memoryOptions(fs)
        options.openIndexTailLimit = 1
        var store = try Store.open(at: "/db", options: options)
        defer { try? store.close() }
        let ids = store.ids(entity: 1)
        // In the log before the reopen: rank 4 → 40 for one, a delete of another rank 4.
        try store.commit([.put(ids[4], [.int64(40), .string("l1"), .int64(0), .int32(4)]), .delete(ids[14])])
        try store.close()
        store = try Store.open(at: "/db", options: memoryOptions(fs))
        #expect(store.state.withLock { $0.indexes.count } == 3, "a short tail's indexes are attached at open")
        try store.close()
        store = try Store.open(at: "/db", options: options)
        let key = IndexKey(entity: 1, slot: 0)
        #expect(store.state.withLock { $0.indexes.isEmpty }, "the open built an index over a tail of 2")
        #expect(store.hasIndex(entity: 1, slot: 0))
        // Committed after the open, before the first lookup.
        let added = try store.allocateID(entity: 1)
        try store.commit([.put(added, [.int64(4), .string("l0"), .int64(0), .int32(1_000)]), .delete(ids[24])])
        let expected = Set(ids.enumerated().filter { $0.offset % 10 == 4 && ![4, 14, 24].contains($0.offset) }.map(\.element) + [added])
        #expect(Set(try store.indexedIDs(entity: 1, slot: 0, matching: .equal([.int64(4)]))) == expected)
        #expect(try store.indexedIDs(entity: 1, slot: 0, matching: .equal([.int64(40)])) == [ids[4]])
        #expect(store.state.withLock { $0.indexes[key]?.isStored } == true)
        try store.compact()
        #expect(store.state.withLock { $0.indexes.isEmpty })
        #expect(Set(try store.indexedIDs(entity: 1, slot: 0, matching: .equal([.int64(4)]))) == expected)
        #expect(store.state.withLock { $0.indexes[key]?.isStored } == true)
    }

    /// A tail long enough to have its index values read and sorted in parts, on several
    /// threads, gives the lookups a scan gives: integers (with nils and repeats, the
    /// parts' runs merged) and strings (which the parts refuse, read again in one).
    @Test func aLongTailsIndexReadInPartsAnswersAsAScan() throws {
        let fs = try Self.compactedStore()
        var options = memoryOptions(fs)
        var store = try Store.open(at: "/db", options: options)
        defer { try? store.close() }
        var model: Contents = [:]
        for id in store.ids(entity: 1) { model[id] = try store.get(id)?.values }
        var random = SplitMix64(seed: 99)
        var changes: [Change] = []
        for serial in 0..<(SecondaryIndex.partsMinimum + 5_000) {
            let id = try store.allocateID(entity: 1)
            var values = Self.values(&random, serial: UInt64(serial) + 1_000)
            if serial % 9 == 0 { values[0] = .null }
            changes.append(.put(id, values))
        }
        let old = Array(model.keys.sorted().prefix(30))
        changes += old.prefix(10).map { Change.delete($0) }
        for id in old.suffix(10) {
            var values = Self.values(&random, serial: 0)
            values[3] = model[id]?[3] ?? values[3]  // (codes stay unique)
            changes.append(.put(id, values))
        }
        apply(changes, to: &model)
        try store.commit(changes)
        try store.close()
        options.openIndexTailLimit = 0
        store = try Store.open(at: "/db", options: options)
        for slot in [0, 1] {
            for condition in Self.conditions(&random, slot: slot) {
                let found = try store.indexedIDs(entity: 1, slot: slot, matching: condition)
                #expect(found.count == Set(found).count, "slot \(slot) \(condition): duplicates")
                #expect(Set(found) == Self.expected(model, slot: slot, condition), "slot \(slot) \(condition)")
            }
        }
        // The run itself is in index order: nils first, then integers, equal ones by ID.
        let sorted = try #require(store.state.withLock { $0.indexes[IndexKey(entity: 1, slot: 0)] }).sorted
        guard case .integers = sorted else { Issue.record("not a run of integers: \(sorted.count)"); return }
        let run = sorted.values
        #expect(zip(run, run.dropFirst()).allSatisfy { SecondaryIndex.less($0, $1) })
    }

    /// Overwrites bytes of the snapshot, fixing the checksums above them (block, index,
    /// footer) when asked, as a buggy writer rather than a bad disk would leave them.
    static func damage(_ fs: MemoryFileSystem, fixChecksums: Bool, _ edit: (inout [UInt8], SnapshotIndex.AttributeIndex) -> Void) throws {
        let path = try snapshotPath(fs)
        var bytes = try #require(fs.contents(of: path))
        let footer = try bytes.withUnsafeBytes { try SnapshotFooter.decode(file: $0) }
        let index = try bytes.withUnsafeBytes {
            try SnapshotIndex.decode(file: $0, indexOffset: Int(footer.indexOffset), indexLength: Int(footer.indexLength))
        }
        let block = try #require(index.attributeIndexes.first)  // rank
        edit(&bytes, block)
        if fixChecksums {
            let row = Int(footer.indexOffset) + 8 + index.entities.count * SnapshotIndex.entityHeaderSize
            let crc = CRC32C.masked(bytes[block.entryBytes])
            withUnsafeBytes(of: crc.littleEndian) { bytes.replaceSubrange((row + 4)..<(row + 8), with: $0) }
            var fixed = footer
            fixed.indexChecksum = CRC32C.masked(bytes[Int(footer.indexOffset)..<Int(footer.indexOffset + footer.indexLength)])
            bytes.replaceSubrange((bytes.count - SnapshotFooter.size)..., with: fixed.encoded())
        }
        try fs.setContents(of: path, to: bytes)
    }

    @Test func aDamagedBlockIsReportedWhereItIsWhenUsedAndByVerify() throws {
        let fs = try Self.compactedStore()
        var blockOffset = 0
        try Self.damage(fs, fixChecksums: false) { bytes, block in
            blockOffset = block.blockOffset
            bytes[block.blockOffset + 5] ^= 0x40
        }
        let store = try Store.open(at: "/db", options: memoryOptions(fs))  // blocks are checked on use
        defer { try? store.close() }
        #expect { try store.indexedIDs(entity: 1, slot: 0, matching: .equal([.int64(1)])) } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .corrupt && error.offset == Int64(blockOffset) && error.message.contains("checksum")
                && error.path?.hasSuffix(".snapshot") == true
        }
        // The other indexes still work.
        #expect(try store.indexedIDs(entity: 1, slot: 1, matching: .equal([.string("l1")])).count == 33)
        #expect(store.verify().contains { $0.message.contains("attribute index") && $0.offset == Int64(blockOffset) })
    }

    @Test func repairRebuildsADamagedIndexKeepingEveryRecord() throws {
        let fs = try Self.compactedStore()
        try Self.damage(fs, fixChecksums: false) { bytes, block in bytes[block.blockOffset + 9] ^= 0x01 }
        let report = try Store.repair(at: "/db", fileSystem: fs)
        #expect(report.salvagedRecords == 100)
        #expect(report.notes.contains { $0.hasPrefix("rebuilt the snapshot") })
        let store = try Store.open(at: "/db", options: memoryOptions(fs))
        defer { try? store.close() }
        #expect(store.verify().isEmpty)
        #expect(store.statistics.storedIndexes == 3)
        #expect(try store.indexedIDs(entity: 1, slot: 0, matching: .equal([.int64(7)])).count == 10)
    }

    @Test func anIndexWithGoodChecksumsButWrongEntriesIsCaughtNotTrusted() throws {
        // A position past the entity's records: an error at lookup, not a crash.
        let fs = try Self.compactedStore()
        try Self.damage(fs, fixChecksums: true) { bytes, block in
            // Every position all ones: 255 or more, past the entity's 100 records.
            for i in 0..<block.length { bytes[block.blockOffset + i] = 0xFF }
        }
        var store = try Store.open(at: "/db", options: memoryOptions(fs))
        #expect { try store.indexedIDs(entity: 1, slot: 0, matching: .equal([.int64(1)])) } throws: {
            ($0 as? CairnError)?.code == .corrupt && ($0 as? CairnError)?.message.contains("past its records") == true
        }
        #expect(store.verify().contains { $0.message.contains("past its records") })
        try store.close()

        // Two entries swapped: out of order, and one listed twice: `verify` names both.
        let swapped = try Self.compactedStore()
        try Self.damage(swapped, fixChecksums: true) { bytes, block in
            let w = block.entryWidth
            let first = Array(bytes[block.blockOffset..<(block.blockOffset + w)])
            bytes.replaceSubrange((block.blockOffset + w * 50)..<(block.blockOffset + w * 51), with: first)
        }
        store = try Store.open(at: "/db", options: memoryOptions(swapped))
        defer { try? store.close() }
        #expect(store.verify().contains { $0.message.contains("out of order") || $0.message.contains("twice") })
    }

    /// A table of many entity rows and many attribute index rows is matched in one pass
    /// (a hostile index of 65,535 of each must not cost a search per row), and a row naming
    /// an entity the entity table lacks is refused where it is.
    @Test func attributeIndexRowsAreMatchedToEntitiesInOnePass() throws {
        let entities = (1...20_000).map { (entity: UInt16($0), entries: SnapshotIndex.Entries()) }
        let rows = (0..<20_000).map { SnapshotIndex.AttributeIndex(entity: 20_000, attribute: $0, checksum: 0, count: 0, blockOffset: 0,
                                                                  entryWidth: 1) }
        let bytes = SnapshotIndex.encode(entities, attributeIndexes: rows, at: 64)
        let file = [UInt8](repeating: 0, count: 64) + bytes
        let decoded = try file.withUnsafeBytes { try SnapshotIndex.decode(file: $0, indexOffset: 64, indexLength: bytes.count) }
        #expect(decoded.attributeIndexes.count == 20_000 && decoded.attributeIndexes.allSatisfy { $0.entity == 20_000 })

        var missing = rows
        missing[0].entity = 0  // before every entity, then the rest ascend again past it
        let bad = [UInt8](repeating: 0, count: 64) + SnapshotIndex.encode(entities, attributeIndexes: Array(missing.prefix(2)), at: 64)
        #expect { try bad.withUnsafeBytes { try SnapshotIndex.decode(file: $0, indexOffset: 64, indexLength: bad.count - 64) } } throws: {
            ($0 as? CairnError)?.offset == Int64(64 + 8 + 24 * 20_000) && ($0 as? CairnError)?.message.contains("no row in the entity table") == true
        }
    }

    @Test func blocksThatDoNotTileTheSpaceBeforeTheIndexAreRefusedAtOpen() throws {
        let fs = try Self.compactedStore()
        let path = try Self.snapshotPath(fs)
        let good = try #require(fs.contents(of: path))
        let footer = try good.withUnsafeBytes { try SnapshotFooter.decode(file: $0) }
        let rows = Int(footer.indexOffset) + 8 + 24  // one entity row, then the attribute index rows
        // Each edit of the first attribute index row, with the index checksum fixed so the
        // row itself is what open objects to.
        let edits: [(String, (inout [UInt8]) -> Void)] = [
            ("block offset", { $0[rows + 16] &+= 8 }),
            ("entry count", { $0[rows + 8] &+= 1 }),
            ("attribute", { $0[rows + 2] = 9 }),
            ("order", { bytes in
                let second = Array(bytes[(rows + 24)..<(rows + 48)])
                bytes.replaceSubrange((rows + 24)..<(rows + 48), with: bytes[rows..<(rows + 24)])
                bytes.replaceSubrange(rows..<(rows + 24), with: second)
            }),
        ]
        for (what, edit) in edits {
            var bytes = good
            edit(&bytes)
            var fixed = footer
            fixed.indexChecksum = CRC32C.masked(bytes[Int(footer.indexOffset)..<Int(footer.indexOffset + footer.indexLength)])
            bytes.replaceSubrange((bytes.count - SnapshotFooter.size)..., with: fixed.encoded())
            try fs.setContents(of: path, to: bytes)
            #expect(throws: CairnError.self, "\(what)") { try Store.open(at: "/db", options: memoryOptions(fs)).close() }
            do { try Store.open(at: "/db", options: memoryOptions(fs)).close() } catch let error as CairnError {
                #expect(error.code == .corrupt && error.path == path, "\(what): \(error)")
            }
        }
    }
}
