import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Live results of one entity take in a change by placing again the records it touched,
/// without a fetch (``LiveResults/updated(_:snapshot:touched:request:sectionKeyPath:context:)``).
@Suite struct ResultsUpdateTests {
    /// Results as a fresh fetch gives them: section names and IDs.
    static func fresh<T>(_ results: LiveResults<T>, in context: Context) throws -> [(String, [ObjectID])] {
        let fetched = try LiveResults(request: results.request, context: context, sectionKeyPath: results.sectionKeyPath)
        return fetched.sections.map { ($0.name, $0.objects.map(\.objectID)) }
    }

    /// Expects `results` to hold what a fresh fetch gives: section names and rows.
    static func expectFresh<T>(_ results: LiveResults<T>, in context: Context, _ comment: Comment? = nil,
                               sourceLocation: SourceLocation = #_sourceLocation) throws {
        let fresh = try Self.fresh(results, in: context)
        #expect(results.sections.map(\.name) == fresh.map(\.0), comment, sourceLocation: sourceLocation)
        #expect(results.sections.map { $0.objects.map(\.objectID) } == fresh.map(\.1), comment, sourceLocation: sourceLocation)
    }

    /// Random steps of every kind of change, here, in a child, in another context and by a
    /// batch, to items and to their groups; after each, eight live results (a predicate
    /// and a sort; sections of an own attribute with a folded sort and nulls; ID order; a
    /// child's; the first 15 by a descending sort; sections of at most 400; sections by
    /// the group's title; a predicate and a sort through the group) equal a fresh fetch,
    /// their delivered change turns the rows before into the rows after, and most
    /// refreshes were updates, not fetches.
    @Test(arguments: Seeds.list([51, 52, 53]))
    func updatesEqualAFreshFetch(seed: UInt64) throws {
        let fixture = try FetchFixture(seed: seed, count: 200)
        let context = fixture.context
        context.mergePolicy = .objectTrumps
        let child = Context(parent: context)
        let other = fixture.stack.context()
        let ranked = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: "rank >= 0"),
                                                              sortKeys: [SortKey("score")]), context: context)
        let sectioned = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [
            SortKey("label", localizedCaseInsensitive: true), SortKey("when", ascending: false),
        ]), context: context, sectionKeyPath: "flag")
        let plain = try LiveResults(request: FetchQuery(Item.self), context: context)
        let inChild = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: "rank < 5"),
                                                               sortKeys: [SortKey("rank", ascending: false)]),
                                         context: child)
        var topRequest = FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: "rank >= 0"),
                                      sortKeys: [SortKey("score", ascending: false)])
        topRequest.fetchLimit = 15
        let top = try LiveResults(request: topRequest, context: context)
        var roomyRequest = FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("rank")])
        roomyRequest.fetchLimit = 400
        let roomy = try LiveResults(request: roomyRequest, context: context, sectionKeyPath: "flag")
        let byGroup = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("score")]),
                                         context: context, sectionKeyPath: "group.title")
        let throughGroup = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: "group.title != 'red'"),
                                                                    sortKeys: [SortKey("group.title", ascending: false),
                                                                                      SortKey("rank")]),
                                              context: context)
        var delivered: [ObjectIdentifier: [ResultsChange]] = [:]
        func watch<T>(_ results: LiveResults<T>) { results.onChange = { delivered[ObjectIdentifier(results), default: []].append($0) } }
        watch(ranked); watch(sectioned); watch(plain); watch(inChild); watch(top); watch(roomy); watch(byGroup); watch(throughGroup)
        var random = SplitMix64(seed: seed)
        for step in 0..<120 {
            func rows<T>(_ results: LiveResults<T>) -> [(String, [ObjectID])] { results.sections.map { ($0.name, $0.objects.map(\.objectID)) } }
            let before = [rows(ranked), rows(sectioned), rows(plain), rows(inChild), rows(top), rows(roomy), rows(byGroup),
                          rows(throughGroup)]
            func shown<T>(_ results: LiveResults<T>) -> [ObjectID: String] {
                Dictionary(results.objects.map { object in
                    let item = object as! Item
                    return (item.objectID, "\(item.rank) \(item.score) \(String(describing: item.label)) \(item.flag) \(String(describing: item.when))")
                }, uniquingKeysWith: { a, _ in a })
            }
            let shownBefore = [shown(ranked), shown(sectioned), shown(plain), shown(inChild), shown(top), shown(roomy), shown(byGroup),
                               shown(throughGroup)]
            let items = try context.fetch(FetchQuery(Item.self))
            let item = items[Int(random.next() % UInt64(items.count))]
            let groups = try context.fetch(FetchQuery(Group.self))
            let kind = random.next() % 18
            switch kind {
            case 0:
                let new = Item(context: context)
                new.rank = Int(random.next() % 20) - 5
                new.score = Double(random.next() % 100)
                new.label = FetchFixture.labels[Int(random.next() % UInt64(FetchFixture.labels.count))]
            case 1: context.delete(item)
            case 2: item.score = Double(random.next() % 100) - 50
            case 3: item.rank = Int(random.next() % 20) - 10
            case 4: item.label = FetchFixture.labels[Int(random.next() % UInt64(FetchFixture.labels.count))]
            case 5: item.flag.toggle()
            case 6: context.undo()
            case 7:
                let score = item.score                                   // set and set back
                item.score = score + 1
                item.score = score
            case 8: if random.next() % 4 == 0 { context.rollback() } else { item.when = nil }
            case 9:
                let theirs = try other.fetch(FetchQuery(Item.self))
                for _ in 0..<3 { theirs[Int(random.next() % UInt64(theirs.count))].score = Double(random.next() % 100) }
                other.delete(theirs[Int(random.next() % UInt64(theirs.count))])
                Item(context: other).rank = Int(random.next() % 10)
                try other.save()
                context.processExternalChanges()
            case 10:
                let cut = Double(random.next() % 100) - 50
                _ = try context.batchUpdate(FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: "score < %@", arguments: [.double(cut)]))) {
                    $0.rank += 1
                }
            case 11:
                let mine = try child.fetch(FetchQuery(Item.self))
                mine[Int(random.next() % UInt64(mine.count))].rank = Int(random.next() % 20) - 10
                if random.next() % 2 == 0 { try child.save() } else { child.processPendingChanges() }
            case 12: if random.next() % 5 == 0 { context.reset() } else { context.redo() }
            case 14:                                                     // a group renamed: its items move
                let titles = ["red", "green", "blue", "amber", "Red", ""]
                groups.randomElement(using: &random)?.title = titles[Int(random.next() % UInt64(titles.count))]
            case 15:                                                     // an item to another group, or none
                item.group = random.next() % 4 == 0 ? nil : groups.randomElement(using: &random)
            case 16:                                                     // a group added or deleted; in another context
                if random.next() % 3 == 0, let group = groups.randomElement(using: &random) {
                    context.delete(group)
                } else if random.next() % 2 == 0 {
                    let group = Group(context: context)
                    group.title = "new \(step)"
                    group.items = Array(items.prefix(Int(random.next() % 4)))
                } else {
                    let theirs = try other.fetch(FetchQuery(Group.self))
                    if let group = theirs.randomElement(using: &random) { group.title = "theirs \(step)"; try other.save() }
                    context.processExternalChanges()
                }
            case 17:                                                     // a group renamed in the child
                let mine = try child.fetch(FetchQuery(Group.self))
                mine.randomElement(using: &random)?.title = "child \(step)"
                if random.next() % 2 == 0 { try child.save() } else { child.processPendingChanges() }
            default: try context.save()
            }
            if random.next() % 3 == 0 { try context.save() } else { context.processPendingChanges() }
            child.processPendingChanges()
            for (index, results) in [(0, ranked as AnyObject), (1, sectioned), (2, plain), (3, inChild), (4, top), (5, roomy),
                                     (6, byGroup), (7, throughGroup)] {
                let typed = results as! LiveResults<Item>
                let owner = index == 3 ? child : context
                let after = rows(typed)
                let expected = try Self.fresh(typed, in: owner)
                #expect(after.map(\.0) == expected.map(\.0), "seed \(seed) step \(step) results \(index): section names")
                #expect(after.map(\.1) == expected.map(\.1), "seed \(seed) step \(step) kind \(kind) results \(index): rows")
                let changes = delivered.removeValue(forKey: ObjectIdentifier(typed)) ?? []
                if before[index].map(\.1) != after.map(\.1) {
                    #expect(!changes.isEmpty, "seed \(seed) step \(step) results \(index): no change delivered")
                }
                guard after.map(\.1) == expected.map(\.1) else { continue }  // (reported above)
                // A change turns the rows before it into those after it (with more than one,
                // only the last one's rows after are known).
                if changes.count == 1, let change = changes.first {
                    #expect(apply(change, to: before[index], new: after.map(\.1)) == after.map(\.1),
                            "seed \(seed) step \(step) results \(index): \(change)")
                    // Every result shown with other values than before is reported updated.
                    let now = shown(typed)
                    for (s, section) in typed.sections.enumerated() {
                        for (i, object) in section.objects.enumerated() {
                            guard let was = shownBefore[index][object.objectID], was != now[object.objectID] else { continue }
                            #expect(change.updated.contains(ResultIndex(section: s, item: i)),
                                    "seed \(seed) step \(step) results \(index): \(object.objectID) updated")
                        }
                    }
                }
            }
        }
        #expect(ranked.updateCount > 40 && sectioned.updateCount > 40 && plain.updateCount > 40 && inChild.updateCount > 20,
                "updates: \(ranked.updateCount), \(sectioned.updateCount), \(plain.updateCount), \(inChild.updateCount)")
        #expect(ranked.fetchCount < ranked.updateCount, "fetches \(ranked.fetchCount), updates \(ranked.updateCount)")
        #expect(top.updateCount > 20 && roomy.updateCount > 40, "windows: \(top.updateCount) (\(top.fetchCount) fetches), \(roomy.updateCount)")
        #expect(byGroup.updateCount > 40 && throughGroup.updateCount > 40 && byGroup.fetchCount < byGroup.updateCount / 2,
                "through the group: \(byGroup.updateCount) (\(byGroup.fetchCount) fetches), \(throughGroup.updateCount) (\(throughGroup.fetchCount) fetches)")
    }

    /// An object whose values change but whose place does not is reported updated in place,
    /// found by the update, not by a fetch.
    @Test func aChangeInPlaceIsAnUpdate() throws {
        let fixture = try FetchFixture(seed: 7, count: 50)
        let context = fixture.context
        let results = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("score")]), context: context)
        var delivered: [ResultsChange] = []
        results.onChange = { delivered.append($0) }
        let fetches = results.fetchCount
        let target = results.objects[10]
        target.flag.toggle()
        context.processPendingChanges()
        #expect(delivered == [ResultsChange(updated: [ResultIndex(section: 0, item: 10)])])
        target.score = -1_000
        try context.save()
        #expect(results.objects.first === target)
        #expect(delivered.count == 2 && delivered.last?.moved.map(\.objectID) == [target.objectID])
        #expect(results.fetchCount == fetches && results.updateCount == 2)
    }

    /// An upsert renames the inserted object to the stored record's ID (its values maybe
    /// the stored ones, nothing written): results that placed it under its provisional ID,
    /// or that hold the stored record's own object, equal a fresh fetch after the save,
    /// and their change replays (two rows had named one record).
    @Test(arguments: [MergePolicy.storeTrumps, .objectTrumps])
    func anUpsertIsTakenIn(policy: MergePolicy) throws {
        let stack = try Stack()
        let context = stack.context()
        context.mergePolicy = policy
        let stored = Person(context: context)
        stored.username = "ann"
        stored.age = 5
        try context.save()
        let older = try LiveResults(request: FetchQuery(Person.self, fetchPredicate: try FetchPredicate(format: "age > 10"),
                                                             sortKeys: [SortKey("age")]), context: context)
        let all = try LiveResults(request: FetchQuery(Person.self, fetchPredicate: nil, sortKeys: [SortKey("age")]), context: context)
        var delivered: [ResultsChange] = []
        all.onChange = { delivered.append($0) }
        let twin = Person(context: context)
        twin.username = "ann"
        twin.age = 20
        context.processPendingChanges()
        #expect(older.objects.map(\.objectID) == [twin.objectID] && all.objects.count == 2)
        let before = all.sections.map { ($0.name, $0.objects.map(\.objectID)) }
        delivered.removeAll()
        try context.save()
        #expect(twin.objectID == stored.objectID, "adopted")
        let expectOlder = policy == .objectTrumps ? [twin.objectID] : []
        #expect(older.objects.map(\.objectID) == expectOlder)
        #expect(all.objects.count == 1 && all.objects.first === twin)
        let change = try #require(delivered.last)
        #expect(apply(change, to: before, new: all.sections.map { $0.objects.map(\.objectID) }) == [[twin.objectID]])
    }

    /// A change past the 80th byte of a blob (which `Data`'s hash does not read) of an
    /// object already changed is seen: its row is reported updated.
    @Test func aChangeDeepInABlobIsAnUpdate() throws {
        let stack = try Stack()
        let context = stack.context()
        let boxes = (0..<3).map { index -> Box in
            let box = Box(context: context)
            box.size = Int16(index)
            box.tags = Data(repeating: 7, count: 200)
            return box
        }
        try context.save()
        let results = try LiveResults(request: FetchQuery(Box.self, fetchPredicate: nil, sortKeys: [SortKey("size")]), context: context)
        var delivered: [ResultsChange] = []
        results.onChange = { delivered.append($0) }
        boxes[0].size = -1
        context.processPendingChanges()
        var tags = boxes[0].tags
        tags[150] = 9
        boxes[0].tags = tags
        boxes[2].size = 10
        context.processPendingChanges()
        #expect(delivered.count == 2 && delivered.last?.updated.contains(ResultIndex(section: 0, item: 0)) == true,
                "\(delivered)")
    }

    /// A child's sections are named by the values the fetch sorted by (its parent's), as a
    /// fresh fetch names them, also where the child holds an older value loaded.
    @Test func aChildsSectionsAreNamedAsItsFetchSortsThem() throws {
        let fixture = try FetchFixture(seed: 9, count: 30)
        let context = fixture.context
        let child = Context(parent: context)
        let results = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("score")]),
                                         context: child, sectionKeyPath: "flag")
        let mine = try #require(results.objects.first)
        let flag = mine.flag                                          // loaded in the child
        let inParent = try #require(try context.existingObject(Item.self, with: mine.objectID))
        inParent.flag = !flag
        inParent.score = -1_000
        context.processPendingChanges()
        child.processPendingChanges()
        let fresh = try Self.fresh(results, in: child)
        #expect(results.sections.map(\.name) == fresh.map(\.0))
        #expect(results.sections.map { $0.objects.map(\.objectID) } == fresh.map(\.1))
        #expect(results.sections.first { $0.objects.contains { $0 === mine } }?.name == "\(!flag)")
    }

    /// Results under a limit: the last row changed in place is an update, not a fetch;
    /// when they must fetch again (a row leaves for past the limit) they still report the
    /// other touched rows' updates.
    @Test func aWindowThatFetchesAgainReportsUpdates() throws {
        let fixture = try FetchFixture(seed: 10, count: 10)
        let context = fixture.context
        var request = FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("score")])
        request.fetchLimit = 3
        let results = try LiveResults(request: request, context: context)
        var delivered: [ResultsChange] = []
        results.onChange = { delivered.append($0) }
        let rows = results.objects
        var fetches = results.fetchCount
        rows[2].flag.toggle()
        context.processPendingChanges()
        #expect(results.fetchCount == fetches && delivered == [ResultsChange(updated: [ResultIndex(section: 0, item: 2)])])
        delivered.removeAll()
        fetches = results.fetchCount
        rows[0].flag.toggle()
        rows[2].score = 10_000
        context.processPendingChanges()
        #expect(results.fetchCount == fetches + 1, "fetched again")
        #expect(delivered.count == 1 && delivered.last?.updated.contains(ResultIndex(section: 0, item: 0)) == true, "\(delivered)")
    }

    /// Section keys that sort alike make one section: 0.0 and -0.0.
    @Test func signedZerosShareASection() throws {
        let stack = try Stack(model: try Model(Item.self, Group.self))
        let context = stack.context()
        for (index, score) in [0.0, -0.0, 0.0, 1.0, -0.0].enumerated() {
            let item = Item(context: context)
            item.score = 7  // (-0.0 over the default 0.0 would be no change)
            item.score = score
            item.rank = index
        }
        try context.save()
        let results = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("rank")]),
                                         context: context, sectionKeyPath: "score")
        #expect(results.sections.map(\.name) == ["0.0", "1.0"])
        #expect(results.sections.map(\.objects.count) == [4, 1])
    }

    /// NaN sorts after every other number, all NaNs alike: a sort by a double with NaNs
    /// among the numbers is in order, and they make one section.
    @Test func notANumberSortsLast() throws {
        let stack = try Stack(model: try Model(Item.self, Group.self))
        let context = stack.context()
        let scores: [Double] = [3, .nan, -1, .nan, 2, -.infinity, .infinity, .nan, 0]
        for (index, score) in scores.enumerated() {
            let item = Item(context: context)
            item.score = score
            item.rank = index
        }
        try context.save()
        let sorted = try context.fetch(FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("score")])).map(\.score)
        #expect(sorted.prefix(6) == [-.infinity, -1, 0, 2, 3, .infinity])
        #expect(sorted.suffix(3).allSatisfy { $0.isNaN })
        let descending = try context.fetch(FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("score", ascending: false)]))
            .map(\.score)
        #expect(descending.prefix(3).allSatisfy { $0.isNaN })
        #expect(descending.last == -.infinity)
        let results = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("rank")]),
                                         context: context, sectionKeyPath: "score")
        #expect(results.sections.count == 7 && results.sections.last?.objects.count == 3)
    }

    /// The store names the records its latest transactions changed, and says when it no
    /// longer knows them all.
    @Test func recentChangesForgetTheOldestTransactionsWhole() {
        var recent = RecentChanges()
        func run(_ raws: ClosedRange<UInt64>) -> ArraySlice<RecordID> {
            ArraySlice(raws.map { RecordID(rawValue: $0) })
        }
        recent.note(run(1...3), sequence: 5)
        recent.note(run(4...4), sequence: 6)
        #expect(recent.changed(after: 0) == [1, 2, 3, 4])
        #expect(recent.changed(after: 5) == [4])
        #expect(recent.changed(after: 6) == [])
        // Past the capacity, whole transactions go, oldest first.
        let big = RecentChanges.capacity - 2
        recent.note(run(10...UInt64(9 + big)), sequence: 7)
        #expect(recent.changed(after: 4) == nil, "transaction 5 is gone")
        #expect(recent.changed(after: 5) == [4] + Array(10...UInt64(9 + big)))
        #expect(recent.changed(after: 6)?.count == big)
        recent.note(run(1...UInt64(RecentChanges.capacity + 1)), sequence: 8)
        #expect(recent.changed(after: 7) == nil, "a change larger than the capacity is not kept")
        #expect(recent.changed(after: 8) == [])
    }
}

