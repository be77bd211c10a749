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
