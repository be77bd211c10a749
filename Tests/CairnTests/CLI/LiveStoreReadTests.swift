import CairnCollections
import Dispatch
import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// The `cairn` read commands on a store another process writes: each is a reader in a
/// process of its own (FORMAT.md §13), so it runs beside the writer and sees one
/// committed state.
@Suite struct LiveStoreReadTests {
    /// A workspace (removed by the caller) with a store of `people` people, 2 DVDs each,
    /// made by `cairn create` and `cairn import`.
    static func liveStore(people: Int) throws -> (dir: String, store: String) {
        let (dir, data) = try CLIFixture.workspace(people: people)
        let store = dir + "/live"
        #expect(try CLI.run(["create", store, "--schema", dir + "/schema.json"]).status == 0)
        #expect(try CLI.run(["import", store, "--in", data]).status == 0)
        return (dir, store)
    }

    /// The store opened by this process as its writer, with its Person entity, the slot
    /// of `age`, and the people's IDs.
    static func openWriter(_ store: String) throws -> (Store, EntityDescription, Int, [RecordID]) {
        let writer = try Store.open(at: store)
        do {
            let person = try #require(writer.schema.entity(named: "Person"))
            let age = try #require(person.attributes.firstIndex { $0.name == "age" })
            return (writer, person, age, writer.ids(entity: person.number))
        } catch {
            try? writer.close()
            throw error
        }
    }

