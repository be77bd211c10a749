import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// An entity with each attribute twice, indexed and not, so every query can run on both plans.
final class Item: ManagedObject {
    @Attribute(indexed: true) var rank: Int = 0
    @Attribute var rankPlain: Int = 0
    @Attribute(indexed: true) var label: String? = nil
    @Attribute var labelPlain: String? = nil
    @Attribute var score: Double = 0
    @Attribute var flag: Bool = false
    @Attribute var when: Date? = nil
    @ToOne(inverse: "items") var group: Group?
}

final class Group: ManagedObject {
    @Attribute var title: String = ""
    @ToMany(inverse: "group") var items: [Item]
}

/// The plain-Swift twin of an item, for computing expected answers.
struct ItemData {
    var id: ObjectID
    var rank: Int
    var label: String?
    var score: Double
    var flag: Bool
    var when: Date?
    var group: String?
}

struct FetchFixture {
    let stack: Stack
    let context: Context
    var items: [ItemData] = []
    var groups: [String: [ObjectID]] = [:]

    static let labels: [String?] = [nil, "", "apple", "Apple", "APPLE", "äpple", "banana", "Bänana", "cherry pie",
                                    "straße", "STRASSE", "Émile", "emile", "a*b", "x?y", "naïve", "日本", "zebra"]

    init(seed: UInt64, count: Int = 150) throws {
        stack = try Stack(model: try Model(Item.self, Group.self))
        context = stack.context()
        // Random steps undo one change at a time (by event, an undo took back every step
        // since the last save, and a step then picked from an empty list).
        context.undoManager.groupsByEvent = false
        var random = SplitMix64(seed: seed)
        let groupObjects = ["red", "green", "blue"].map { title -> Group in
            let group = Group(context: context)
            group.title = title
            return group
        }
        for _ in 0..<count {
            let item = Item(context: context)
            let rank = Int(random.next() % 40) - 10
            let label = FetchFixture.labels[Int(random.next() % UInt64(FetchFixture.labels.count))]
            item.rank = rank
            item.rankPlain = rank
            item.label = label
            item.labelPlain = label
            item.score = Double(Int(random.next() % 2000)) / 10 - 50
            item.flag = random.next() % 2 == 0
            item.when = random.next() % 4 == 0 ? nil : Date(timeIntervalSince1970: Double(random.next() % 1000) * 86400)
            let group = random.next() % 4 == 0 ? nil : groupObjects[Int(random.next() % 3)]
            item.group = group
            items.append(ItemData(id: item.objectID, rank: rank, label: label, score: item.score, flag: item.flag,
                                  when: item.when, group: group?.title))
        }
        try context.save()
    }

    func expected(_ test: (ItemData) -> Bool) -> [ObjectID] { items.filter(test).map(\.id).sorted() }

    func actual(_ format: String, _ arguments: [Value], in context: Context? = nil) throws -> [ObjectID] {
        var request = FetchQuery(Item.self)
        request.fetchPredicate = try FetchPredicate(format: format, arguments: arguments)
        return try (context ?? self.context).fetchObjectIDs(request).sorted()
    }
}

func folded(_ text: String?, _ options: String.CompareOptions) -> String? {
    text.map { $0.folding(options: options, locale: nil) }
}

@Suite struct PredicateOperatorTests {
    typealias Case = (format: String, arguments: [Value], expected: (ItemData) -> Bool)

