import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// History as an app reads it: each transaction's inserts, updates with the properties
/// they changed, deletes, time and author; tokens to resume from; what changed since a
/// token with the current values; a feed of transactions as they commit.
@Suite struct HistoryFeedTests {
    /// A coordinator on an in-memory store, keeping history unless `history` is nil.
    static func open(_ fs: MemoryFileSystem = MemoryFileSystem(), history: HistoryRetention? = .unlimited,
                     streamed: Bool = false) throws -> (Coordinator, Model) {
        let model = try Stack.model()
        var options = memoryOptions(fs, streamed: streamed)
        options.history = history
        return (try Coordinator(path: "/db", schema: model.schema, options: options), model)
    }

    /// Three saves: ann and bo in; ann's age and name changed, bo's DVD in; bo out (with the DVD, cascading).
    static func saves(_ coordinator: Coordinator, _ model: Model) throws -> (ann: ObjectID, bo: ObjectID, dvd: ObjectID) {
        let context = Context(coordinator: coordinator, model: model)
        context.transactionAuthor = "app"
        let ann = Person(context: context), bo = Person(context: context)
        ann.username = "ann"
        bo.username = "bo"
        try context.save()
        ann.age = 30
        ann.name = "Ann"
        let dvd = DVD(context: context)
        dvd.title = "Alien"
        dvd.owner = bo
        context.transactionAuthor = "sync"
        try context.save()
        context.delete(bo)
        try context.save()
        return (ann.objectID, bo.objectID, dvd.objectID)
    }

    @Test func eachTransactionSaysWhatItDidAndWho() throws {
        let (coordinator, model) = try Self.open()
        let (ann, bo, dvd) = try Self.saves(coordinator, model)
        let history = try coordinator.history(after: nil)
        #expect(history.map(\.token.sequence) == [1, 2, 3])
        #expect(history.map(\.author) == ["app", "sync", "sync"])
        #expect(Set(history[0].inserted) == [ann, bo] && history[0].updated.isEmpty && history[0].deleted.isEmpty)
        #expect(history[1].inserted == [dvd])
        #expect(history[1].updated == [ann: ["age", "name"], bo: ["dvds"]], "the properties each update changed, an inverse too")
        #expect(Set(history[2].deleted) == [bo, dvd], "the cascade's delete with the object's")
        #expect(history[2].updated.isEmpty)
        #expect(history.allSatisfy { abs($0.date.timeIntervalSinceNow) < 60 })

        let after = try coordinator.history(after: history[0].token)
        #expect(after == Array(history.dropFirst()))
        #expect(try coordinator.history(after: coordinator.historyToken).isEmpty)
    }

    @Test func changesSinceATokenCarryTheCurrentValues() throws {
        let (coordinator, model) = try Self.open()
        let start = coordinator.historyToken
        let (ann, bo, dvd) = try Self.saves(coordinator, model)
        let changes = try coordinator.changes(since: start)
        #expect(changes.transactions.count == 3)
        #expect(changes.token == coordinator.historyToken)
        #expect(Set(changes.current.keys) == [ann], "deleted objects are not current")
        #expect(changes.current[ann]?["age"] == .int64(30) && changes.current[ann]?["name"] == .string("Ann"))
        _ = (bo, dvd)
        #expect(try coordinator.changes(since: changes.token).transactions.isEmpty)
    }

    @Test func tokensAreCodableAndOrdered() throws {
        let (coordinator, model) = try Self.open()
        _ = try Self.saves(coordinator, model)
        let tokens = try coordinator.history(after: nil).map(\.token)
        #expect(tokens == tokens.sorted())
        let data = try JSONEncoder().encode(tokens[1])
        #expect(try JSONDecoder().decode(HistoryToken.self, from: data) == tokens[1])
        #expect(HistoryToken(tokens[1].description) == tokens[1])
        #expect(HistoryToken("no colon") == nil && HistoryToken(":5") == nil)
        let other = HistoryToken(storeID: "another", sequence: 1)
        #expect(throws: CairnError.self) { try coordinator.history(after: other) }
        let ahead = HistoryToken(storeID: coordinator.storeID, sequence: 99)
        #expect(throws: CairnError.self) { try coordinator.history(after: ahead) }
    }

