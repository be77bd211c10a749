import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A context pinned to a query generation reads one committed state — fetches, counts,
/// faults, relationships and live results — across other contexts' saves and
/// compactions, until it moves on.
@Suite struct QueryGenerationTests {
    /// What a context sees of the store: each person's username, age and DVD titles, by
    /// fetch, by faults fired one by one, and by count.
    struct Seen: Equatable {
        var people: [String: Int] = [:]
        var shelves: [String: [String]] = [:]
        var count = 0
        var adults = 0
    }

    /// Three people with two DVDs each, saved.
    func setUp(_ stack: Stack) throws {
        let context = stack.context()
        for (index, username) in ["ann", "bo", "cy"].enumerated() {
            let person = Person(context: context)
            person.username = username
            person.age = 20 + index
            for number in 0..<2 {
                let dvd = DVD(context: context)
                dvd.title = "\(username)-\(number)"
                dvd.owner = person
            }
        }
        try context.save()
    }

    func seen(by context: Context) throws -> Seen {
        var seen = Seen()
        for person in try context.fetch(FetchQuery(Person.self)) {
            seen.people[person.username] = person.age
            seen.shelves[person.username] = person.dvds.map(\.title).sorted()
        }
        seen.count = try context.count(Person.self)
        seen.adults = try context.fetch(FetchQuery(Person.self, predicate: #Predicate { $0.age >= 21 })).count
        return seen
    }

    /// Another context's saves: every age moves, a DVD changes owner, a person goes and one comes.
    func change(_ stack: Stack, round: Int) throws {
        let other = stack.context()
        let people = try other.fetch(FetchQuery(Person.self, sortBy: [SortDescriptor(\Person.username)]))
        for person in people { person.age += 10 }
        if let first = people.first, let last = people.last, first !== last, let dvd = first.dvds.first { dvd.owner = last }
        if people.count > 2, let leaving = people.dropFirst().first { other.delete(leaving) }
        Person(context: other).username = "new\(round)"
        try other.save()
    }

    @Test func aPinnedContextReadsOneStateAcrossSavesAndCompaction() throws {
        let stack = try Stack()
        try setUp(stack)
        let pinned = stack.context()
        pinned.name = "pinned"
        let ann = try #require(try pinned.fetch(FetchQuery(Person.self, predicate: #Predicate { $0.username == "ann" })).first)
        _ = ann.age  // one loaded object; the rest stay faults until read
        try pinned.setQueryGenerationFrom(.current)
        let sequence = try #require(pinned.queryGenerationToken?.sequence)
        let before = try seen(by: stack.context())
        #expect(try seen(by: pinned) == before)

        for round in 0..<3 {
            try change(stack, round: round)
            if round == 1 { try stack.coordinator.compact() }
            pinned.processPendingChanges()
            #expect(try seen(by: pinned) == before, "round \(round): the pinned state holds")
            #expect(ann.age == 20)
            #expect(try pinned.existingObject(Person.self, with: ann.objectID)?.age == 20)
            #expect(pinned.queryGenerationToken?.sequence == sequence)
        }
        let newest = try seen(by: stack.context())
        #expect(newest != before)

        pinned.processExternalChanges()
        #expect(pinned.queryGenerationToken?.sequence == stack.coordinator.lastSequence, "it moves to the newest state")
        #expect(try seen(by: pinned) == newest)
        #expect(ann.age == 50)
    }

    @Test func faultsAndRelationshipsFireAtTheGeneration() throws {
        let stack = try Stack()
        try setUp(stack)
        let pinned = stack.context()
        try pinned.setQueryGenerationFrom(.current)
        try change(stack, round: 0)
        try stack.coordinator.compact()
        try change(stack, round: 1)
        // Objects first met now, as faults, fire at the pinned state.
        let people = try pinned.fetch(FetchQuery(Person.self, sortBy: [SortDescriptor(\Person.username)]))
        #expect(people.map(\.username) == ["ann", "bo", "cy"])
        #expect(people.map(\.age) == [20, 21, 22])
        #expect(people.map { $0.dvds.map(\.title).sorted() } == [["ann-0", "ann-1"], ["bo-0", "bo-1"], ["cy-0", "cy-1"]])
        let dvds = try pinned.fetch(FetchQuery(DVD.self))
        #expect(dvds.allSatisfy { $0.title.hasPrefix($0.owner?.username ?? "-") })
        // A lookup by a unique (indexed) value reads the pinned state too.
        let bo = try pinned.fetch(FetchQuery(Person.self, predicate: #Predicate { $0.username == "bo" }))
        #expect(bo.count == 1 && bo.first?.age == 21)
        #expect(try pinned.fetch(FetchQuery(Person.self, predicate: #Predicate { $0.username == "new0" })).isEmpty)
    }

    @Test func liveResultsOfAPinnedContextWaitForItToMove() throws {
        let stack = try Stack()
        try setUp(stack)
        let pinned = stack.context()
        try pinned.setQueryGenerationFrom(.current)
        let results = try LiveResults(request: FetchQuery(Person.self, sortBy: [SortDescriptor(\Person.username)]), context: pinned)
        try change(stack, round: 0)
        pinned.processPendingChanges()
        try results.refresh()
        #expect(results.objects.map(\.username) == ["ann", "bo", "cy"])
        #expect(results.objects.map(\.age) == [20, 21, 22])
        pinned.processExternalChanges()
        #expect(results.objects.map(\.username) == ["ann", "cy", "new0"])
        #expect(results.objects.map(\.age) == [30, 32, 0])
    }

    @Test func itsOwnSaveMovesItToTheStateAfterTheSave() throws {
        let stack = try Stack()
        try setUp(stack)
        let pinned = stack.context()
        try pinned.setQueryGenerationFrom(.current)
        try change(stack, round: 0)
        let dee = Person(context: pinned)
        dee.username = "dee"
        try pinned.save()
        #expect(pinned.queryGenerationToken?.sequence == stack.coordinator.lastSequence)
        let seen = try seen(by: pinned)
        #expect(seen.people.keys.sorted() == ["ann", "cy", "dee", "new0"], "its save and the save before it")
        try change(stack, round: 1)
        #expect(try self.seen(by: pinned) == seen)
    }

    @Test func aBatchOfAPinnedContextWorksOnTheNewestStateAndMovesIt() throws {
        let stack = try Stack()
        try setUp(stack)
        let pinned = stack.context()
        try pinned.setQueryGenerationFrom(.current)
        try change(stack, round: 0)  // ages 30, 32; bo gone; new0 (0) in
        let updated = try pinned.batchUpdate(FetchQuery(Person.self, predicate: #Predicate { $0.age >= 30 })) { person in
            person.age += 1
        }
        #expect(updated == 2, "the batch matched the newest state, not the pinned one")
        #expect(pinned.queryGenerationToken?.sequence == stack.coordinator.lastSequence)
        #expect(try seen(by: pinned).people == ["ann": 31, "cy": 33, "new0": 0])
    }

    @Test func aPinnedContextsSaveStillMeetsTheMergePolicy() throws {
        let stack = try Stack()
        try setUp(stack)
        let pinned = stack.context()
        try pinned.setQueryGenerationFrom(.current)
        let ann = try #require(try pinned.fetch(FetchQuery(Person.self, predicate: #Predicate { $0.username == "ann" })).first)
        let other = stack.context()
        try #require(try other.existingObject(Person.self, with: ann.objectID)).age = 70
        try other.save()
        ann.age = 40
        let error = #expect(throws: CairnError.self) { try pinned.save() }
        #expect(error?.code == .conflict, "the save moves to the newest state first, and the clash is a conflict")
        pinned.mergePolicy = .objectTrumps
        try pinned.save()
        #expect(ann.age == 40 && pinned.queryGenerationToken?.sequence == stack.coordinator.lastSequence)
    }

    /// A reader in another process (a read-only open beside the writer): a context pinned
    /// there stays at its state across the reader's advances, and moves when asked.
    @MainActor @Test func aPinnedContextOfAReaderStaysAcrossAdvances() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let app = try ReadOnlyContainerTests.open(directory, readOnly: false)
        Person(context: app.mainContext).username = "pat"
        try app.mainContext.save()
        let widget = try ReadOnlyContainerTests.open(directory, readOnly: true)
        let context = Context(coordinator: widget.coordinator, model: widget.model)
        try context.setQueryGenerationFrom(.current)
        Person(context: app.mainContext).username = "bo"
        try app.mainContext.save()
        try app.compact()
        _ = try widget.advance()
        #expect(try widget.mainContext.fetch(FetchQuery(Person.self)).count == 2, "the reader moved")
        #expect(try context.fetch(FetchQuery(Person.self)).map(\.username) == ["pat"], "its pinned context did not")
        context.processExternalChanges()
        #expect(try context.fetch(FetchQuery(Person.self)).map(\.username).sorted() == ["bo", "pat"])
    }

    @Test func aTokenPinsAnotherContextAndUnpinningReadsTheNewest() throws {
        let stack = try Stack()
        try setUp(stack)
        let first = stack.context(), second = stack.context()
        try first.setQueryGenerationFrom(.current)
        let token = try #require(first.queryGenerationToken)
        try change(stack, round: 0)
        try second.setQueryGenerationFrom(token)
        #expect(second.queryGenerationToken == token)
        #expect(try seen(by: second) == seen(by: first))
        #expect(try seen(by: second).people["bo"] == 21)
        try second.setQueryGenerationFrom(nil)
        #expect(second.queryGenerationToken == nil)
        #expect(try seen(by: second).people["bo"] == nil)
        #expect(try seen(by: first).people["bo"] == 21)

        let child = Context(parent: first)
        #expect(throws: CairnError.self) { try child.setQueryGenerationFrom(.current) }
        #expect(try child.fetch(FetchQuery(Person.self)).count == 3, "a child reads at its root's generation")
        let elsewhere = try Stack()
        #expect(throws: CairnError.self) { try elsewhere.context().setQueryGenerationFrom(token) }
    }

    @Test func pinnedGenerationsReportWhatTheyHold() throws {
        let stack = try Stack()
        try setUp(stack)
        #expect(stack.coordinator.pinnedGenerations.isEmpty)
        var pinned: Context? = stack.context()
        pinned?.name = "report"
        try pinned?.setQueryGenerationFrom(.current)
        let sequence = stack.coordinator.lastSequence
        var held = stack.coordinator.pinnedGenerations
        #expect(held.map(\.sequence) == [sequence] && held.map(\.pinnedBy) == ["report"])
        #expect(held.first?.changedRecords == 0 && held.first?.retainedBytes == 0, "nothing changed yet: everything is shared")
        try change(stack, round: 0)
        held = stack.coordinator.pinnedGenerations
        // 3 ages, the DVD moved (and both owners' lists), a delete with its 2 cascaded DVDs, an insert.
        #expect(held.first?.changedRecords == 3 + 1 + 2 + 1)
        #expect((held.first?.retainedBytes ?? 0) > 0, "the commit copied the tables the pin shares")
        try stack.coordinator.compact()
        #expect((stack.coordinator.pinnedGenerations.first?.retainedBytes ?? 0) > (held.first?.retainedBytes ?? 0),
                "after a compaction it holds the retired files too")
        try pinned?.setQueryGenerationFrom(nil)
        #expect(stack.coordinator.pinnedGenerations.isEmpty, "unpinned, the generation goes")
        pinned = nil
    }

    /// Random saves and compactions by other contexts: a pinned context sees, every time,
    /// exactly what a fresh context saw at the pin.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func randomSavesNeverReachAPinnedContext(seed: UInt64) throws {
        let stack = try Stack()
        try setUp(stack)
        var random = SplitMix64(seed: seed)
        let pinned = stack.context()
        for step in 0..<30 {
            if random.next() % 5 == 0 {
                try pinned.setQueryGenerationFrom(.current)
            }
            let expected = try seen(by: stack.context())
            if pinned.queryGenerationToken == nil { try pinned.setQueryGenerationFrom(.current) }
            let other = stack.context()
            let people = try other.fetch(FetchQuery(Person.self))
            for person in people where random.next() % 2 == 0 { person.age = Int(random.next() % 50) }
            if let dvd = try other.fetch(FetchQuery(DVD.self)).randomElement(using: &random), let to = people.randomElement(using: &random) {
                dvd.owner = to
            }
            if let victim = people.randomElement(using: &random), random.next() % 4 == 0 { other.delete(victim) }
            if random.next() % 2 == 0 { Person(context: other).username = "p\(seed)-\(step)" }
            try other.save()
            if random.next() % 6 == 0 { try stack.coordinator.compact() }
            pinned.processPendingChanges()
            #expect(try seen(by: pinned) == expected, "step \(step)")
            pinned.processExternalChanges()
            #expect(try seen(by: pinned) == seen(by: stack.context()), "step \(step): moved to the newest")
        }
    }
}

/// A pinned context on one thread while another thread saves and compacts: every read
/// of the pinned context sees one committed state (the invariant of the writer's saves
/// holds, and reads between moves agree), and it moves to newer states in order.
@Suite struct QueryGenerationConcurrencyTests {
    @Test func aPinnedReaderBesideAWriterSeesOneStateBetweenMoves() throws {
        let stack = try Stack()
        let people = 8, total = people * 100
        do {
            let context = stack.context()
            for index in 0..<people {
                let person = Person(context: context)
                person.username = "p\(index)"
                person.age = 100
            }
            try context.save()
        }
        let coordinator = stack.coordinator, model = stack.model
        let done = Locked(false), saves = Locked(0)
        let writer = Thread {
            let context = Context(coordinator: coordinator, model: model)
            context.undoManager.isEnabled = false
            var random = SplitMix64(seed: 11)
            while !done.value {
                guard let all = try? context.fetch(FetchQuery(Person.self)), all.count == people else { continue }
                // Value moves between two people: the sum stays.
                let from = all[Int(random.next() % UInt64(people))], to = all[Int(random.next() % UInt64(people))]
                let amount = Int(random.next() % 10)
                from.age -= amount
                to.age += amount
                if (try? context.save()) == nil { context.rollback() }
                let count = saves.withLock { count -> Int in
                    count += 1
                    return count
                }
                if count % 25 == 0 { _ = try? coordinator.compact() }
            }
        }
        writer.start()
        defer { done.withLock { $0 = true } }
        let reader = stack.context()
        try reader.setQueryGenerationFrom(.current)
        var lastSequence: UInt64 = 0, moves = 0
        // (At least 120 rounds, and on until the writer has saved 150 times and compacted.)
        var round = 0
        while round < 120 || (saves.value < 150 && round < 100_000) {
            defer { round += 1 }
            let first = try reader.fetch(FetchQuery(Person.self)).map { ($0.username, $0.age) }
            #expect(first.reduce(0) { $0 + $1.1 } == total, "round \(round): one committed state")
            let again = try reader.fetch(FetchQuery(Person.self, sortBy: [SortDescriptor(\Person.username)])).map { ($0.username, $0.age) }
            #expect(first.sorted { $0.0 < $1.0 }.map(\.1) == again.map(\.1), "round \(round): the same state again")
            #expect(try reader.count(Person.self) == people)
            if round % 3 == 0 {
                reader.processExternalChanges()
                moves += 1
                let sequence = try #require(reader.queryGenerationToken?.sequence)
                #expect(sequence >= lastSequence, "generations move forward")
                lastSequence = sequence
            }
        }
        #expect(moves >= 40)
        #expect(saves.value >= 150)
    }
}
