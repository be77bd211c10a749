import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// What every command shares: help, usage errors, the lock, and a round trip through several.
@Suite struct CLITests {
    @Test func helpAndVersion() throws {
        let help = try CLI.run(["--help"])
        #expect(help.status == 0)
        #expect(help.out.contains("USAGE: cairn"))
        let version = try CLI.run(["--version"])
        #expect(version.status == 0)
        #expect(version.out.contains("store format version \(FileHeader.currentVersion)"))
    }

    /// Every command the help lists answers `--help` with its own usage; the soak writer is
    /// a test helper, not a command of the user-facing tool.
    @Test func everyListedCommandHasItsHelp() throws {
        for command in ["create", "schema", "stats", "verify", "compact", "export", "import", "query", "history", "repair", "migrate"] {
            let result = try CLI.run([command, "--help"])
            #expect(result.status == 0 && result.out.contains("cairn \(command)"), "\(command): \(result.err)")
        }
        #expect(try CLI.run(["_soak-writer", "/tmp/nowhere"]).status == 2)
    }

    @Test func unknownCommandIsAUsageError() throws {
        let result = try CLI.run(["frobnicate"])
        #expect(result.status == 2)
        #expect(result.err.contains("unknown command 'frobnicate'"))
    }

    @Test func usageErrorsExitTwoWithAHelpfulLine() throws {
        for arguments in [["stats"], ["export", "x", "--bogus"], ["query", "x"], ["import", "x", "--batch", "many"],
                          ["create", "x"], ["frobnicate"]] {
            let result = try CLI.run(arguments)
            #expect(result.status == 2, "\(arguments)")
            #expect(result.err.hasPrefix("cairn: ") && result.err.split(separator: "\n").count == 1, "\(arguments): \(result.err)")
        }
        for command in ["create", "schema", "stats", "verify", "compact", "export", "import", "query", "history", "repair", "demo"] {
            let help = try CLI.run([command, "--help"])
            #expect(help.status == 0 && help.out.contains("USAGE: cairn \(command)"), "\(command)")
        }
        let missing = try CLI.run(["stats", "/nonexistent/store"])
        #expect(missing.status == 1 && missing.err.contains("no store at /nonexistent/store"))
    }

    @Test func aSecondWriterIsRefusedWithTheLockMessage() throws {
        let (dir, _) = try CLIFixture.workspace()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = dir + "/s"
        _ = try CLI.run(["create", store, "--schema", dir + "/schema.json"])
        let holder = try Store.open(at: store)
        defer { try? holder.close() }
        let second = try CLI.run(["import", store, "--in", dir + "/data.ndjson"])
        #expect(second.status == 1)
        #expect(second.err.contains("store at \(store) is locked by pid \(getpid())"))
    }

    @Test func createImportExportRoundTrip() throws {
        let (dir, data) = try CLIFixture.workspace()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try CLI.run(["create", dir + "/a", "--schema", dir + "/schema.json"]).status == 0)
        let imported = try CLI.run(["import", dir + "/a", "--in", data, "--batch", "4"])
        #expect(imported.status == 0, "\(imported.err)")
        // Batches of at least 4 lines, cut where no reference waits for a later line: 6, 6, 3.
        #expect(imported.out.contains("committed 6\ncommitted 12\ncommitted 15") && imported.out.contains("imported 15 records"),
                "\(imported.out)")
        let first = try CLI.run(["export", dir + "/a"])
        #expect(first.status == 0 && first.out.split(separator: "\n").count == 15)
        try first.out.write(toFile: dir + "/export.ndjson", atomically: true, encoding: .utf8)
        #expect(try CLI.run(["create", dir + "/b", "--schema", dir + "/schema.json"]).status == 0)
        #expect(try CLI.run(["import", dir + "/b", "--in", dir + "/export.ndjson"]).status == 0)
        let second = try CLI.run(["export", dir + "/b"])
        #expect(second.out == first.out, "export → import → export gives the same objects")
        #expect(try CLI.run(["schema", dir + "/b"]).out.contains(#""uniqueness": [["username"]]"#))
        let query = try CLI.run(["query", dir + "/a", "Person", "age >= %@".replacingOccurrences(of: "%@", with: "14"), "--sort", "-age", "--limit", "2"])
        #expect(query.status == 0)
        #expect(query.out.split(separator: "\n").map { $0.contains("\"age\": 28") || $0.contains("\"age\": 21") } == [true, true])
        #expect(try CLI.run(["query", dir + "/a", "DVD", "owner.username == 'user1'", "--count"]).out == "2\n")
        let stats = try CLI.run(["stats", dir + "/a", "--json"])
        #expect(stats.out.contains(#""entities": {"DVD": 10, "Person": 5}"#))
        let history = try CLI.run(["history", dir + "/a"])
        #expect(history.out.split(separator: "\n").count == 3, "15 lines in 3 batches")
    }
}
