import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// `cairn repair`: a store that refuses to open salvaged to its last good transaction.
@Suite struct RepairCommandTests {
    @Test func repairSalvagesAStoreThatRefusesToOpen() throws {
        let (dir, data) = try CLIFixture.workspace()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = dir + "/s"
        _ = try CLI.run(["create", store, "--schema", dir + "/schema.json"])
        _ = try CLI.run(["import", store, "--in", data, "--batch", "3"])  // 5 transactions
        let log = try FileManager.default.contentsOfDirectory(atPath: store).first { $0.hasSuffix(".log") }!
        var bytes = try Data(contentsOf: URL(fileURLWithPath: store + "/" + log))
        bytes[64 + 40] ^= 0x01  // inside the first transaction; durable ones follow
        try bytes.write(to: URL(fileURLWithPath: store + "/" + log))
        let refused = try CLI.run(["stats", store])
        #expect(refused.status == 1 && refused.err.contains("offset 64"), "\(refused.err)")
        let repair = try CLI.run(["repair", store])
        #expect(repair.status == 0, "\(repair.err)")
        #expect(repair.out.contains(log + ".damaged") && repair.out.contains("lost: transactions 2, 3, 4, 5"), "\(repair.out)")
        #expect(try CLI.run(["stats", store]).status == 0)
        #expect(FileManager.default.fileExists(atPath: store + "/" + log + ".damaged"))
    }

    /// A store whose log was cut to half under its checkpoint, as the CLI meets it: every
    /// command refuses it (exit 1), naming the log and what the checkpoint shows, and
    /// changes no file; `cairn repair` keeps both files' copies, reports the transactions
    /// lost, and the store verifies after it.
    @Test func aLogCutUnderItsCheckpointIsRefusedThenRepaired() throws {
        let (dir, store, file) = try CLIFixture.storeAndFile((0..<9_000).map { #"{"entity": "Person", "username": "u\#($0)"}"# })
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try CLI.run(["import", store, "--in", file, "--batch", "1000"]).status == 0)
        let names = try FileManager.default.contentsOfDirectory(atPath: store)
        let log = try #require(names.first { $0.hasSuffix(".log") }), checkpoint = try #require(names.first { $0.hasSuffix(".checkpoint") })
        let logURL = URL(fileURLWithPath: store + "/" + log)
        let bytes = try Data(contentsOf: logURL)
        let end = try #require(bytes.lastIndex { $0 != 0 })  // (past it: space reserved ahead)
        try bytes.prefix(end / 2).write(to: logURL)
        let before = try FileManager.default.contentsOfDirectory(atPath: store).sorted().map { name in
            (name, try Data(contentsOf: URL(fileURLWithPath: store + "/" + name)))
        }.filter { $0.0 != "LOCK" }
        for command in [["stats", store], ["export", store], ["query", store, "Person", "--count"], ["verify", store]] {
            let refused = try CLI.run(command)
            #expect(refused.status == 1, "\(command)")
            #expect(refused.err.contains(log) && refused.err.contains(checkpoint) && refused.err.contains("repair"), "\(command): \(refused.err)")
        }
        let after = try FileManager.default.contentsOfDirectory(atPath: store).sorted().map { name in
            (name, try Data(contentsOf: URL(fileURLWithPath: store + "/" + name)))
        }.filter { $0.0 != "LOCK" }
        #expect(after.map(\.0) == before.map(\.0) && zip(after, before).allSatisfy { $0.1 == $1.1 }, "no file changed")
        let repair = try CLI.run(["repair", store])
        #expect(repair.status == 0, "\(repair.err)")
        #expect(repair.out.contains(log + ".damaged") && repair.out.contains(checkpoint + ".damaged") && repair.out.contains("lost: transactions"),
                "\(repair.out)")
        #expect(try CLI.run(["verify", store]).status == 0)
    }
}
