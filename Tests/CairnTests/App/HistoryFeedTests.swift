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
        #expect(history[2].tombstones == [bo: ["username": .string("bo")]], "a Person keeps its username when deleted; a DVD nothing")
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
        let (coordinator, _) = try Self.open(fs)
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

/// History across compactions: kept in the history file by the retention, read back
/// exactly, expired past it; and at every crash point of a workload with compactions,
/// the reopened store's history is exactly its committed transactions'.
@Suite struct KeptHistoryTests {
    /// A reader keeps the history file it opened with, as it keeps its snapshot: a
    /// writer's compaction that retires the file does not take the reader's history away.
    @Test func aReaderKeepsTheHistoryItOpenedWith() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let model = try Stack.model()
        var options = StoreOptions(compaction: .manual)
        options.history = .unlimited
        let writer = try Coordinator(path: directory, schema: model.schema, options: options)
        defer { try? writer.close() }
        _ = try HistoryFeedTests.saves(writer, model)
        try writer.compact()
        var reading = StoreOptions(compaction: .manual)
        reading.readOnly = true
        let reader = try Coordinator(path: directory, schema: model.schema, options: reading)
        defer { try? reader.close() }
        let seen = try reader.history(after: nil)
        #expect(seen.count == 3)
        let context = Context(coordinator: writer, model: model)
        Person(context: context).username = "dee"
        try context.save()
        try writer.compact()  // retires the history file the reader opened with
        #expect(try reader.history(after: nil) == seen, "the reader reads what it opened")
        _ = try reader.advance()
        #expect(try reader.history(after: nil).count == 4, "and the new file once it advances")
    }

    /// A reader advancing over frames with notes takes what each change did from them:
    /// the change sets name inserts, the keys updates changed, and deletes (not the
    /// delete of a record that was not there).
    @Test func aReaderTakesChangesFromTheNotes() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let model = try Stack.model()
        var options = StoreOptions(compaction: .manual)
        options.history = .unlimited
        let writer = try Coordinator(path: directory, schema: model.schema, options: options)
        defer { try? writer.close() }
        var reading = StoreOptions(compaction: .manual)
        reading.readOnly = true
        let reader = try Coordinator(path: directory, schema: model.schema, options: reading)
        defer { try? reader.close() }
        let (ann, bo, dvd) = try HistoryFeedTests.saves(writer, model)
        _ = try writer.store.commit([.delete(RecordID(entity: ann.recordID.entity, serial: 999))])
        let sets = try reader.advance()
        #expect(sets.count == 4)
        #expect(Set(sets[0].inserted) == [ann, bo])
        #expect(sets[1].updated == [ann: ["age", "name"], bo: ["dvds"]] && sets[1].inserted == [dvd])
        #expect(sets[2].deleted == [bo, dvd])
        #expect(sets[3].isEmpty, "a delete of a record that was not there changed nothing")
    }

    @Test func historySurvivesCompactionsAndReopens() throws {
        let fs = MemoryFileSystem()
        var (coordinator, model) = try HistoryFeedTests.open(fs)
        _ = try HistoryFeedTests.saves(coordinator, model)
        let first = try coordinator.history(after: nil)
        try coordinator.compact()
        #expect(try coordinator.history(after: nil) == first, "kept across the compaction, authors and changed keys too")
        let context = Context(coordinator: coordinator, model: model)
        context.transactionAuthor = "later"
        Person(context: context).username = "cy"
        try context.save()
        try coordinator.compact()
        let all = try coordinator.history(after: nil)
        #expect(all.count == 4 && Array(all.prefix(3)) == first && all.last?.author == "later")
        #expect(try coordinator.history(after: first[1].token).map(\.token.sequence) == [3, 4], "from a token inside the kept part")
        try coordinator.close()
        (coordinator, model) = try HistoryFeedTests.open(fs)
        #expect(try coordinator.history(after: nil) == all)
        #expect(try fs.listDirectory("/db").filter { $0.hasSuffix(".history") }.count == 1, "one history file, the snapshot's")
        try coordinator.close()
    }

    @Test(arguments: [HistoryRetention.transactions(2), .transactions(0), .bytes(200)])
    func retentionKeepsTheNewestAndExpiresTheRest(retention: HistoryRetention) throws {
        let (coordinator, model) = try HistoryFeedTests.open(history: retention)
        _ = try HistoryFeedTests.saves(coordinator, model)
        let first = try coordinator.history(after: nil)
        try coordinator.compact()
        let kept = try coordinator.history(after: nil)
        #expect(kept.count < first.count, "\(retention) let some go")
        #expect(kept == Array(first.suffix(kept.count)), "what is kept is the newest, without a gap")
        // The token before the oldest kept transaction is the oldest one still served.
        let expired = HistoryToken(storeID: coordinator.storeID, sequence: first[first.count - kept.count - 1].token.sequence - 1)
        let error = #expect(throws: CairnError.self) { try coordinator.history(after: expired) }
        #expect(error?.code == .historyExpired)
        if let oldestKept = kept.first {
            #expect(try coordinator.history(after: HistoryToken(storeID: coordinator.storeID, sequence: oldestKept.token.sequence - 1)) == kept)
        }
    }

    /// Each retention keeps the newest entries, as a run with no gap.
    @Test func retentionKeepsARunEndingWithTheNewest() {
        let entries = (1...10).map { HistoryEntry(sequence: UInt64($0), time: UInt64($0) * 1000, author: nil, changes: []) }
        #expect(Store.retained(entries, by: .unlimited, now: 10_000).map(\.sequence) == Array(1...10))
        #expect(Store.retained(entries, by: .transactions(3), now: 10_000).map(\.sequence) == [8, 9, 10])
        #expect(Store.retained(entries, by: .age(seconds: 2.5), now: 10_000).map(\.sequence) == [8, 9, 10])
        #expect(Store.retained(entries, by: .age(seconds: 0), now: 20_000).isEmpty)
        let frame = HistoryFileCoding.frameSize(of: entries[0])
        #expect(Store.retained(entries, by: .bytes(frame * 4 + 1), now: 0).map(\.sequence) == [7, 8, 9, 10])
        #expect(Store.retained(entries, by: .bytes(0), now: 0).isEmpty)
        // Out of range: nothing kept, all kept, never a trap.
        #expect(Store.retained(entries, by: .age(seconds: .nan), now: 20_000).isEmpty)
        #expect(Store.retained(entries, by: .age(seconds: -1), now: 20_000).isEmpty)
        #expect(Store.retained(entries, by: .age(seconds: .infinity), now: 20_000).count == 10)
        #expect(Store.retained(entries, by: .transactions(-5), now: 0).isEmpty)
        #expect(Store.retained(entries, by: .bytes(-1), now: 0).isEmpty)
    }

    @Test func damagedKeptHistoryIsReportedAndNotDropped() throws {
        let fs = MemoryFileSystem()
        var (coordinator, model) = try HistoryFeedTests.open(fs)
        _ = try HistoryFeedTests.saves(coordinator, model)
        try coordinator.compact()
        try coordinator.close()
        // Damaged at rest, then opened.
        let name = try #require(try fs.listDirectory("/db").first { $0.hasSuffix(".history") })
        var bytes = try #require(fs.contents(of: "/db/" + name))
        bytes[bytes.count - 9] ^= 0x40
        try fs.setContents(of: "/db/" + name, to: bytes)
        (coordinator, model) = try HistoryFeedTests.open(fs)
        defer { try? coordinator.close() }
        let error = #expect(throws: CairnError.self) { try coordinator.history(after: nil) }
        #expect(error?.code == .corrupt && error?.path?.hasSuffix(name) == true)
        #expect(throws: CairnError.self) { try coordinator.compact() }
        #expect(coordinator.verify().contains { $0.path?.hasSuffix(name) == true }, "verify names the damaged history file")
        #expect(fs.contents(of: "/db/" + name) == bytes, "the damaged history is kept as it is")
    }

    /// The crash workload with history kept: at every sync point, kept, dropped or
    /// garbled, the reopened store's history holds exactly one entry for each of its
    /// transactions, none more, each with the kinds its changes had.
    @Test func everySyncPointKeepsExactlyTheCommittedHistoryAndPastStates() throws {
        let fs = MemoryFileSystem()
        var options = memoryOptions(fs)
        options.history = .unlimited
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: options)
        let tracker = Locked(CrashTracker())
        // The kinds of each transaction's changes, by sequence (index 0 unused).
        let expected = Locked<[[HistoryChange]]>([[]])
        let failures = Locked<[String]>([])
        let modes: [MemoryFileSystem.CrashMode] = [.keepAll, .dropAll, .random(seed: 1), .random(seed: 2)]
        verifyCrashImagesAtEverySync(of: fs, modes: modes, tracker: tracker, adjusting: { $0.history = .unlimited }) { store in
            do {
                let entries = try store.history(after: nil).entries
                let wanted = expected.value
                guard entries.map(\.sequence) == Array(0..<store.lastSequence).map({ $0 + 1 }) else {
                    return failures.withLock { $0.append("history holds \(entries.map(\.sequence)) at \(store.lastSequence)") }
                }
                for entry in entries where entry.changes.map({ HistoryChange(id: $0.id, kind: $0.kind, slots: nil) }) != wanted[Int(entry.sequence)] {
                    failures.withLock { $0.append("transaction \(entry.sequence): \(entry.changes) is not \(wanted[Int(entry.sequence)])") }
                }
                // Past states, rebuilt from the log and the kept past values, are those
                // the transactions left.
                let last = store.lastSequence, states = tracker.value.states
                for sequence in Set([0, 1, last / 3, last / 2, last > 0 ? last - 1 : 0, last]) where sequence <= last {
                    let generation = try store.pastGeneration(at: sequence, by: "crash check")
                    if try contents(of: store, at: generation) != states[Int(sequence)] {
                        failures.withLock { $0.append("the past state after transaction \(sequence) differs, at \(last)") }
                    }
                }
            } catch {
                failures.withLock { $0.append("history unreadable: \(error)") }
            }
        }
        var workload = BlobWorkload(seed: 7)
        for index in 1...120 {
            let before = workload.model
            let changes = workload.nextTransaction(maxBlob: 40)
            var state = before, kinds: [HistoryChange] = []
            for change in changes {
                switch change {
                case .put(let id, let values):
                    kinds.append(HistoryChange(id: id, kind: state[id] == nil ? .insert : .update, slots: nil))
                    state[id] = values
                case .delete(let id):
                    if state.removeValue(forKey: id) != nil { kinds.append(HistoryChange(id: id, kind: .delete, slots: nil)) }
                }
            }
            expected.withLock { $0.append(kinds) }
            let durable = index % 5 != 0
            tracker.withLock { $0.attempted = UInt64(index); $0.states.append(workload.model) }
            let sequence = try store.commit(changes, durability: durable ? .durable : .deferred)
            if durable { tracker.withLock { $0.acknowledged = sequence } }
            if index % 30 == 0 {
                try store.compact()
                tracker.withLock { $0.acknowledged = sequence }
            }
        }
        try store.close()
        #expect(tracker.value.failures.isEmpty, "\(tracker.value.failures.prefix(3))")
        #expect(failures.value.isEmpty, "\(failures.value.prefix(3))")
        #expect(tracker.value.checked >= 400, "crash states checked: \(tracker.value.checked)")
    }
}