    @Test func aStoreWithoutHistoryStillTellsKindsFromItsLog() throws {
        let (coordinator, model) = try Self.open(history: nil)
        let (ann, bo, _) = try Self.saves(coordinator, model)
        let history = try coordinator.history(after: nil)
        #expect(history.map(\.author) == [nil, nil, nil], "no notes: no author")
        #expect(Set(history[0].inserted) == [ann, bo])
        #expect(history[1].updated.keys.sorted() == [ann, bo].sorted() && history[1].updated[ann] == [])
        #expect(history[2].deleted.count == 2)
    }

    @Test func historyTheLogNoLongerHoldsIsExpiredNeverAGap() throws {
        let (coordinator, model) = try Self.open(history: nil)
        _ = try Self.saves(coordinator, model)
        let first = try #require(try coordinator.history(after: nil).first?.token)
        try coordinator.compact()
        let error = #expect(throws: CairnError.self) { try coordinator.history(after: first) }
        #expect(error?.code == .historyExpired)
        #expect(try coordinator.history(after: coordinator.historyToken).isEmpty, "the newest token is never expired")
    }

    @Test func historySurvivesAReopen() throws {
        let fs = MemoryFileSystem()
        var (coordinator, model) = try Self.open(fs)
        _ = try Self.saves(coordinator, model)
        let before = try coordinator.history(after: nil)
        try coordinator.close()
        (coordinator, model) = try Self.open(fs)
        #expect(try coordinator.history(after: nil) == before)
        try coordinator.close()
    }

    /// A transaction's notes are made against the transactions before it in the same
    /// group commit: eight threads insert, update and delete the same few records at once.
    @Test func concurrentSavesAreNotedInCommitOrder() throws {
        let fs = MemoryFileSystem()
        let (coordinator, model) = try Self.open(fs)
        let store = coordinator.store
        let entity = try #require(coordinator.entity(named: "Person")).number
        let ids = try (0..<4).map { _ in try store.allocateID(entity: entity) }
        let done = Locked(0)
        for thread in 0..<8 {
            Thread.detachNewThread {
                var random = SplitMix64(seed: UInt64(thread))
                for step in 0..<60 {
                    let id = ids[Int(random.next() % UInt64(ids.count))]
                    let change: Change = random.next() % 3 == 0 ? .delete(id)
                        : .put(id, [.string("p\(thread)-\(step)"), .null, .int64(Int64(random.next() % 3)), .references([]), .references([])])
                    _ = try? store.commit([change])
                }
                done.withLock { $0 += 1 }
            }
        }
        while done.value < 8 { Thread.sleep(forTimeInterval: 0.01) }
        // Replaying the history's kinds gives a state in which every insert finds its
        // record absent, every update and delete finds it present.
        var present = Set<RecordID>()
        for entry in try store.history(after: nil).entries {
            for change in entry.changes {
                switch change.kind {
                case .insert: #expect(present.insert(change.id).inserted, "insert of a present \(change.id) at \(entry.sequence)")
                case .update: #expect(present.contains(change.id), "update of an absent \(change.id) at \(entry.sequence)")
                case .delete: #expect(present.remove(change.id) != nil, "delete of an absent \(change.id) at \(entry.sequence)")
                }
            }
        }
        #expect(present == Set(ids.filter { store.contains($0) }))
    }

    @Test func theFeedDeliversEachTransactionAsItCommits() async throws {
        let (coordinator, model) = try Self.open()
        let start = coordinator.historyToken
        let writer = Task.detached {
            let context = Context(coordinator: coordinator, model: model)
            for index in 0..<5 {
                Person(context: context).username = "p\(index)"
                try context.save()
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        var seen: [UInt64] = []
        for try await transaction in coordinator.transactions(after: start, every: .milliseconds(5)) {
            seen.append(transaction.token.sequence)
            #expect(transaction.inserted.count == 1)
            if seen.count == 5 { break }
        }
        try await writer.value
        #expect(seen == [1, 2, 3, 4, 5])
    }
}