    /// Every operator and modifier, on an indexed and an unindexed copy of each attribute.
    static func cases(_ rank: String, _ label: String) -> [Case] {
        let ci: String.CompareOptions = [.caseInsensitive], cd: String.CompareOptions = [.caseInsensitive, .diacriticInsensitive]
        return [
            ("\(rank) == 5", [], { $0.rank == 5 }),
            ("\(rank) = %@", [.int64(7)], { $0.rank == 7 }),
            ("\(rank) != 5", [], { $0.rank != 5 }),
            ("\(rank) < 0", [], { $0.rank < 0 }),
            ("\(rank) <= 0", [], { $0.rank <= 0 }),
            ("\(rank) > 20", [], { $0.rank > 20 }),
            ("\(rank) >= 20.5", [], { Double($0.rank) >= 20.5 }),
            ("\(rank) BETWEEN {-3, 3}", [], { (-3...3).contains($0.rank) }),
            ("\(rank) IN {1, 2, 3, 100}", [], { [1, 2, 3].contains($0.rank) }),
            ("NOT \(rank) IN %@", [.int64(4)], { $0.rank != 4 }),
            ("\(rank) > 5 AND \(rank) < 10 OR \(rank) == -10", [], { ($0.rank > 5 && $0.rank < 10) || $0.rank == -10 }),
            ("\(rank) > 5 && (flag == YES || score < 0)", [], { $0.rank > 5 && ($0.flag || $0.score < 0) }),
            ("!(\(rank) > 5)", [], { !($0.rank > 5) }),
            ("\(label) == nil", [], { $0.label == nil }),
            ("\(label) != NULL", [], { $0.label != nil }),
            ("\(label) == ''", [], { $0.label == "" }),
            ("\(label) == 'apple'", [], { $0.label == "apple" }),
            ("\(label) ==[c] 'apple'", [], { folded($0.label, ci) == "apple" }),
            ("\(label) ==[cd] 'apple'", [], { folded($0.label, cd) == "apple" }),
            ("\(label) ==[cd] 'EMILE'", [], { folded($0.label, cd) == "emile" }),
            ("\(label) ==[c] 'strasse'", [], { folded($0.label, ci) == "strasse" }),
            ("\(label) < 'b'", [], { $0.label.map { $0 < "b" } ?? false }),
            ("\(label) BEGINSWITH 'a'", [], { $0.label?.hasPrefix("a") ?? false }),
            ("\(label) BEGINSWITH[c] 'a'", [], { folded($0.label, ci)?.hasPrefix("a") ?? false }),
            ("\(label) BEGINSWITH[cd] 'a'", [], { folded($0.label, cd)?.hasPrefix("a") ?? false }),
            ("\(label) ENDSWITH 'e'", [], { $0.label?.hasSuffix("e") ?? false }),
            ("\(label) ENDSWITH[cd] 'E'", [], { folded($0.label, cd)?.hasSuffix("e") ?? false }),
            ("\(label) CONTAINS 'an'", [], { $0.label?.contains("an") ?? false }),
            ("\(label) CONTAINS[c] 'AN'", [], { folded($0.label, ci)?.contains("an") ?? false }),
            ("\(label) CONTAINS[d] 'ai'", [], { folded($0.label, [.diacriticInsensitive])?.contains("ai") ?? false }),
            ("\(label) LIKE 'a*'", [], { $0.label?.hasPrefix("a") ?? false }),
            ("\(label) LIKE[c] '?pple'", [], { folded($0.label, ci).map { $0.count == 5 && $0.hasSuffix("pple") } ?? false }),
            ("\(label) LIKE '*an*'", [], { $0.label?.contains("an") ?? false }),
            ("\(label) MATCHES '[a-z]+'", [], { $0.label.map { !$0.isEmpty && $0.allSatisfy { ("a"..."z").contains($0) } } ?? false }),
            ("\(label) MATCHES[c] 'A.*E'", [], { folded($0.label, ci).map { $0.hasPrefix("a") && $0.hasSuffix("e") } ?? false }),
            ("\(label) IN {'apple', 'zebra'}", [], { ["apple", "zebra"].contains($0.label) }),
            ("\(label) IN[c] {'APPLE'}", [], { folded($0.label, ci) == "apple" }),
            // Lists long enough to be tested through a hashed set (numbers of other types and
            // nil among the items; folded strings).
            ("\(rank) IN {1, 2, 3, 100, -10, 7.0, 8.5, 29, 1000, nil}", [], { [1, 2, 3, -10, 7, 29].contains($0.rank) }),
            ("\(label) IN[cd] {'APPLE', 'bANANA', 'emile', 'x', 'y', 'z', 'w', 'v', 'u'}", [],
             { ["apple", "banana", "emile"].contains(folded($0.label, cd) ?? "-") }),
            ("\(label) IN {'apple', 'Apple', 'zebra', '日本', 'a', 'b', 'c', 'd', nil}", [],
             { $0.label == nil || ["apple", "Apple", "zebra", "日本"].contains($0.label ?? "-") }),
            ("%K == %@", [.string(label), .string("banana")], { $0.label == "banana" }),
            ("TRUEPREDICATE", [], { _ in true }),
            ("FALSEPREDICATE", [], { _ in false }),
            ("when > %@", [.date(Date(timeIntervalSince1970: 500 * 86400))], { $0.when.map { $0 > Date(timeIntervalSince1970: 500 * 86400) } ?? false }),
            ("when == nil", [], { $0.when == nil }),
            ("flag == TRUE", [], { $0.flag }),
            ("group.title == 'red'", [], { $0.group == "red" }),
            ("group.title BEGINSWITH[c] 'G'", [], { $0.group == "green" }),
            ("group == nil", [], { $0.group == nil }),
            // An index's matches with the rest of the predicate testing a related record.
            ("\(rank) > 5 AND group.title == 'red'", [], { $0.rank > 5 && $0.group == "red" }),
        ]
    }

    @Test(arguments: Seeds.list([11, 12, 13]))
    func everyOperatorMatchesTheReference(seed: UInt64) throws {
        let fixture = try FetchFixture(seed: seed)
        // A child context tests the predicate on each record's values, not on its stored
        // body: both ways of testing are held to the reference.
        let child = Context(parent: fixture.context)
        for (indexed, plain) in zip(Self.cases("rank", "label"), Self.cases("rankPlain", "labelPlain")) {
            let expected = fixture.expected(indexed.expected)
            let viaIndex = try fixture.actual(indexed.format, indexed.arguments)
            let viaScan = try fixture.actual(plain.format, plain.arguments)
            #expect(viaIndex == expected, "seed \(seed): \(indexed.format)")
            #expect(viaScan == expected, "seed \(seed): \(plain.format)")
            #expect(try fixture.actual(indexed.format, indexed.arguments, in: child) == expected, "seed \(seed), child: \(indexed.format)")
            #expect(try fixture.actual(plain.format, plain.arguments, in: child) == expected, "seed \(seed), child: \(plain.format)")
        }
    }

