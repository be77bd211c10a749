import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Applies a change to sectioned IDs the way a table view would; inserted rows are
/// filled from `new` at the positions the change names (a table view asks its data source).
func apply(_ change: ResultsChange, to old: [(String, [ObjectID])], new: [[ObjectID]]) -> [[ObjectID]] {
    var sections = old.map(\.1)
    var removals = change.deleted + change.moved.map(\.from)
    removals.sort(by: >)
    for path in removals { sections[path.section].remove(at: path.item) }
    for index in change.deletedSections.sorted(by: >) {
        precondition(sections[index].isEmpty, "a deleted section still holds objects")
        sections.remove(at: index)
    }
    for index in change.insertedSections.sorted() { sections.insert([], at: index) }
    var insertions: [(ResultIndex, ObjectID?)] = change.inserted.map { ($0, nil) } + change.moved.map { ($0.to, $0.objectID) }
    insertions.sort { $0.0 < $1.0 }
    return insertions.reduce(into: sections) { result, insertion in
        result[insertion.0.section].insert(insertion.1 ?? new[insertion.0.section][insertion.0.item], at: insertion.0.item)
    }
}

@Suite struct LiveResultsTests {
    @Test(arguments: Seeds.list([31, 32, 33]))
    func diffsReplayToAFreshFetch(seed: UInt64) throws {
        let fixture = try FetchFixture(seed: seed, count: 40)
        let context = fixture.context
        let request = FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: "rank >= 0"), sortKeys: [SortKey("score")])
        let results = try LiveResults(request: request, context: context, sectionKeyPath: "group.title")
        var delivered: [ResultsChange] = []
        results.onChange = { delivered.append($0) }
        var random = SplitMix64(seed: seed)
        for step in 0..<30 {
            let before = results.sections.map { ($0.name, $0.objects.map(\.objectID)) }
            let all = try context.fetch(FetchQuery(Item.self))
            let groups = try context.fetch(FetchQuery(Group.self))
            let target = all[Int(random.next() % UInt64(all.count))]
            var expectUpdate = false
            switch random.next() % 6 {
            case 0: let item = Item(context: context); item.rank = Int(random.next() % 10); item.score = Double(random.next() % 100)
            case 1: context.delete(target)
            case 2: target.score = Double(random.next() % 100) - 50           // a move within the section
            case 3: target.group = groups[Int(random.next() % 3)]               // a move between sections
            case 4: target.rank = Int(random.next() % 20) - 10                  // in or out of the results
            default: target.flag.toggle(); expectUpdate = target.rank >= 0    // an update in place
            }
            if step % 3 == 0 { try context.save() } else { context.processPendingChanges() }
            let fresh = try context.fetch(FetchQuery(Item.self, fetchPredicate: request.fetchPredicate,
                                                       sortKeys: [SortKey("group.title")] + request.sortKeys))
            #expect(results.objects.map(\.objectID) == fresh.map(\.objectID), "seed \(seed) step \(step)")
            let after = results.sections.map { $0.objects.map(\.objectID) }
            if before.map(\.1) == after && !expectUpdate { continue }
            guard let change = delivered.last else { Issue.record("no change delivered, seed \(seed) step \(step)"); continue }
            delivered.removeAll()
            #expect(apply(change, to: before, new: after) == after, "seed \(seed) step \(step): \(change)")
            if expectUpdate && before.flatMap(\.1).contains(target.objectID) {
                #expect(!change.updated.isEmpty, "seed \(seed) step \(step): update reported")
            }
        }
    }

    /// Live results fetch again only when what they read may have changed: the entity's
    /// stored records, the unsaved changes to them here and in the ancestors, or (when a
    /// sort follows a relationship) any entity's. Random steps: each result set must equal a
    /// fresh fetch after every one, and a step that changes only groups must not make the
    /// items-only results fetch.
    @Test(arguments: Seeds.list([41, 42, 43]))
    func resultsFetchAgainOnlyWhenWhatTheyReadChanged(seed: UInt64) throws {
        let fixture = try FetchFixture(seed: seed, count: 30)
        let context = fixture.context
        context.mergePolicy = .objectTrumps  // another context changes the same objects
        try context.save()
        let own = FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: "rank >= 0"), sortKeys: [SortKey("score")])
        let related = FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: "rank >= 0"),
                                   sortKeys: [SortKey("group.title"), SortKey("score")])
        let ownResults = try LiveResults(request: own, context: context)
        let relatedResults = try LiveResults(request: related, context: context)
        let other = fixture.stack.context()
        var random = SplitMix64(seed: seed)
        for step in 0..<80 {
            let items = try context.fetch(FetchQuery(Item.self))
            let groups = try context.fetch(FetchQuery(Group.self))
            let item = items[Int(random.next() % UInt64(items.count))]
            let group = groups[Int(random.next() % UInt64(groups.count))]
            let fetches = ownResults.fetchCount
            var onlyGroups = false
            switch random.next() % 11 {
            case 0: let new = Item(context: context); new.rank = Int(random.next() % 10); new.score = Double(random.next() % 100)
            case 1: context.delete(item)
            case 2: item.score = Double(random.next() % 100) - 50
            case 3: item.rank = Int(random.next() % 20) - 10
            case 4:
                onlyGroups = !context.hasChanges
                group.title = "g\(random.next() % 100)"
            case 5: item.group = group
            case 6: context.undo()
            case 7: context.rollback()
            case 8:
                let theirs = try #require(try other.fetch(FetchQuery(Item.self)).randomElement(using: &random))
                theirs.score = Double(random.next() % 100)
                try other.save()
                context.processExternalChanges()
            case 9:
                let theirs = try #require(try other.fetch(FetchQuery(Group.self)).randomElement(using: &random))
                theirs.title = "t\(random.next() % 100)"
                let quiet = !context.hasChanges
                try other.save()
                context.processExternalChanges()
                onlyGroups = quiet
            default: context.reset()
            }
            if random.next() % 3 == 0 { try context.save() } else { context.processPendingChanges() }
            let freshOwn = try context.fetch(own), freshRelated = try context.fetch(related)
            #expect(ownResults.objects.map(\.objectID) == freshOwn.map(\.objectID), "seed \(seed) step \(step)")
            #expect(ownResults.objects.map(\.score) == freshOwn.map(\.score), "seed \(seed) step \(step)")
            #expect(relatedResults.objects.map(\.objectID) == freshRelated.map(\.objectID), "seed \(seed) step \(step)")
            #expect(ownResults.objects.allSatisfy { $0.context === context }, "seed \(seed) step \(step): objects of this context")
            if onlyGroups { #expect(ownResults.fetchCount == fetches, "seed \(seed) step \(step): a change of groups only") }
        }
    }

    /// A grandchild's results read through the middle context's objects, changed there or
    /// not: a refresh of one in the middle context (no change to any changed set) makes them
    /// fetch again.
    @Test func aRefreshInTheMiddleReachesAGrandchildsResults() throws {
        let fixture = try FetchFixture(seed: 6, count: 10)
        let root = fixture.context
        try root.save()
        let middle = Context(parent: root), grandchild = Context(parent: middle)
        let request = FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("score")])
        let results = try LiveResults(request: request, context: grandchild)
        let first = try #require(results.objects.first)
        let held = try #require(try middle.existingObject(Item.self, with: first.objectID))
        _ = held.score                                            // loaded in the middle
        let inRoot = try #require(try root.existingObject(Item.self, with: first.objectID))
        inRoot.score = 1_000                                      // unsaved in the root
        grandchild.processPendingChanges()
        #expect(results.objects.first?.objectID == first.objectID, "the middle still holds the old score")
        middle.refresh(held, mergeChanges: false)
        grandchild.processPendingChanges()
        #expect(results.objects.last?.objectID == first.objectID, "after the refresh it reads the root's")
    }

    /// After a reset the results hold the context's new instances of the same records, and
    /// say so: every row is reported updated (the rows still show the old, detached ones).
    @Test func aResetReportsEveryRowUpdated() throws {
        let fixture = try FetchFixture(seed: 8, count: 6)
        let context = fixture.context
        try context.save()
        let results = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("score")]), context: context)
        var delivered: [ResultsChange] = []
        results.onChange = { delivered.append($0) }
        let before = results.objects
        context.reset()
        #expect(results.objects.map(\.objectID) == before.map(\.objectID))
        #expect(results.objects.allSatisfy { $0.context === context } && before.allSatisfy { $0.context == nil })
        #expect(delivered.count == 1 && delivered.last?.updated == (0..<6).map { ResultIndex(section: 0, item: $0) })
    }

    /// An undo while another context's save waits to be taken in: the refetch takes it in,
    /// which tells the results again while they refresh. One change arrives, from the
    /// results before to the results after (a refresh inside the refresh had delivered
    /// one, and the outer one another, from the old sections).
    @Test func aSaveTakenInDuringARefreshIsDeliveredOnce() throws {
        let fixture = try FetchFixture(seed: 9, count: 6)
        let context = fixture.context
        try context.save()
        let results = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("score")]), context: context)
        let first = try #require(results.objects.first)
        context.undoGroup { first.score = 1_000 }
        context.processPendingChanges()
        var delivered: [ResultsChange] = []
        results.onChange = { delivered.append($0) }
        let before = results.sections.map { ($0.name, $0.objects.map(\.objectID)) }
        let other = fixture.stack.context()
        let theirs = Item(context: other)
        theirs.score = -1_000
        try other.save()                                    // waits in this context's inbox
        context.undo()                                      // the refresh takes it in
        let after = results.sections.map { $0.objects.map(\.objectID) }
        #expect(after.first?.first == theirs.objectID && after.first?[1] == first.objectID)
        #expect(delivered.count == 1)
        if let change = delivered.first { #expect(apply(change, to: before, new: after) == after) }
    }

    /// A write a setter refused (relating a deleted object) is the next save's to throw:
    /// live results fetch as usual meanwhile (their refetch had thrown it, failed, and left
    /// the save to succeed without it).
    @Test func aRefusedWriteIsTheSavesNotTheResultsFetchs() throws {
        let fixture = try FetchFixture(seed: 4, count: 5)
        let context = fixture.context
        try context.save()
        let results = try LiveResults(request: FetchQuery(Item.self), context: context)
        let group = try #require(try context.fetch(FetchQuery(Group.self)).first)
        context.delete(group)
        let item = Item(context: context)
        item.group = group                                   // refused: thrown by the next save
        context.processPendingChanges()
        #expect(results.objects.contains { $0 === item })
        #expect(throws: CairnError.self) { try context.save() }
    }

    /// Saves that keep arriving while live results refresh (here, one made by each change
    /// the results deliver, as another thread's would land during the next pass) do not
    /// keep the refresh going: it ends in bounded work, and the next one catches up. (It
    /// looped for as long as saves came: 1.5 s, or more than 100, on the main actor.)
    @Test func aRefreshEndsWhileSavesKeepArriving() throws {
        let fixture = try FetchFixture(seed: 8, count: 20)
        let context = fixture.context
        try context.save()
        let request = FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("rank"), SortKey("score")])
        let results = try LiveResults(request: request, context: context)
        let other = fixture.stack.context()
        var delivered = 0
        results.onChange = { _ in
            delivered += 1
            guard delivered < 200 else { return }  // (a cap, so that an unbounded refresh ends too)
            let item = Item(context: other)
            item.rank = 1_000 + delivered
            try? other.save()
        }
        let item = Item(context: other)
        item.rank = -1
        try other.save()                                    // waits in this context's inbox
        try results.refresh()
        #expect(delivered <= 3, "\(delivered) changes delivered by one refresh")
        let first = delivered
        results.onChange = { _ in delivered += 1 }
        try results.refresh()
        #expect(delivered > first, "the next refresh catches up")
        let fresh = try context.fetch(request).map(\.objectID)
        #expect(results.objects.map(\.objectID) == fresh)
    }

    /// Sectioned live results stay well formed while another thread saves renames,
    /// deletes and inserts of the section key: sections in order, each name once, each
    /// row in the section of the key it was sorted by. (Rows were named by re-reading the
    /// store after the fetch: a third of the refreshes came out malformed.)
    @Test func sectionsStayWellFormedUnderConcurrentSaves() throws {
        let fixture = try FetchFixture(seed: 9, count: 200)
        let context = fixture.context
        try context.save()
        let request = FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("rankPlain")])
        let results = try LiveResults(request: request, context: context, sectionKeyPath: "rankPlain")
        let coordinator = fixture.stack.coordinator, model = fixture.stack.model
        let done = Locked(false)
        let writer = Thread {
            let other = Context(coordinator: coordinator, model: model)
            other.undoManager.isEnabled = false
            var random = SplitMix64(seed: 3)
            while !done.value {
                guard let items = try? other.fetch(FetchQuery(Item.self)) else { continue }
                for item in items.prefix(20) {
                    switch random.next() % 3 {
                    case 0: item.rankPlain = Int(random.next() % 40)
                    case 1: other.delete(item)
                    default: Item(context: other).rankPlain = Int(random.next() % 40)
                    }
                }
                try? other.save()
            }
        }
        writer.start()
        defer { done.withLock { $0 = true } }
        var malformed = 0, contradicted = 0
        for _ in 0..<150 {
            try results.refresh()
            let names = results.sections.map(\.name)
            let ordered = zip(names, names.dropFirst()).allSatisfy { (Int($0) ?? 0) < (Int($1) ?? 0) }
            if !ordered || Set(names).count != names.count || names.contains("") { malformed += 1 }
            // Each object shows the values the refresh sectioned it by (one state per fetch).
            if results.sections.contains(where: { section in section.objects.contains { String($0.rankPlain) != section.name } }) {
                contradicted += 1
            }
        }
        #expect(malformed == 0, "\(malformed) of 150 refreshes malformed")
        #expect(contradicted == 0, "\(contradicted) of 150 refreshes hold an object in a section its values contradict")
    }

    /// A child's results see the unsaved changes of its parent.
    @Test func aChildsResultsSeeTheParentsUnsavedChanges() throws {
        let fixture = try FetchFixture(seed: 5, count: 10)
        let parent = fixture.context
        try parent.save()
        let child = Context(parent: parent)
        let request = FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("score")])
        let results = try LiveResults(request: request, context: child)
        let item = try #require(try parent.fetch(request).first)
        item.score = 1_000
        child.processPendingChanges()
        #expect(results.objects.last?.objectID == item.objectID, "the parent's unsaved change moves the item last")
        let fetches = results.fetchCount
        child.processPendingChanges()
        #expect(results.fetchCount == fetches, "nothing changed since")
    }

    @Test func changesArriveAsAnAsyncSequence() async throws {
        let fixture = try FetchFixture(seed: 2, count: 5)
        let results = try LiveResults(request: FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("rank")]), context: fixture.context)
        let item = Item(context: fixture.context)
        item.rank = -100
        try fixture.context.save()
        var iterator = results.changes.makeAsyncIterator()
        let change = await iterator.next()
        #expect(change?.inserted == [ResultIndex(section: 0, item: 0)])
    }

    @Test func otherContextsSavesUpdateResults() throws {
        let fixture = try FetchFixture(seed: 3, count: 5)
        let results = try LiveResults(request: FetchQuery(Item.self), context: fixture.context)
        let other = fixture.stack.context()
        let item = Item(context: other)
        item.rank = 1
        try other.save()
        fixture.context.processExternalChanges()
        #expect(results.objects.count == 6)
    }
}

