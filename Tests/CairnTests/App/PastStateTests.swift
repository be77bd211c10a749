import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Point-in-time reads: a context as of a history token sees exactly the state that
/// transaction left, with fetches, predicates, counts and relationships, across
/// compactions and reopens, while the store goes on; it cannot save.
@Suite struct PastStateTests {
    /// What a context sees: each person's name, age and DVD titles; each DVD's owner.
    struct World: Equatable, CustomStringConvertible {
        var people: [String: String] = [:]
        var dvds: [String: String] = [:]
        var olderThanFifty = 0
        var personCount = 0

        init(_ context: Context) throws {
            for person in try context.fetch(Person.self) {
                people[person.username] = "\(person.name ?? "-") \(person.age) [\(person.dvds.map(\.title).sorted().joined(separator: ","))]"
            }
            for dvd in try context.fetch(DVD.self) { dvds[dvd.title] = dvd.owner?.username ?? "-" }
            olderThanFifty = try context.fetch(Person.self, where: #Predicate { $0.age > 50 }).count
            personCount = try context.count(Person.self)
        }

        var description: String { "people \(people.sorted { $0.key < $1.key }) dvds \(dvds.sorted { $0.key < $1.key })" }
    }

    /// Random saves of people and DVDs (inserts, changes, owners moved, cascading deletes),
    /// compacting and reopening now and then: the world after each transaction, by sequence.
    static func history(_ fs: MemoryFileSystem, seed: UInt64, steps: Int,
                        retention: HistoryRetention = .unlimited) throws -> (Coordinator, Model, [UInt64: World]) {
        var random = ResultsChangeApplyTests.Generator(state: seed)
        var (coordinator, model) = try HistoryFeedTests.open(fs, history: retention)
        var worlds: [UInt64: World] = [0: try World(Context(coordinator: coordinator, model: model))]
        var serial = 0
        for _ in 0..<steps {
            let context = Context(coordinator: coordinator, model: model)
            let people = try context.fetch(Person.self), dvds = try context.fetch(DVD.self)
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                serial += 1
                switch Int.random(in: 0..<10, using: &random) {
                case 0...1:
                    let person = Person(context: context)
                    person.username = "p\(serial)"
                    person.age = Int.random(in: 0..<100, using: &random)
                case 2...3 where !people.isEmpty:
                    let person = people.randomElement(using: &random)!
                    guard !person.isDeleted else { continue }
                    person.age = Int.random(in: 0..<100, using: &random)
                    if Bool.random(using: &random) { person.name = "n\(serial)" }
                case 4...5 where !people.isEmpty:
                    let dvd = DVD(context: context)
                    dvd.title = "d\(serial)"
                    let owner = people.randomElement(using: &random)!
                    if !owner.isDeleted { dvd.owner = owner }
                case 6 where !dvds.isEmpty && !people.isEmpty:
                    let dvd = dvds.randomElement(using: &random)!, owner = people.randomElement(using: &random)!
                    if !dvd.isDeleted && !owner.isDeleted { dvd.owner = owner }
                case 7 where !people.isEmpty:
                    context.delete(people.randomElement(using: &random)!)
                case 8 where !dvds.isEmpty:
                    context.delete(dvds.randomElement(using: &random)!)
                default:
                    let person = Person(context: context)
                    person.username = "p\(serial)"
                }
            }
            guard context.hasChanges else { continue }
            try context.save()
            worlds[coordinator.lastSequence] = try World(Context(coordinator: coordinator, model: model))
            switch Int.random(in: 0..<10, using: &random) {
            case 0: try coordinator.compact()
            case 1:
                try coordinator.close()
                (coordinator, model) = try HistoryFeedTests.open(fs, history: retention)
            default: break
            }
        }
        return (coordinator, model, worlds)
    }

    /// A context reading the state just after transaction `sequence`.
    static func context(_ coordinator: Coordinator, _ model: Model, asOf sequence: UInt64) throws -> Context {
        let context = Context(coordinator: coordinator, model: model)
        try context.setQueryGenerationFrom(coordinator.queryGeneration(asOf: HistoryToken(storeID: coordinator.storeID, sequence: sequence)))
        return context
    }