/// Live results whose key paths follow a relationship.
@Suite struct RelatedResultsUpdateTests {
    @Test func aGroupRenamedInAChildMovesItsItems() throws {
        let fixture = try FetchFixture(seed: 7, count: 60)
        let context = fixture.context
        let child = Context(parent: context)
        let results = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("score")]),
                                         context: context, sectionKeyPath: "group.title")
        let group = try #require(try child.fetch(FetchQuery(Group.self)).first { $0.title == "blue" })
        group.title = "aaa"
        try child.save()
        context.processPendingChanges()
        try ResultsUpdateTests.expectFresh(results, in: context)
        #expect(results.updateCount == 1 && results.fetchCount == 1, "\(results.updateCount) updates, \(results.fetchCount) fetches")
    }

    /// Results sectioned by a group's title take in a rename of the group, and an item
    /// moved to another group, without a fetch; a save of a record they do not read costs
    /// them nothing; a key path through a relationship without an inverse fetches.
    @Test func aRenamedGroupMovesItsItemsWithoutAFetch() throws {
        let fixture = try FetchFixture(seed: 8, count: 80)
        let context = fixture.context
        let results = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("rank")]),
                                         context: context, sectionKeyPath: "group.title")
        var changes: [ResultsChange] = []
        results.onChange = { changes.append($0) }
        let groups = try context.fetch(FetchQuery(Group.self))
        groups[0].title = "zzz"
        try context.save()
        let item = try #require(groups[1].items.first)
        item.group = groups[2]
        try context.save()
        for (step, expected) in try [ResultsUpdateTests.fresh(results, in: context)].enumerated() {
            #expect(results.sections.map(\.name) == expected.map(\.0), "\(step)")
            #expect(results.sections.map { $0.objects.map(\.objectID) } == expected.map(\.1))
        }
        #expect(changes.count == 2 && changes[0].moved.count == groups[0].items.count)
        #expect(results.fetchCount == 1 && results.updateCount == 2, "\(results.fetchCount) fetches, \(results.updateCount) updates")
        // A record of an entity the results do not read.
        let stack = try Stack(model: try Model(Item.self, Group.self, Reading.self))
        let separate = stack.context()
        let watched = try LiveResults(request: FetchQuery(Item.self), context: separate, sectionKeyPath: "group.title")
        Reading(context: separate).note = "x"
        try separate.save()
        #expect(watched.fetchCount == 1 && watched.updateCount == 0)
    }

    /// Items sectioned by their group's title, in rank order, in a context whose merges
    /// keep its own changes; with the groups.
    static func itemsByGroupTitle(seed: UInt64) throws -> (FetchFixture, LiveResults<Item>, [Group]) {
        let fixture = try FetchFixture(seed: seed, count: 40)
        let context = fixture.context
        context.mergePolicy = .objectTrumps
        let results = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("rank")]),
                                         context: context, sectionKeyPath: "group.title")
        return (fixture, results, try context.fetch(FetchQuery(Group.self)))
    }

    /// An item changed here keeps its group after another context moved it and renamed
    /// the group: the group's list no longer names it, and the results must still see it
    /// in the renamed section, as a fetch here does. (Found by review.)
    @Test func aChangedItemFollowsTheGroupItStillNames() throws {
        let (fixture, results, groups) = try Self.itemsByGroupTitle(seed: 9)
        let context = fixture.context
        let item = try #require(groups[0].items.first)
        item.rank = 999
        context.processPendingChanges()
        let other = fixture.stack.context()
        try #require(try other.existingObject(Item.self, with: item.objectID)).group = try other.existingObject(Group.self, with: groups[1].objectID)
        try other.save()
        context.processExternalChanges()
        try #require(try other.existingObject(Group.self, with: groups[0].objectID)).title = "aaa renamed"
        try other.save()
        context.processExternalChanges()
        try ResultsUpdateTests.expectFresh(results, in: context)
    }

    /// An item added to a group, or taken out, changes the group's list but not its
    /// title: the group's other items are not placed again. A rename still moves them.
    @Test func aGroupsListChangingMovesNoneOfItsItems() throws {
        let fixture = try FetchFixture(seed: 12, count: 120)
        let context = fixture.context
        let results = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("score")]),
                                         context: context, sectionKeyPath: "group.title")
        let group = try #require(try context.fetch(FetchQuery(Group.self)).max { $0.items.count < $1.items.count })
        #expect(group.items.count > 20)
        for step in 0..<3 {
            let item = Item(context: context)
            item.score = Double(step)
            item.group = group
            try context.save()
            #expect(results.lastTouchedCount == 1, "step \(step): \(results.lastTouchedCount) placed again")
        }
        group.items.first?.group = nil
        try context.save()
        #expect(results.lastTouchedCount == 1)
        group.title = "renamed"
        try context.save()
        #expect(results.lastTouchedCount == group.items.count)
        try ResultsUpdateTests.expectFresh(results, in: context)
        #expect(results.fetchCount == 1)
    }

    /// A group changed here keeps the list it had when another context moves an item into
    /// it; renamed next, it takes the item to the new section, as a fetch does (the list
    /// it holds does not name the item; the stored one does). (Found by review.)
    @Test func aGroupChangedHereReachesAnItemMovedInElsewhere() throws {
        let (fixture, results, groups) = try Self.itemsByGroupTitle(seed: 13)
        let context = fixture.context
        let item = try #require(groups[1].items.first)
        groups[0].title = "x"
        context.processPendingChanges()
        let other = fixture.stack.context()
        try #require(try other.existingObject(Item.self, with: item.objectID)).group = try other.existingObject(Group.self, with: groups[0].objectID)
        try other.save()
        context.processExternalChanges()
        groups[0].title = "y"
        context.processPendingChanges()
        try ResultsUpdateTests.expectFresh(results, in: context)
    }
}