/// Sections named by a closure: first-letter sections with no stored attribute for them.
@Suite struct ClosureSectionTests {
    @Test func firstLetterSectionsFollowChangesAndReplay() throws {
        let stack = try Stack()
        let context = stack.context()
        for name in ["bo", "ann", "al", "cy"] {
            let person = Person(context: context)
            person.username = name
        }
        try context.save()
        let request = FetchQuery(Person.self, fetchPredicate: nil, sortKeys: [SortKey("username")])
        let results = try LiveResults(request: request, context: context) { String($0.username.prefix(1)).uppercased() }
        func rows() -> [(String, [ObjectID])] { results.sections.map { ($0.name, $0.objects.map(\.objectID)) } }
        #expect(results.sections.map(\.name) == ["A", "B", "C"])
        #expect(results.sections[0].objects.map(\.username) == ["al", "ann"])
        var shown = rows()
        var replayed = 0
        results.onChange = { change in
            let now = rows()
            #expect(apply(change, to: shown, new: now.map(\.1)) == now.map(\.1))
            shown = now
            replayed += 1
        }
        let bea = Person(context: context)
        bea.username = "bea"
        let dee = Person(context: context)
        dee.username = "dee"
        try context.save()
        #expect(results.sections.map(\.name) == ["A", "B", "C", "D"] && results.sections[1].objects.map(\.username) == ["bea", "bo"])
        let cy = try #require(results.sections[2].objects.first)
        cy.username = "amy"  // moves to A; C empties
        try context.save()
        #expect(results.sections.map(\.name) == ["A", "B", "D"] && results.sections[0].objects.map(\.username) == ["al", "amy", "ann"])
        #expect(replayed == 2)
    }
}