    @Test func toManyQuantifiersAndCount() throws {
        let fixture = try FetchFixture(seed: 5)
        var request = FetchQuery(Group.self)
        let groups = try fixture.context.fetch(request)
        func expected(_ test: (Group) -> Bool) -> [String] { groups.filter(test).map(\.title).sorted() }
        let cases: [(String, (Group) -> Bool)] = [
            ("ANY items.rank > 25", { $0.items.contains { $0.rank > 25 } }),
            ("ALL items.rank > -20", { $0.items.allSatisfy { $0.rank > -20 } }),
            ("NONE items.label == 'apple'", { !$0.items.contains { $0.label == "apple" } }),
            ("ANY items.label BEGINSWITH[cd] 'e'", { $0.items.contains { folded($0.label, [.caseInsensitive, .diacriticInsensitive])?.hasPrefix("e") ?? false } }),
            ("items.@count > 40", { $0.items.count > 40 }),
            ("items.@count == %@", { _ in false }),
        ]
        for (format, test) in cases {
            request.fetchPredicate = try FetchPredicate(format: format, arguments: format.contains("%@") ? [.int64(-1)] : [])
            #expect(try fixture.context.fetch(request).map(\.title).sorted() == expected(test), "\(format)")
        }
    }

    @Test func plansUseIndexesForEqualityInAndRanges() throws {
        let fixture = try FetchFixture(seed: 3, count: 20)
        func access(_ format: String) throws -> QueryPlan.Access {
            try fixture.context.explain(FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: format))).access
        }
        #expect(try access("rank == 3") == .index(attribute: "rank", condition: .equal([.int64(3)])))
        #expect(try access("label IN {'a', 'b'}") == .index(attribute: "label", condition: .equal([.string("a"), .string("b")])))
        #expect(try access("rank >= 3 AND flag == YES") == .index(attribute: "rank", condition: .range(lower: .int64(3), lowerInclusive: true, upper: nil, upperInclusive: false)))
        #expect(try access("flag == YES AND label == 'x'") == .index(attribute: "label", condition: .equal([.string("x")])))
        // Both bounds on one attribute narrow one range; the tighter bound wins.
        #expect(try access("rank >= 3 AND rank < 9 AND rank > 1 AND rank <= 9") == .index(attribute: "rank",
            condition: .range(lower: .int64(3), lowerInclusive: true, upper: .int64(9), upperInclusive: false)))
        #expect(try access("rank > 3 AND label IN {'a'}") == .index(attribute: "label", condition: .equal([.string("a")])))
        #expect(try access("rankPlain == 3") == .fullScan)
        #expect(try access("label ==[c] 'x'") == .fullScan, "folded comparisons cannot use the index")
        #expect(try access("rank == 3 OR flag == YES") == .fullScan)
        #expect(try fixture.context.explain(FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: "rank == 3"))).description.hasPrefix("INDEX Item.rank"))
    }

    @Test func parseErrorsNameTheColumn() {
        let bad: [(String, String)] = [
            ("rank ==", "column 8"),
            ("rank >> 3", "column 7"),
            ("(rank == 3", "expected ')'"),
            ("rank == 'open", "unterminated string"),
            ("rank BETWEEN 3", "BETWEEN needs a list"),
            ("label ==[x] 'a'", "unknown comparison option"),
            ("rank == %@", "argument 1"),
            ("rank == 3 rank", "expected AND, OR or the end"),
        ]
        for (format, fragment) in bad {
            #expect(throws: CairnError.self, "\(format)") { try FetchPredicate(format: format) }
            do { _ = try FetchPredicate(format: format) } catch let error as CairnError {
                #expect(error.message.contains(fragment), "\(format): \(error.message)")
            } catch {}
        }
        #expect { try FetchPredicate(format: "a == 1", .int64(2)) } throws: { ($0 as? CairnError)?.message.contains("uses 0 arguments") == true }
    }

    @Test func unknownKeysAreClearErrors() throws {
        let fixture = try FetchFixture(seed: 1, count: 3)
        #expect {
            try fixture.context.fetch(FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: "nmae == 'x'")))
        } throws: { ($0 as? CairnError)?.message.contains("Item has no key 'nmae'") == true }
    }
}

