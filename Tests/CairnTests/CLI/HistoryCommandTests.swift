import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// `cairn history`: the log's transactions, one line each, with what each changed.
@Suite struct HistoryCommandTests {
    /// Three import batches are three transactions, numbered in order, counting the
    /// inserts of each entity (in entity order); `--since` skips the earlier ones; `--json`
    /// says the same.
    @Test func listsEachTransactionWithItsChanges() throws {
        let (dir, data) = try CLIFixture.workspace()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = dir + "/s"
        #expect(try CLI.run(["create", store, "--schema", dir + "/schema.json"]).status == 0)
        #expect(try CLI.run(["import", store, "--in", data, "--batch", "4"]).status == 0)  // 6, 6, 3 lines
        let lines = try CLI.run(["history", store]).out.split(separator: "\n").map { $0.split(separator: "\t") }
        #expect(lines.count == 3)
        let sequences = lines.compactMap { $0.first.flatMap { UInt64($0) } }
        #expect(sequences.count == 3 && sequences == sequences.sorted() && Set(sequences).count == 3, "\(lines)")
        #expect(lines.first?.last == "Person +2 ~0 -0, DVD +4 ~0 -0", "\(lines)")
        #expect(lines.last?.last == "Person +1 ~0 -0, DVD +2 ~0 -0", "\(lines)")
        let since = try CLI.run(["history", store, "--since", String(sequences[0])]).out
        #expect(since.split(separator: "\n").count == 2)
        let json = try CLI.run(["history", store, "--json"]).out.split(separator: "\n")
        #expect(json.count == 3 && json[0].contains(#""Person": {"inserts": 2, "updates": 0, "deletes": 0}"#), "\(json)")
    }
}

/// `cairn export --as-of`: the state just after a transaction, from the log and, before
/// the last compaction, from the kept history's past values.
@Suite struct ExportAsOfTests {
    @Test func exportsThePastStateATokenNames() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let model = try Stack.model()
        var options = StoreOptions(compaction: .manual)
        options.history = .unlimited
        let coordinator = try Coordinator(path: dir, schema: model.schema, options: options)
        let context = Context(coordinator: coordinator, model: model)
        let ann = Person(context: context)
        ann.username = "ann"
        ann.age = 20
        try context.save()
        ann.age = 40
        Person(context: context).username = "bo"
        try context.save()
        try coordinator.compact()
        context.delete(ann)
        try context.save()
        let storeID = coordinator.storeID
        try coordinator.close()

        func people(_ arguments: [String]) throws -> [String] {
            let run = try CLI.run(["export", dir, "--entity", "Person"] + arguments)
            #expect(run.status == 0, "\(run.err)")
            return run.out.split(separator: "\n").map { line in
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                return "\(object?["username"] ?? "?") \(object?["age"] ?? "?")"
            }.sorted()
        }
        #expect(try people([]) == ["bo 0"])
        #expect(try people(["--as-of", "1"]) == ["ann 20"], "before the compaction: from the history's past values")
        #expect(try people(["--as-of", "\(storeID):2"]) == ["ann 40", "bo 0"])
        #expect(try people(["--as-of", "0"]) == [])
        let future = try CLI.run(["export", dir, "--as-of", "9"])
        #expect(future.status != 0 && future.err.contains("past the store's newest"), "\(future.err)")
        let other = try CLI.run(["export", dir, "--as-of", "other:1"])
        #expect(other.status != 0 && other.err.contains("of store other"), "\(other.err)")
    }
}