    /// The writer (this process) moves age between two people per transaction, so every
    /// committed state has the same total, and compacts every 25 transactions, retiring
    /// the files readers opened. Each `cairn export` (another process) must print a whole
    /// committed state: every person, the same total; `stats`, `query` and `verify` must
    /// succeed. None of them may disturb the writer.
    @Test func readCommandsSeeWholeCommittedStatesWhileAWriterCommitsAndCompacts() throws {
        let (dir, store) = try Self.liveStore(people: 60)
        defer { try? FileManager.default.removeItem(atPath: dir) }

        let (writer, person, age, people) = try Self.openWriter(store)
        defer { try? writer.close() }
        #expect(people.count == 60)
        func total(_ records: [Record]) -> Int64 {
            records.reduce(0) { sum, record in if case .int64(let x) = record.values[age] { sum + x } else { sum } }
        }
        let expectedTotal = total(try writer.records(entity: person.number))

        let stop = Protected(false)
        let progress = Protected(0)  // commits so far
        let written = Protected<Result<Int, any Error>>(.success(0))
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {  // a thread of its own: a Dispatch worker may not be free
            var random = SplitMix64(seed: 58)
            var commits = 0
            let outcome = Result<Int, any Error> {
                while !stop.withLock({ $0 }) {
                    let a = people[Int(random.next() % UInt64(people.count))]
                    let b = people[Int(random.next() % UInt64(people.count))]
                    guard a != b, var from = try writer.get(a)?.values, var to = try writer.get(b)?.values,
                          case .int64(let x) = from[age], case .int64(let y) = to[age] else { continue }
                    let amount = Int64(random.next() % 5)
                    from[age] = .int64(x - amount)
                    to[age] = .int64(y + amount)
                    try writer.commit([.put(a, from), .put(b, to)], durability: .deferred)
                    commits += 1
                    if commits % 25 == 0 { _ = try writer.compact() }
                    progress.withLock { $0 = commits }
                }
                return commits
            }
            written.withLock { $0 = outcome }
            finished.signal()
        }

        var exports = 0
        for round in 0..<10 {
            // Each round reads after the writer went on (ten commits a round: a compaction
            // every two and a half), however busy the machine.
            let deadline = Date().addingTimeInterval(60)
            while progress.withLock({ $0 }) < round * 10 + 1 && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
            let export = try CLI.run(["export", store])
            #expect(export.status == 0, "round \(round): \(export.err)")
            let rows = export.out.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }.filter { $0["entity"] as? String == "Person" }
            #expect(rows.count == 60, "round \(round)")
            let sum = rows.reduce(Int64(0)) { $0 + ((($1["age"] as? NSNumber)?.int64Value) ?? 0) }
            #expect(sum == expectedTotal, "round \(round): a reader saw a state no transaction committed")
            exports += 1
            if round == 5 {
                // A live export is a point-in-time backup: imported into a new store, it
                // exports again line for line.
                try export.out.write(toFile: dir + "/backup.ndjson", atomically: true, encoding: .utf8)
                #expect(try CLI.run(["create", dir + "/restored", "--schema", dir + "/schema.json"]).status == 0)
                let restored = try CLI.run(["import", dir + "/restored", "--in", dir + "/backup.ndjson"])
                #expect(restored.status == 0, "\(restored.err)")
                let again = try CLI.run(["export", dir + "/restored"])
                #expect(Set(again.out.split(separator: "\n")) == Set(export.out.split(separator: "\n")))
            }
            if round % 3 == 0 {
                let stats = try CLI.run(["stats", store])
                #expect(stats.status == 0 && stats.out.contains("Person: 60 records"), "\(stats.out)\(stats.err)")
                let count = try CLI.run(["query", store, "Person", "age >= -1000000", "--count"])
                #expect(count.status == 0 && count.out.trimmingCharacters(in: .whitespacesAndNewlines) == "60", "\(count.out)\(count.err)")
                let verify = try CLI.run(["verify", store])
                #expect(verify.status == 0, "\(verify.out)\(verify.err)")
            }
        }
        stop.withLock { $0 = true }
        finished.wait()
        let commits = try written.withLock { try $0.get() }
        #expect(commits > 90 && exports == 10, "\(commits) commits: several compactions under the readers")
        // The writer went on throughout, and its store holds what it committed.
        #expect(total(try writer.records(entity: person.number)) == expectedTotal)
    }

    /// A `cairn` process left running, its standard output gathered as it comes.
    final class Follower: Sendable {
        let process = Process()
        let output = Protected("")

        init(_ arguments: [String]) throws {
            process.executableURL = CLI.binary
            process.arguments = arguments
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = FileHandle.nullDevice
            let output = self.output
            pipe.fileHandleForReading.readabilityHandler = { handle in
                let data = handle.availableData
                output.withLock { $0 += String(decoding: data, as: UTF8.self) }
            }
            try process.run()
        }

        /// Waits up to 20 s for the output to satisfy `done`; the output then.
        func await(_ done: (String) -> Bool) -> String {
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline {
                let text = output.withLock { $0 }
                if done(text) { return text }
                Thread.sleep(forTimeInterval: 0.02)
            }
            return output.withLock { $0 }
        }

        /// Interrupts it, as a person at a terminal would; it must end within 10 s (then
        /// it is killed, so that a command that ignores the interrupt fails the test
        /// rather than hangs it).
        func stop() {
            process.interrupt()
            let deadline = Date().addingTimeInterval(10)
            while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
            if process.isRunning {
                Issue.record("cairn \(process.arguments ?? []) did not end when interrupted")
                kill(process.processIdentifier, SIGKILL)
            }
            process.waitUntilExit()
        }
    }

    /// `query --follow` and `history --follow` keep printing as the writer commits: the
    /// query the objects that entered, changed or left its result, the history each
    /// transaction, across a compaction too.
    @Test func queryAndHistoryFollowTheWriter() throws {
        let (dir, store) = try Self.liveStore(people: 3)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (writer, _, age, people) = try Self.openWriter(store)
        defer { try? writer.close() }

        let query = try Follower(["query", store, "Person", "age >= 50", "--follow"])
        defer { query.stop() }
        let history = try Follower(["history", store, "--follow"])
        defer { history.stop() }
        let count = try Follower(["query", store, "Person", "age >= 50", "--count", "--follow"])
        defer { count.stop() }
        #expect(!count.await { $0.hasSuffix("0\n") }.isEmpty)
        let before = history.await { $0.split(separator: "\n").count >= 1 }

        var first = try #require(try writer.get(people[0])?.values)
        first[age] = .int64(77)
        try writer.commit([.put(people[0], first)])
        let entered = query.await { $0.contains(#""age": 77"#) }
        #expect(entered.contains(#""username": "user0""#) && entered.contains(#""age": 77"#), "\(entered)")
        #expect(count.await { $0.hasSuffix("1\n") }.hasSuffix("1\n"))

        _ = try writer.compact()
        first[age] = .int64(3)
        try writer.commit([.put(people[0], first)])
        let left = query.await { $0.contains(#""removed": true"#) }
        #expect(left.contains(#"{"entity": "Person", "id": "\#(people[0])", "removed": true}"#), "\(left)")
        #expect(count.await { $0.hasSuffix("0\n") }.split(separator: "\n") == ["0", "1", "0"])

        let lines = history.await { $0.split(separator: "\n").count >= before.split(separator: "\n").count + 2 }
        let added = lines.split(separator: "\n").dropFirst(before.split(separator: "\n").count)
        #expect(added.count == 2 && added.allSatisfy { $0.contains("Person +0 ~1 -0") }, "\(lines)")
    }
}
