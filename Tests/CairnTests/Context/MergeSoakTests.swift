import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Several contexts on their own threads insert, change, move and delete people and
/// their DVDs at once under one merge policy, while a sectioned live result on this
/// thread follows them. Every policy must leave the store whole (verify clean), every
/// delivered change must turn the previous rows into the new ones, and the result must
/// end equal to a fresh fetch. The workers find their objects through the context's list
/// of a class, or through fetch queries, whose rows a fault may load from after the store
/// moved on. (CI runs this under the thread sanitizer too.)
@Suite struct MergeSoakTests {
    static let workers = 4
    /// Rounds per worker (`CAIRN_SOAK_ROUNDS` raises it for a longer local run).
    static let rounds = ProcessInfo.processInfo.environment["CAIRN_SOAK_ROUNDS"].flatMap(Int.init) ?? 120

    @Test(arguments: [MergePolicy.error, .storeTrumps, .objectTrumps, .overwrite, .rollback], [false, true])
    func concurrentContextsKeepTheGraphWhole(policy: MergePolicy, throughQueries: Bool) throws {
        let stack = try Stack()
        let main = stack.context()
        var people: [Person] = []
        for index in 0..<8 {
            let person = Person(context: main)
            person.username = "seed\(index)"
            people.append(person)
        }
        for index in 0..<24 {
            let dvd = DVD(context: main)
            dvd.title = "dvd\(index)"
            dvd.owner = people[index % people.count]
        }
        try main.save()
        let request = FetchQuery(DVD.self, fetchPredicate: nil, sortKeys: [SortKey("title")])
        let results = try LiveResults(request: request, context: main, sectionKeyPath: "owner.username")
        var shown = Self.rows(of: results)
        var malformed: [String] = []
        results.onChange = { change in
            let now = Self.rows(of: results)
            if Self.apply(change, to: shown, new: now) != now.map(\.1) {
                func show(_ rows: [(String, [ObjectID])]) -> String {
                    rows.map { "\($0.0): " + $0.1.map(\.recordID.description).joined(separator: " ") }.joined(separator: " | ")
                }
                malformed.append("from \(show(shown)) by \(change) to \(show(now))")
            }
            shown = now
        }

        let coordinator = stack.coordinator, model = stack.model
        let outcomes = Locked<[String: Int]>([:])
        let running = Locked(Self.workers)
        for worker in 0..<Self.workers {
            Thread {
                defer { running.withLock { $0 -= 1 } }
                let context = Context(coordinator: coordinator, model: model)
                context.mergePolicy = policy
                var random = SplitMix64(seed: UInt64(worker) &* 7919 &+ 17)
                for _ in 0..<Self.rounds {
                    let outcome: String
                    do {
                        for _ in 0...(random.next() % 3) { try Self.randomEdit(in: context, &random, throughQueries: throughQueries) }
                        try context.save()
                        outcome = "saved"
                    } catch let error as CairnError where error.code == .conflict || error.code == .validation {
                        context.rollback()
                        outcome = "\(error.code)"
                    } catch let error as CairnError where error.code == .invalidArgument && error.message.contains("deleted") {
                        // An object another context deleted after this one fetched it.
                        context.rollback()
                        outcome = "refused"
                    } catch {
                        context.rollback()
                        outcome = "unexpected: \(error)"
                    }
                    outcomes.withLock { $0[outcome, default: 0] += 1 }
                }
            }.start()
        }
        while running.value > 0 {
            try results.refresh()
        }
        main.processExternalChanges()
        try results.refresh()

        let tally = outcomes.value
        #expect(tally.keys.allSatisfy { !$0.hasPrefix("unexpected") }, "\(policy) \(throughQueries ? "queries" : "lists"): \(tally)")
        #expect((tally["saved"] ?? 0) > Self.workers * Self.rounds / 4, "\(policy) \(throughQueries ? "queries" : "lists"): too few saves to test anything: \(tally)")
        let problems = stack.coordinator.store.verify()
        #expect(problems.isEmpty, "\(policy) \(throughQueries ? "queries" : "lists"): \(problems.prefix(5))")
        #expect(malformed.isEmpty, "\(policy) \(throughQueries ? "queries" : "lists"): \(malformed.count) delivered changes did not replay: \(malformed.prefix(2))")
        let reader = stack.context()
        let fresh = try LiveResults(request: request, context: reader, sectionKeyPath: "owner.username")
        #expect(Self.rows(of: results).map(\.0) == Self.rows(of: fresh).map(\.0), "\(policy) \(throughQueries ? "queries" : "lists"): sections differ from a fresh fetch")
        #expect(Self.rows(of: results).map(\.1) == Self.rows(of: fresh).map(\.1), "\(policy) \(throughQueries ? "queries" : "lists"): rows differ from a fresh fetch")
    }

    /// One random edit: a new person (with a username others may pick too), a new DVD,
    /// a move, a rename, a birthday, or a delete of either.
    static func randomEdit(in context: Context, _ random: inout SplitMix64, throughQueries: Bool) throws {
        let people = throughQueries ? try context.fetch(FetchQuery(Person.self)) : try context.fetch(Person.self)
        let dvds = throughQueries ? try context.fetch(FetchQuery(DVD.self)) : try context.fetch(DVD.self)
        func pick<T>(_ list: [T]) -> T? { list.isEmpty ? nil : list[Int(random.next() % UInt64(list.count))] }
        switch random.next() % 8 {
        case 0:
            let person = Person(context: context)
            person.username = "u\(random.next() % 24)"
        case 1, 2:
            let dvd = DVD(context: context)
            dvd.title = "t\(random.next() % 1000)"
            dvd.owner = pick(people)
        case 3:
            pick(dvds)?.owner = pick(people)
        case 4:
            pick(dvds)?.title = "t\(random.next() % 1000)"
        case 5:
            pick(people)?.age += 1
        case 6:
            if let dvd = pick(dvds) { context.delete(dvd) }
        default:
            if let person = pick(people), random.next() % 2 == 0 { context.delete(person) }
        }
    }

    /// The result's sections as (name, IDs).
    static func rows(of results: LiveResults<DVD>) -> [(String, [ObjectID])] {
        results.sections.map { ($0.name, $0.objects.map(\.objectID)) }
    }

    /// A change applied to `old` as a table view would, or nil where it names a row or
    /// section that is not there.
    static func apply(_ change: ResultsChange, to old: [(String, [ObjectID])], new: [(String, [ObjectID])]) -> [[ObjectID]]? {
        var sections = old.map(\.1)
        for path in (change.deleted + change.moved.map(\.from)).sorted(by: >) {
            guard sections.indices.contains(path.section), sections[path.section].indices.contains(path.item) else { return nil }
            sections[path.section].remove(at: path.item)
        }
        for index in change.deletedSections.sorted(by: >) {
            guard sections.indices.contains(index), sections[index].isEmpty else { return nil }
            sections.remove(at: index)
        }
        for index in change.insertedSections.sorted() {
            guard index <= sections.count else { return nil }
            sections.insert([], at: index)
        }
        let insertions = (change.inserted.map { ($0, nil as ObjectID?) } + change.moved.map { ($0.to, $0.objectID) })
            .sorted { $0.0 < $1.0 }
        for (path, moved) in insertions {
            guard sections.indices.contains(path.section), path.item <= sections[path.section].count,
                  new.indices.contains(path.section), new[path.section].1.indices.contains(path.item) else { return nil }
            sections[path.section].insert(moved ?? new[path.section].1[path.item], at: path.item)
        }
        return sections
    }
}