@Suite struct FetchRequestTests {
    @Test func sortLimitOffsetAndLocalizedOrder() throws {
        let fixture = try FetchFixture(seed: 21, count: 60)
        var request = FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("rank", ascending: false), SortKey("score")])
        let sorted = fixture.items.sorted { a, b in a.rank != b.rank ? a.rank > b.rank : (a.score != b.score ? a.score < b.score : a.id < b.id) }
        #expect(try fixture.context.fetchObjectIDs(request) == sorted.map(\.id))
        request.fetchOffset = 10
        request.fetchLimit = 5
        #expect(try fixture.context.fetchObjectIDs(request) == Array(sorted.map(\.id)[10..<15]))
        #expect(try fixture.context.count(for: request) == 5, "a count is of what the fetch would return")
        let labels = FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: "label IN {'apple', 'Apple', 'banana', 'Bänana'}"),
                                  sortKeys: [SortKey("label", localizedCaseInsensitive: true)])
        let names = try fixture.context.fetch(labels).compactMap(\.label)
        #expect(names.count > 3)
        for (a, b) in zip(names, names.dropFirst()) {
            #expect(a.compare(b, options: [.caseInsensitive], range: nil, locale: Locale.current) != .orderedDescending, "\(a) before \(b)")
        }
        // Through a to-one relationship, nils first.
        let byGroup = try fixture.context.fetch(FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("group.title")]))
        let titles = byGroup.map { $0.group?.title ?? "" }
        #expect(titles == titles.sorted())
    }

    /// A sorted fetch with a window (which keeps only the first rows as it reads, decoding
    /// only those) returns the window of the whole sorted fetch: for sorts by an integer,
    /// a string, a real and two keys, each way; for predicates an index answers, a scan
    /// tests in place, and one tested on decoded values; over a snapshot and the log, with
    /// unsaved changes (values changed, objects inserted and deleted), and in a child.
    @Test(arguments: Seeds.list([31, 32]))
    func aSortedWindowIsTheWindowOfTheWholeSort(seed: UInt64) throws {
        let fixture = try FetchFixture(seed: seed, count: 300)
        let context = fixture.context
        try fixture.stack.coordinator.store.compact()
        var random = SplitMix64(seed: seed)
        let items = try context.fetch(FetchQuery(Item.self))
        for item in items.prefix(60) { item.rank = Int(random.next() % 40) - 10 }  // saved: in the log
        try context.save()
        for item in items.dropFirst(60).prefix(40) { item.rank = Int(random.next() % 40) - 10; item.score = -1 }
        for item in items.suffix(30) { context.delete(item) }
        for n in 0..<25 {
            let item = Item(context: context)
            item.rank = Int(random.next() % 40) - 10
            item.rankPlain = item.rank
            item.label = n % 3 == 0 ? nil : "n\(n % 7)"
            item.score = Double(n)
        }
        let child = Context(parent: context)
        let sorts: [[SortKey]] = [
            [SortKey("rank", ascending: false)], [SortKey("rankPlain")], [SortKey("label")],
            [SortKey("score", ascending: false)], [SortKey("rank"), SortKey("label", ascending: false)],
        ]
        let predicates: [FetchPredicate?] = [nil, try FetchPredicate(format: "rank > 0"), try FetchPredicate(format: "rankPlain < 5"),
                                             try FetchPredicate(format: "group.title != 'red'")]
        for place in [context, child] {
            for descriptors in sorts {
                for predicate in predicates {
                    let whole = try place.fetchObjectIDs(FetchQuery(Item.self, fetchPredicate: predicate, sortKeys: descriptors))
                    #expect(whole.count > 20)
                    for (offset, limit) in [(0, 1), (0, 10), (3, 7), (50, 20), (0, 0), (whole.count - 2, 5), (whole.count + 1, 3), (0, whole.count)] {
                        var request = FetchQuery(Item.self, fetchPredicate: predicate, sortKeys: descriptors)
                        request.fetchOffset = offset
                        request.fetchLimit = limit
                        let start = min(offset, whole.count), end = min(whole.count, offset + limit)
                        #expect(try place.fetchObjectIDs(request) == Array(whole[start..<end]),
                                "\(descriptors.map(\.keyPath)), \(String(describing: predicate)), \(offset)+\(limit)")
                        let objects = try place.fetch(request)
                        #expect(objects.map(\.objectID) == Array(whole[start..<end]))
                    }
                }
            }
        }
    }

    final class Reading: ManagedObject {
        @Attribute(indexed: true) var value: Double? = nil
        @Attribute(indexed: true) var when: Date? = nil
        @Attribute(indexed: true) var amount: Decimal? = nil
        @Attribute var serial: Int = 0
    }

    /// A sorted window by an indexed real, date or decimal (read in the index's order,
    /// which from format version 4 is the sort's, NaN last) is the window of the whole
    /// sorted fetch, each way: values with nils, NaNs, both zeros, infinities and many
    /// ties, over a snapshot and the log, with unsaved changes, with and without a
    /// predicate.
    @Test func aSortedWindowByAnIndexedRealOrDateIsTheWindowOfTheWholeSort() throws {
        let stack = try Stack(model: try Model(Reading.self))
        let context = stack.context()
        let reals: [Double?] = [nil, .nan, 0, -0.0, 1, 1, 1, 2.5, -3, .infinity, -.infinity, 1e300, 7]
        var random = SplitMix64(seed: 41)
        func fill(_ reading: Reading) {
            reading.value = reals[Int(random.next() % UInt64(reals.count))]
            reading.when = reals[Int(random.next() % UInt64(reals.count))].map { Date(timeIntervalSinceReferenceDate: $0) }
            reading.amount = reals[Int(random.next() % UInt64(reals.count))].flatMap { $0.isNaN ? Decimal.nan : $0.isFinite && abs($0) < 1e100 ? Decimal($0) : nil }
        }
        var readings: [Reading] = []
        for serial in 0..<400 {
            let reading = Reading(context: context)
            reading.serial = serial
            fill(reading)
            readings.append(reading)
        }
        try context.save()
        try stack.coordinator.store.compact()
        for reading in readings.prefix(80) { fill(reading) }  // saved: in the log
        try context.save()
        for reading in readings.dropFirst(80).prefix(30) { fill(reading) }  // unsaved
        for reading in readings.suffix(20) { context.delete(reading) }
        for serial in 400..<420 {
            let reading = Reading(context: context)
            reading.serial = serial
            fill(reading)
        }
        for key in ["value", "when", "amount"] {
            for ascending in [true, false] {
                for predicate in [nil, try FetchPredicate(format: "serial >= 100")] {
                    let descriptors = [SortKey(key, ascending: ascending)]
                    let whole = try context.fetchObjectIDs(FetchQuery(Reading.self, fetchPredicate: predicate, sortKeys: descriptors))
                    #expect(whole.count >= 300)
                    for (offset, limit) in [(0, 1), (0, 10), (3, 7), (30, 40), (100, 20), (whole.count - 2, 5), (0, whole.count)] {
                        var request = FetchQuery(Reading.self, fetchPredicate: predicate, sortKeys: descriptors)
                        request.fetchOffset = offset
                        request.fetchLimit = limit
                        let start = min(offset, whole.count), end = min(whole.count, offset + limit)
                        #expect(try context.fetchObjectIDs(request) == Array(whole[start..<end]),
                                "\(key) \(ascending ? "ascending" : "descending"), \(String(describing: predicate)), \(offset)+\(limit)")
                    }
                }
            }
        }
    }

    final class Big: ManagedObject {
        @Attribute(indexed: true) var n: Int64 = 0
        @Attribute var plain: Int64 = 0
    }

    /// Two bounds on one indexed attribute that compare the same as reals but are not the
    /// same value (2^53 as a real and as an integer) narrow the index's range no more than
    /// the looser of them allows: the lookup finds what a scan of an unindexed copy finds
    /// (the stricter flag had left out 2^53 + 1, which is 2^53 as a real).
    @Test func boundsEqualAsRealsButUnlikeLoseNoMatch() throws {
        let stack = try Stack(model: try Model(Big.self))
        let context = stack.context()
        let base: Int64 = 1 << 53
        for offset: Int64 in [-1, 0, 1, 2, 3] {
            let big = Big(context: context)
            big.n = base + offset
            big.plain = base + offset
        }
        try context.save()
        let bounds: [(String, [Value])] = [
            ("%K >= %@ AND %K > %@", [.double(Double(base)), .int64(base)]),
            ("%K > %@ AND %K >= %@", [.int64(base), .double(Double(base))]),
            ("%K <= %@ AND %K < %@", [.double(Double(base)), .int64(base + 2)]),
            ("%K < %@ AND %K <= %@", [.int64(base + 1), .double(Double(base))]),
        ]
        for (format, values) in bounds {
            func ids(_ key: String) throws -> [Int64] {
                let predicate = try FetchPredicate(format: format, arguments: [.string(key), values[0], .string(key), values[1]])
                return try context.fetch(FetchQuery(Big.self, fetchPredicate: predicate)).map(\.plain).sorted()
            }
            let scanned = try ids("plain")
            #expect(try ids("n") == scanned, "\(format) \(values)")
            #expect(!scanned.isEmpty)
        }
        // Bounds that compare exactly (one kind, or integers of two widths) keep the
        // stricter flag: the index reads no row the predicate then drops.
        for (format, first, second) in [("n >= %@ AND n > %@", Value.int64(5), Value.int32(5)), ("n > %@ AND n >= %@", .int64(base), .int64(base))] {
            let plan = try context.explain(try FetchQuery(Big.self, format: format, first, second))
            guard case .index(_, .range(let lower, let inclusive, _, _)) = plan.access else {
                Issue.record("\(format): \(plan)")
                continue
            }
            #expect(lower?.integer == first.integer && !inclusive, "\(format): \(plan)")
        }
    }

    /// A fetch reads each related record once (``Context/memoizedViewValues()``), as this
    /// context sees it: unsaved renames, a new group and a deleted one count, in the
    /// context and in a child of it, for a sort and a predicate through `group.title`.
    @Test func relatedRecordsAreReadAsTheContextSeesThem() throws {
        let fixture = try FetchFixture(seed: 17, count: 200)
        let context = fixture.context
        try context.save()
        let groups = try context.fetch(FetchQuery(Group.self, fetchPredicate: nil, sortKeys: [SortKey("title")]))
        groups[0].title = "zz"                                  // blue, renamed, now last
        let extra = Group(context: context)
        extra.title = "aa"
        let items = try context.fetch(FetchQuery(Item.self))
        for item in items.prefix(20) { item.group = extra }
        context.delete(groups[1])                               // green: its items lose their group
        for reader in [context, Context(parent: context)] {
            let all = try reader.fetch(FetchQuery(Item.self))
            let expected = all.sorted { ($0.group?.title ?? "", $0.objectID.recordID) < ($1.group?.title ?? "", $1.objectID.recordID) }
            let sorted = try reader.fetch(FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("group.title")]))
            #expect(sorted.map(\.objectID) == expected.map(\.objectID))
            for title in ["zz", "aa", "green", "red"] {
                let matching = try reader.fetch(try FetchQuery(Item.self, format: "group.title == %@", String(title)))
                #expect(Set(matching.map(\.objectID)) == Set(all.filter { $0.group?.title == title }.map(\.objectID)), "\(title)")
            }
        }
    }

    /// Without a sort, a fetch stops reading the store once it holds offset + limit
    /// matches: the window must still be the first matches in ID order, pending changes
    /// (matches lost, gained, deleted, inserted) included, on both plans.
    @Test func anUnsortedWindowIsTheFirstMatchesInIDOrder() throws {
        let fixture = try FetchFixture(seed: 31, count: 120)
        let context = fixture.context
        var ranks = Dictionary(uniqueKeysWithValues: fixture.items.map { ($0.id, $0.rank) })
        let objects = try context.fetch(FetchQuery(Item.self))
        for (n, object) in objects.enumerated() where n % 7 == 0 {
            object.rank = object.rank >= 5 ? 0 : 10
            object.rankPlain = object.rank
            ranks[object.objectID] = object.rank
        }
        for object in [objects[3], objects[4]] {
            context.delete(object)
            ranks[object.objectID] = nil
        }
        let fresh = Item(context: context)
        fresh.rank = 20
        fresh.rankPlain = 20
        ranks[fresh.objectID] = 20
        let matching = ranks.filter { $0.value >= 5 }.keys.sorted()
        #expect(matching.count > 30)
        let windows = [(0, 0), (0, 1), (0, 3), (1, 1), (2, 5), (10, 10), (0, 1000), (matching.count - 1, 5), (matching.count + 3, 2)]
        for attribute in ["rank", "rankPlain"] {
            for (offset, limit) in windows {
                var request = try FetchQuery(Item.self, format: "\(attribute) >= 5")
                request.fetchOffset = offset
                request.fetchLimit = limit
                let expected = Array(matching.dropFirst(offset).prefix(limit))
                #expect(try context.fetchObjectIDs(request) == expected, "\(attribute), offset \(offset), limit \(limit)")
                #expect(try context.fetch(request).map(\.objectID) == expected, "\(attribute), offset \(offset), limit \(limit)")
                #expect(try context.count(for: request) == expected.count)
            }
        }
    }

    @Test func pendingChangesAreIncludedUnlessTurnedOff() throws {
        let fixture = try FetchFixture(seed: 8, count: 30)
        let context = fixture.context
        let tens = fixture.items.filter { $0.rank == 10 }.map(\.id)
        let fresh = Item(context: context)
        fresh.rank = 10
        let changed = try #require(try context.fetch(FetchQuery(Item.self, format: "rank != 10")).first)
        changed.rank = 10
        let gone = try context.fetch(FetchQuery(Item.self, format: "rank == 10")).first
        if let gone { context.delete(gone) }
        var request = try FetchQuery(Item.self, format: "rank == 10")
        var expected = Set(tens + [fresh.objectID, changed.objectID])
        if let gone { expected.remove(gone.objectID) }
        #expect(Set(try context.fetchObjectIDs(request)) == expected)
        request.includesPendingChanges = false
        #expect(Set(try context.fetchObjectIDs(request)) == Set(tens))
    }

    @Test func aggregates() throws {
        let fixture = try FetchFixture(seed: 9, count: 50)
        let all = FetchQuery(Item.self)
        #expect(try fixture.context.aggregate(.count, for: all) == .int64(50))
        #expect(try fixture.context.aggregate(.sum("rank"), for: all) == .int64(Int64(fixture.items.map(\.rank).reduce(0, +))))
        #expect(try fixture.context.aggregate(.min("rank"), for: all) == .int64(Int64(fixture.items.map(\.rank).min()!)))
        #expect(try fixture.context.aggregate(.max("score"), for: all) == .double(fixture.items.map(\.score).max()!))
        let positive = try FetchQuery(Item.self, format: "rank > 0")
        let ranks = fixture.items.filter { $0.rank > 0 }.map { Double($0.rank) }
        #expect(try fixture.context.aggregate(.average("rank"), for: positive) == .double(ranks.reduce(0, +) / Double(ranks.count)))
        #expect(throws: CairnError.self) { try fixture.context.aggregate(.sum("label"), for: all) }
        // Unsaved changes count: a changed rank, a new item, a deleted one; and a key path
        // through a relationship.
        let items = try fixture.context.fetch(Item.self)
        items[0].rank += 1000
        let made = Item(context: fixture.context)
        made.rank = 7
        fixture.context.delete(items[1])
        let expectedSum = fixture.items.map(\.rank).reduce(0, +) + 1000 + 7 - items[1].rank
        #expect(try fixture.context.aggregate(.sum("rank"), for: all) == .int64(Int64(expectedSum)))
        #expect(try fixture.context.aggregate(.max("rank"), for: all) == .int64(Int64(items[0].rank)))
        let titles = try fixture.context.fetch(Item.self).compactMap { $0.group?.title }
        #expect(try fixture.context.aggregate(.min("group.title"), for: all) == (titles.min().map { .string($0) } ?? .null))
        // Sums and averages of reals that are infinite or NaN (which `Decimal(_:)`, kept
        // alongside in case a decimal comes, trapped on).
        items[2].score = .infinity
        #expect(try fixture.context.aggregate(.sum("score"), for: all) == .double(.infinity))
        items[3].score = .nan
        guard case .double(let sum) = try fixture.context.aggregate(.sum("score"), for: all),
              case .double(let average) = try fixture.context.aggregate(.average("score"), for: all) else {
            Issue.record("not a double")
            return
        }
        #expect(sum.isNaN && average.isNaN)
        // The least and the greatest leave a NaN out, as they leave nil out.
        let scores = try fixture.context.fetch(Item.self).map(\.score).filter { !$0.isNaN }
        #expect(try fixture.context.aggregate(.min("score"), for: all) == .double(scores.min()!))
        #expect(try fixture.context.aggregate(.max("score"), for: all) == .double(.infinity))
        for item in try fixture.context.fetch(Item.self) { item.score = .nan }
        #expect(try fixture.context.aggregate(.min("score"), for: all) == .null)
    }

    /// A count of a class's objects (the store's count with this context's inserts and
    /// deletes) is the number a fetch finds, through inserts, deletes, saves, rollbacks
    /// and another context's saved deletes.
    @Test func aCountOfAClassIsWhatAFetchFinds() throws {
        let fixture = try FetchFixture(seed: 12, count: 30)
        let context = fixture.context, other = fixture.stack.context()
        var random = SplitMix64(seed: 12)
        for step in 0..<200 {
            switch random.next() % 6 {
            case 0, 1: _ = Item(context: context)
            case 2:
                let items = try context.fetch(Item.self)
                if !items.isEmpty { context.delete(items[Int(random.next() % UInt64(items.count))]) }
            case 3:
                // (A delete both contexts made conflicts: the unsaved one is rolled back.)
                do { try context.save() } catch let error as CairnError where error.code == .conflict { context.rollback() }
            case 4:
                let theirs = try other.fetch(Item.self).filter { $0.group == nil }  // (no inverse to keep in step here)
                if !theirs.isEmpty { other.delete(theirs[Int(random.next() % UInt64(theirs.count))]) }
                try other.save()
            default: if random.next() % 3 == 0 { context.rollback() }
            }
            #expect(try context.count(Item.self) == context.fetch(Item.self).count, "step \(step)")
        }
    }

    @Test func batchesFaultTogether() throws {
        let fixture = try FetchFixture(seed: 4, count: 25)
        let reader = fixture.stack.context()
        var request = FetchQuery(Item.self)
        request.fetchBatchSize = 10
        let items = try reader.fetch(request)
        #expect(items.allSatisfy { $0.isFault })
        _ = items[12].rank
        #expect(items[10..<20].allSatisfy { !$0.isFault } && items[0..<10].allSatisfy { $0.isFault } && items[20].isFault)
    }

    /// A fetch of records whose objects are registered hands back those objects: loaded
    /// ones as they are here (unsaved changes included), faults still faults; a request
    /// whose type the entity's class is not (or a superclass of it) gets none of them.
    @Test func refetchingHandsBackTheRegisteredObjects() throws {
        let fixture = try FetchFixture(seed: 8, count: 40)
        let reader = fixture.stack.context()
        let all = try reader.fetch(FetchQuery(Item.self))
        #expect(all.count == 40 && all.allSatisfy { $0.isFault })
        for item in all[0..<20] { _ = item.rank }
        all[3].score = 12_345
        let byID = Dictionary(uniqueKeysWithValues: all.map { ($0.objectID, $0) })
        var loaded = 20
        for request in [FetchQuery(Item.self), try FetchQuery(Item.self, format: "rankPlain >= %@", Int64(-100))] {
            let again = try reader.fetch(request)
            #expect(again.count == 40)
            #expect(again.allSatisfy { byID[$0.objectID] === $0 })
            #expect(again[0..<loaded].allSatisfy { !$0.isFault } && again[loaded...].allSatisfy { $0.isFault })
            #expect(again[3].score == 12_345)
            #expect(again.map(\.rank) == fixture.items.map(\.rank))  // loads the rest
            loaded = 40
        }
        let dynamic = try reader.fetch(FetchQuery<ManagedObject>(entityName: "Item"))
        #expect(dynamic.count == 40 && dynamic.allSatisfy { byID[$0.objectID] === $0 })
        #expect(try reader.fetch(FetchQuery<Group>(entityName: "Item")).isEmpty)
    }

    /// A fetch whose predicate is tested on the stored bodies makes its objects in one
    /// pass, as the scan hands the matches over. It hands back what gathering the matches
    /// first does (forced here by a window that keeps them all): the same objects in the
    /// same order, registered ones whether loaded or faults, with their values; none of
    /// another class.
    @Test func aOnePassFetchAgreesWithGatheringTheMatchesFirst() throws {
        let fixture = try FetchFixture(seed: 9, count: 60)
        let context = fixture.stack.context()
        // Some objects registered and loaded, some registered faults, the rest unregistered.
        let registered = try context.fetch(FetchQuery(Item.self, format: "rankPlain < 5"))
        #expect(!registered.isEmpty)
        for item in registered.prefix(registered.count / 2) { _ = item.rank }
        let cases: [(String, (ItemData) -> Bool)] = [
            ("rankPlain >= 0", { $0.rank >= 0 }),
            ("labelPlain != nil", { $0.label != nil }),
            ("score > 0 OR flag == YES", { $0.score > 0 || $0.flag }),
            ("rankPlain < 1000", { _ in true }),
        ]
        for (format, test) in cases {
            let onePass = try context.fetch(FetchQuery(Item.self, format: format))
            var gathering = try FetchQuery(Item.self, format: format)
            gathering.fetchLimit = .max
            let gathered = try context.fetch(gathering)
            #expect(onePass.map(\.objectID) == fixture.expected(test), "\(format)")
            #expect(onePass.count == gathered.count && zip(onePass, gathered).allSatisfy { $0 === $1 }, "\(format)")
            let byID = Dictionary(uniqueKeysWithValues: fixture.items.map { ($0.id, $0) })
            #expect(onePass.allSatisfy { byID[$0.objectID]?.rank == $0.rank && byID[$0.objectID]?.label == $0.labelPlain }, "\(format)")
        }
        let predicate = try FetchPredicate(format: "rankPlain >= 0")
        let typed = try context.fetch(FetchQuery(Item.self, format: "rankPlain >= 0"))
        let dynamic = try context.fetch(FetchQuery<ManagedObject>(entityName: "Item", fetchPredicate: predicate))
        #expect(dynamic.count == typed.count && zip(dynamic, typed).allSatisfy { $0 === $1 })
        #expect(try context.fetch(FetchQuery<Group>(entityName: "Item", fetchPredicate: predicate)).isEmpty)
        // An unknown key is an error on this path too.
        #expect(throws: CairnError.self) { try context.fetch(FetchQuery(Item.self, format: "nothing == 1")) }
    }

    @Test func dynamicRequests() throws {
        let fixture = try FetchFixture(seed: 6, count: 20)
        let request = FetchQuery<ManagedObject>(entityName: "Item", fetchPredicate: try FetchPredicate(format: "rank > 0"),
                                                  sortKeys: [SortKey("rank")])
        let objects = try fixture.context.fetch(request)
        #expect(objects.map { $0["rank"] } == fixture.items.filter { $0.rank > 0 }.sorted { ($0.rank, $0.id) < ($1.rank, $1.id) }.map { .int64(Int64($0.rank)) })
    }
}

