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
    /// The writer (this process) moves age between two people per transaction, so every
    /// committed state has the same total, and compacts every 25 transactions, retiring
    /// the files readers opened. Each `cairn export` (another process) must print a whole
    /// committed state: every person, the same total; `stats`, `query` and `verify` must
    /// succeed. None of them may disturb the writer.
    @Test func readCommandsSeeWholeCommittedStatesWhileAWriterCommitsAndCompacts() throws {
        let (dir, data) = try CLIFixture.workspace(people: 60)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = dir + "/live"
        #expect(try CLI.run(["create", store, "--schema", dir + "/schema.json"]).status == 0)
        #expect(try CLI.run(["import", store, "--in", data]).status == 0)

        let writer = try Store.open(at: store)
        defer { try? writer.close() }
        let person = try #require(writer.schema.entity(named: "Person"))
        let age = try #require(person.attributes.firstIndex { $0.name == "age" })
        let people = writer.ids(entity: person.number)
        #expect(people.count == 60)
        func total(_ records: [Record]) -> Int64 {
            records.reduce(0) { sum, record in if case .int64(let x) = record.values[age] { sum + x } else { sum } }
        }
        let expectedTotal = total(try writer.records(entity: person.number))

        let stop = Protected(false)
        let written = Protected<Result<Int, any Error>>(.success(0))
        let finished = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
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
                }
                return commits
            }
            written.withLock { $0 = outcome }
            finished.signal()
        }

        var exports = 0
        for round in 0..<10 {
            let export = try CLI.run(["export", store])
            #expect(export.status == 0, "round \(round): \(export.err)")
            let rows = export.out.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }.filter { $0["entity"] as? String == "Person" }
            #expect(rows.count == 60, "round \(round)")
            let sum = rows.reduce(Int64(0)) { $0 + ((($1["age"] as? NSNumber)?.int64Value) ?? 0) }
            #expect(sum == expectedTotal, "round \(round): a reader saw a state no transaction committed")
            exports += 1
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
        #expect(commits >= 25 && exports == 10, "\(commits) commits: at least one compaction under the readers")
        // The writer went on throughout, and its store holds what it committed.
        #expect(total(try writer.records(entity: person.number)) == expectedTotal)
    }
}