/// `cairn history` on a store that keeps history: tokens, authors, records with their
/// current values and changed keys, `--since` a token, across a compaction by `cairn
/// compact` (which keeps the history the app kept).
@Suite struct HistoryCommandTokenTests {
    @Test func historyPrintsTokensAuthorsAndRecords() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let model = try Stack.model()
        var options = StoreOptions(compaction: .manual)
        options.history = .unlimited
        do {
            let coordinator = try Coordinator(path: directory, schema: model.schema, options: options)
            defer { try? coordinator.close() }
            _ = try HistoryFeedTests.saves(coordinator, model)
        }
        #expect(try CLI.run(["compact", directory]).status == 0)
        let text = try CLI.run(["history", directory])
        #expect(text.status == 0, "\(text.err)")
        let lines = text.out.split(separator: "\n")
        #expect(lines.count == 3 && lines[0].hasSuffix("\tapp") && lines[2].hasSuffix("\tsync"), "\(lines)")
        let json = try CLI.run(["history", directory, "--json"]).out.split(separator: "\n")
        #expect(json.count == 3)
        #expect(json[1].contains(#""author": "sync""#) && json[1].contains(#""change": "update", "keys": ["#), "\(json[1])")
        #expect(json[1].contains(#""age": 30"#), "an update carries the record's current values: \(json[1])")
        #expect(json[2].contains(#""change": "delete""#) && json[2].contains(#""kept": {"username": "bo"}"#), "\(json[2])")
        let token = try #require(json[0].split(separator: "\"").dropFirst().first { $0.contains(":") && $0.count > 30 })
        let since = try CLI.run(["history", directory, "--since", String(token)])
        #expect(since.out.split(separator: "\n").count == 2, "\(since.out)\(since.err)")
        let wrong = try CLI.run(["history", directory, "--since", "another:1"])
        #expect(wrong.status != 0 && wrong.err.contains("another"))
    }
}