@Suite struct MemberSetTests {
    /// An IN list's hashed test answers as comparing with every item, for values and items
    /// of every kind (integers of each width and booleans, integral and other reals,
    /// decimals, strings differing by case and accents, references, UUIDs, dates, nil)
    /// under each option set.
    @Test func anInListsSetAnswersAsComparingWithEachItem() throws {
        var random = SplitMix64(seed: 99)
        let uuids = (0..<3).map { _ in UUID() }
        let pool: [Value] = [.null, .bool(true), .bool(false), .int8(1), .int16(-2), .int32(3), .int64(0), .int64(1 << 40),
                             .double(1), .double(3.0), .double(2.5), .double(.nan), .float(-2), .decimal(Decimal(3)), .decimal(Decimal(string: "2.5")!),
                             .string("apple"), .string("Apple"), .string("äpple"), .string("ÄPPLE"), .string(""), .string("e\u{301}"), .string("é"),
                             .reference(5), .reference(6), .uuid(uuids[0]), .uuid(uuids[1]), .uuid(uuids[2]),
                             .date(Date(timeIntervalSince1970: 0)), .date(Date(timeIntervalSince1970: 1))]
        for options in [[], [.caseInsensitive], [.diacriticInsensitive], [.caseInsensitive, .diacriticInsensitive]] as [ComparisonOptions] {
            for _ in 0..<60 {
                let items = (0..<(8 + Int(random.next() % 12))).map { _ in pool[Int(random.next() % UInt64(pool.count))] }
                let prepared = try #require(CompiledPredicate.MemberSet(items, options: options))
                for value in pool {
                    #expect(prepared.contains(value) == items.contains { ValueOrder.equal(value, $0, options) }, "\(value) in \(items) \(options)")
                }
            }
        }
        #expect(CompiledPredicate.MemberSet([.int64(1)], options: []) == nil)
    }
}