    @Test func aContainerOpensAContextAsOfAToken() throws {
        let container = try Container(entities: [Person.self, DVD.self], storage: .inMemory, history: .unlimited)
        let context = Context(coordinator: container.coordinator, model: container.model)
        let ann = Person(context: context)
        ann.username = "ann"
        try context.save()
        let then = container.historyToken
        ann.name = "Ann"
        try context.save()
        let past = try container.context(asOf: then)
        #expect(try past.fetch(Person.self).map(\.name) == [nil])
        #expect(past.name == "as of \(then.sequence)")
        try container.close()
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func aPastContextSeesExactlyWhatEachTransactionLeft(seed: UInt64) throws {
        let fs = MemoryFileSystem()
        let (coordinator, model, worlds) = try Self.history(fs, seed: seed, steps: 60)
        #expect(worlds.count > 40)
        var compared = 0
        for (sequence, world) in worlds.sorted(by: { $0.key < $1.key }) {
            let past = try Self.context(coordinator, model, asOf: sequence)
            let seen = try World(past)
            #expect(seen == world, "as of \(sequence)")
            compared += 1
        }
        #expect(compared == worlds.count)
        try coordinator.close()
    }

    @Test func aPastContextKeepsItsStateThroughSavesAndCompactions() throws {
        let fs = MemoryFileSystem()
        let (coordinator, model, worlds) = try Self.history(fs, seed: 7, steps: 30)
        let sequence = worlds.keys.sorted()[worlds.count / 2]
        let past = try Self.context(coordinator, model, asOf: sequence)
        #expect(try World(past) == worlds[sequence])
        // The store goes on: new people, every DVD deleted, compactions.
        let context = Context(coordinator: coordinator, model: model)
        for index in 0..<5 { Person(context: context).username = "later\(index)" }
        for dvd in try context.fetch(DVD.self) { context.delete(dvd) }
        try context.save()
        try coordinator.compact()
        past.processExternalChanges()
        #expect(try World(past) == worlds[sequence], "the past context stays where it is")
        #expect(past.queryGenerationToken?.sequence == sequence)
        let pinned = coordinator.pinnedGenerations.first { $0.pinnedBy == "as of \(sequence)" }
        #expect(pinned?.sequence == sequence && (pinned?.retainedBytes ?? 0) > 0, "\(coordinator.pinnedGenerations)")
        try coordinator.close()
    }

    @Test func aPastContextCannotSave() throws {
        let fs = MemoryFileSystem()
        let (coordinator, model, _) = try Self.history(fs, seed: 11, steps: 10)
        let past = try Self.context(coordinator, model, asOf: 1)
        let before = coordinator.lastSequence
        Person(context: past).username = "intruder"
        #expect(throws: CairnError.self) { try past.save() }
        #expect(throws: CairnError.self) { _ = try past.batchDelete(FetchQuery(Person.self)) }
        #expect(throws: CairnError.self) { try past.setQueryGenerationFrom(nil) }
        #expect(coordinator.lastSequence == before, "nothing was written")
        past.rollback()
        // A context with unsaved changes cannot go to the past.
        let live = Context(coordinator: coordinator, model: model)
        Person(context: live).username = "pending"
        let token = try coordinator.queryGeneration(asOf: HistoryToken(storeID: coordinator.storeID, sequence: 1))
        #expect(throws: CairnError.self) { try live.setQueryGenerationFrom(token) }
        live.rollback()
        try live.setQueryGenerationFrom(token)
        #expect(live.queryGenerationToken == token)
        try coordinator.close()
    }

    @Test func aLoadedObjectIsReadAgainInThePast() throws {
        let (coordinator, model) = try HistoryFeedTests.open()
        let context = Context(coordinator: coordinator, model: model)
        let ann = Person(context: context)
        ann.username = "ann"
        ann.age = 20
        try context.save()
        let then = coordinator.historyToken
        ann.age = 40
        try context.save()
        #expect(ann.age == 40)
        try context.setQueryGenerationFrom(try coordinator.queryGeneration(asOf: then))
        #expect(ann.age == 20, "the object shows the past state once the context reads it")
        // Fetched, not yet read (a fault with the row its fetch read), then sent to the past.
        let reader = Context(coordinator: coordinator, model: model)
        let fetched = try #require(try reader.fetch(Person.self, where: #Predicate { $0.age > 0 }).first)
        #expect(fetched.isFault && fetched.prefetchedVersion != nil, "a fault with the row its fetch read")
        try reader.setQueryGenerationFrom(try coordinator.queryGeneration(asOf: then))
        #expect(fetched.age == 20, "not the row the fetch read at the newest state")
        // The newest state's token gives a context that cannot save either.
        let newest = Context(coordinator: coordinator, model: model)
        try newest.setQueryGenerationFrom(try coordinator.queryGeneration(asOf: coordinator.historyToken))
        Person(context: newest).username = "late"
        #expect(throws: CairnError.self) { try newest.save() }
        try coordinator.close()
    }

    @Test func statesTheStoreNoLongerHoldsAreRefused() throws {
        let fs = MemoryFileSystem()
        let (coordinator, model, worlds) = try Self.history(fs, seed: 5, steps: 20, retention: .transactions(3))
        try coordinator.compact()
        let newest = coordinator.lastSequence
        let storeID = coordinator.storeID
        let expired = #expect(throws: CairnError.self) { _ = try coordinator.queryGeneration(asOf: HistoryToken(storeID: storeID, sequence: 1)) }
        #expect(expired?.code == .historyExpired)
        // The retention's oldest state still opens, and equals what that transaction left.
        let oldest = newest - 3
        #expect(try World(Self.context(coordinator, model, asOf: oldest)) == worlds[oldest])
        let future = #expect(throws: CairnError.self) { _ = try coordinator.queryGeneration(asOf: HistoryToken(storeID: storeID, sequence: newest + 1)) }
        #expect(future?.code == .invalidArgument)
        let other = #expect(throws: CairnError.self) { _ = try coordinator.queryGeneration(asOf: HistoryToken(storeID: "other", sequence: 1)) }
        #expect(other?.code == .invalidArgument)
        try coordinator.close()
    }

    @Test func withoutHistoryOnlyTheLogsStatesAreHeld() throws {
        let (coordinator, model) = try HistoryFeedTests.open(history: nil)
        _ = try HistoryFeedTests.saves(coordinator, model)
        let storeID = coordinator.storeID
        let past = try Self.context(coordinator, model, asOf: 1)
        #expect(try past.fetch(Person.self).map(\.username).sorted() == ["ann", "bo"])
        try coordinator.compact()
        let expired = #expect(throws: CairnError.self) { _ = try coordinator.queryGeneration(asOf: HistoryToken(storeID: storeID, sequence: 1)) }
        #expect(expired?.code == .historyExpired)
        try coordinator.close()
    }
}