/// The changed slots a context's save notes (from what it changed) are exactly the slots
/// whose stored values differ, as decoding the record before and after finds them: over
/// random saves that set values to what they already were, back and forth, and changed.
@Suite struct NotedSlotsTests {
    @Test(arguments: [1, 2, 3] as [UInt64]) func notedSlotsAreTheSlotsThatDiffer(seed: UInt64) throws {
        let (coordinator, model) = try HistoryFeedTests.open()
        let context = Context(coordinator: coordinator, model: model)
        let people = (0..<4).map { index -> Person in
            let person = Person(context: context)
            person.username = "p\(index)"
            return person
        }
        try context.save()
        var states: [UInt64: [RecordID: [Value]]] = [:]
        func snapshot() throws -> [RecordID: [Value]] {
            var result: [RecordID: [Value]] = [:]
            for person in people { result[person.recordID] = try coordinator.store.get(person.recordID)?.values }
            return result
        }
        states[coordinator.lastSequence] = try snapshot()
        var random = SplitMix64(seed: seed)
        for _ in 0..<60 {
            for person in people where random.next() % 2 == 0 {
                switch random.next() % 4 {
                case 0: person.age = person.age                                      // the same value
                case 1: person.age = Int(random.next() % 3)                          // maybe the same
                case 2: person.name = random.next() % 2 == 0 ? nil : "n\(random.next() % 2)"
                default:
                    let age = person.age
                    person.age = age + 1
                    person.age = age                                                 // and back
                }
            }
            guard context.hasChanges else { continue }
            try context.save()
            states[coordinator.lastSequence] = try snapshot()
        }
        for entry in try coordinator.store.history(after: 1).entries {
            let before = try #require(states[entry.sequence - 1]), after = try #require(states[entry.sequence])
            for change in entry.changes where change.kind == .update {
                let was = try #require(before[change.id]), now = try #require(after[change.id])
                let differ = now.indices.filter { !Value.same(was[$0], now[$0]) }
                #expect(change.slots == differ, "transaction \(entry.sequence), \(change.id)")
            }
        }
    }
}