@Suite struct TypedPredicateTests {
    @Test func foundationPredicatesMatchStringPredicatesAndUseIndexes() throws {
        let fixture = try FetchFixture(seed: 17, count: 80)
        let context = fixture.context
        let pairs: [(Foundation.Predicate<Item>, String)] = [
            (#Predicate { $0.rank == 5 }, "rank == 5"),
            (#Predicate { $0.rank > 3 && $0.score < 10 }, "rank > 3 AND score < 10"),
            (#Predicate { $0.rank <= 0 || !$0.flag }, "rank <= 0 OR flag == NO"),
            (#Predicate { $0.flag }, "flag == YES"),
            (#Predicate { $0.label == nil }, "label == nil"),
            (#Predicate { $0.label != "apple" }, "label != 'apple'"),
            (#Predicate { [1, 2, 3].contains($0.rank) }, "rank IN {1, 2, 3}"),
            (#Predicate { $0.labelPlain?.starts(with: "a") == true }, "labelPlain BEGINSWITH 'a'"),
            (#Predicate { $0.group?.title == "red" }, "group.title == 'red'"),
        ]
        for (typed, format) in pairs {
            let request = FetchQuery(Item.self, predicate: typed)
            if !format.contains("BEGINSWITH") {
                #expect(request.predicate != nil, "\(format) runs on stored records")
            } else {
                #expect(request.storedPredicate == nil, "\(format) falls back to evaluating objects")
            }
            let expected = try context.fetchObjectIDs(FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: format)))
            #expect(try context.fetchObjectIDs(request) == expected, "\(format)")
        }
        let converted = FetchQuery(Item.self, predicate: #Predicate { $0.rank == 5 })
        #expect(converted.storedPredicate == (try FetchPredicate(format: "rank == 5")))
        #expect(try context.explain(converted).access == .index(attribute: "rank", condition: .equal([.int64(5)])))
        let nested = FetchQuery(Item.self, predicate: #Predicate { $0.group?.title == "red" })
        #expect(nested.storedPredicate != nil, "to-one key paths convert")
    }

    /// Objects fetched in a context that is then released (a function fetching in a
    /// context of its own and returning the objects) read the values the fetch read, not
    /// the defaults.
    @Test func objectsOutlivingTheirContextReadWhatWasFetched() throws {
        let fixture = try FetchFixture(seed: 13, count: 25)
        func fetchAlone() throws -> [Item] {
            try fixture.stack.context().fetch(FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("rankPlain")]))
        }
        let items = try fetchAlone()
        #expect(items.allSatisfy { $0.context == nil }, "the context is gone")
        let expected = fixture.items.sorted { ($0.rank, $0.id) < ($1.rank, $1.id) }
        #expect(items.map(\.rank).sorted() == expected.map(\.rank))
        #expect(Set(items.map(\.score)) == Set(fixture.items.map(\.score)))
        #expect(items.map(\.label).filter { $0 != nil }.count == fixture.items.filter { $0.label != nil }.count)
    }
}
