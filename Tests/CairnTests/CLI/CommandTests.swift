import Foundation
import Testing
@testable import Cairn
@_spi(Storage) @testable import CairnStorage

/// The commands run as a user would: arguments in; exit codes, output and files out.
@Suite struct CommandTests {
    static let schema = """
        {"version": 1,
         "entities": [
          {"name": "Person",
           "attributes": [
             {"name": "username", "type": "string"},
             {"name": "name", "type": "string", "optional": true},
             {"name": "age", "type": "int64", "default": 0, "indexed": true}],
           "relationships": [
             {"name": "dvds", "destination": "DVD", "toMany": true, "inverse": "owner", "deleteRule": "cascade"}],
           "uniqueness": [["username"]]},
          {"name": "DVD",
           "attributes": [
             {"name": "title", "type": "string"},
             {"name": "purchaseDate", "type": "date", "optional": true}],
           "relationships": [
             {"name": "owner", "destination": "Person", "inverse": "dvds", "deleteRule": "nullify", "optional": true}]}]}
        """

    /// A work directory with the schema file and a data file of `people` people, 2 DVDs each.
    func workspace(people: Int = 5) throws -> (dir: String, data: String) {
        let dir = temporaryDirectory()
        try Self.schema.write(toFile: dir + "/schema.json", atomically: true, encoding: .utf8)
        var lines: [String] = []
        for p in 0..<people {
            lines.append(#"{"entity": "Person", "id": "p\#(p)", "username": "user\#(p)", "name": "Name \#(p)", "age": \#(p * 7 % 60), "dvds": ["d\#(p)a", "d\#(p)b"]}"#)
            for suffix in ["a", "b"] {
                lines.append(#"{"entity": "DVD", "id": "d\#(p)\#(suffix)", "title": "Film \#(p)\#(suffix)", "purchaseDate": "2021-0\#(p % 9 + 1)-01T00:00:00.000Z", "owner": "p\#(p)"}"#)
            }
        }
        try lines.joined(separator: "\n").write(toFile: dir + "/data.ndjson", atomically: true, encoding: .utf8)
        return (dir, dir + "/data.ndjson")
    }

    @Test func createImportExportRoundTrip() throws {
        let (dir, data) = try workspace()
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

    /// `stats` and `history` show the latest commit time a log frame can say (2^64 − 1 ms,
    /// under a good checksum: about 1.8e16 s, finite, which Foundation formats) without
    /// trapping.
    @Test func commitTimesOutOfRangeAreShown() throws {
        let (dir, data) = try workspace(people: 2)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try CLI.run(["create", dir + "/a", "--schema", dir + "/schema.json"]).status == 0)
        #expect(try CLI.run(["import", dir + "/a", "--in", data]).status == 0)
        let logs = try FileManager.default.contentsOfDirectory(atPath: dir + "/a").filter { $0.hasSuffix(".log") }
        var patched = 0
        for name in logs {
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/a/" + name)))
            var at = FileHeader.size
            while at + LogFrame.headerSize <= bytes.count, bytes[at + 24] == LogFrame.typeTransaction {
                let length = bytes.withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: at + 4, as: UInt32.self))) }
                for k in 0..<8 { bytes[at + LogFrame.headerSize + k] = 0xFF }  // the payload's time field
                let crc = CRC32C.masked(bytes[(at + 4)..<(at + LogFrame.headerSize + length)])
                withUnsafeBytes(of: crc.littleEndian) { for k in 0..<4 { bytes[at + k] = $0[k] } }
                at += LogFrame.frameSize(payloadLength: length)
                patched += 1
            }
            try Data(bytes).write(to: URL(fileURLWithPath: dir + "/a/" + name))
        }
        #expect(patched >= 1)
        let stats = try CLI.run(["stats", dir + "/a"])
        #expect(stats.status == 0 && stats.out.contains("last sequence"), "\(stats.err)")
        let history = try CLI.run(["history", dir + "/a"])
        #expect(history.status == 0 && history.out.split(separator: "\n").count == patched, "\(history.err)")
    }

    @Test func verifyNamesTheOffsetOfAFlippedByte() throws {
        let (dir, data) = try workspace()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = dir + "/s"
        _ = try CLI.run(["create", store, "--schema", dir + "/schema.json"])
        _ = try CLI.run(["import", store, "--in", data, "--batch", "5"])
        #expect(try CLI.run(["verify", store]).status == 0)
        _ = try CLI.run(["compact", store])
        let snapshot = try FileManager.default.contentsOfDirectory(atPath: store).first { $0.hasSuffix(".snapshot") }!
        var bytes = try Data(contentsOf: URL(fileURLWithPath: store + "/" + snapshot))
        let target = 64 + 80  // inside the first records, after the header and schema block
        bytes[target] ^= 0x20
        try bytes.write(to: URL(fileURLWithPath: store + "/" + snapshot))
        let verify = try CLI.run(["verify", store])
        #expect(verify.status == 1)
        #expect((verify.out + verify.err).contains(snapshot) && (verify.out + verify.err).contains("at offset"), "\(verify.out) \(verify.err)")
    }

    @Test func compactShrinksAStoreWithGarbageAndKeepsTheExport() throws {
        let (dir, data) = try workspace(people: 20)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = dir + "/s"
        _ = try CLI.run(["create", store, "--schema", dir + "/schema.json"])
        _ = try CLI.run(["import", store, "--in", data, "--batch", "5"])
        do {  // Rewrite every record twice: the log now holds dead versions.
            let opened = try Store.open(at: store)
            for _ in 0..<2 {
                for entity in opened.schema.entities {
                    try opened.commit(try opened.records(entity: entity.number).map { .put($0.id, $0.values) })
                }
            }
            try opened.close()
        }
        let stats = try CLI.run(["stats", store, "--json"]).out
        #expect(!stats.contains(#""garbageRatio": 0,"#), "\(stats)")
        let before = try CLI.run(["export", store]).out
        let sizeBefore = try directorySize(store)
        let compact = try CLI.run(["compact", store])
        #expect(compact.status == 0 && compact.out.contains("compacted"))
        #expect(try CLI.run(["export", store]).out == before)
        #expect(try directorySize(store) < sizeBefore)
    }

    func directorySize(_ path: String) throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: path).reduce(0) { total, name in
            total + ((try FileManager.default.attributesOfItem(atPath: path + "/" + name)[.size] as? Int) ?? 0)
        }
    }

    @Test func aSecondWriterIsRefusedWithTheLockMessage() throws {
        let (dir, _) = try workspace()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = dir + "/s"
        _ = try CLI.run(["create", store, "--schema", dir + "/schema.json"])
        let holder = try Store.open(at: store)
        defer { try? holder.close() }
        let second = try CLI.run(["import", store, "--in", dir + "/data.ndjson"])
        #expect(second.status == 1)
        #expect(second.err.contains("store at \(store) is locked by pid \(getpid())"))
    }

    /// Lines are numbered as the file's, across blank lines (spaces, a lone carriage
    /// return) and CRLF endings; a line that is not JSON stops the import there, and the
    /// batch it would have ended is not committed.
    @Test func importCountsLinesAcrossBlankLinesAndCRLF() throws {
        let (dir, _) = try workspace()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = dir + "/s"
        _ = try CLI.run(["create", store, "--schema", dir + "/schema.json"])
        let text = [#"{"entity": "Person", "id": "a", "username": "ann", "dvds": ["d"]}"#, "", "   \t",
                    #"{"entity": "DVD", "id": "d", "title": "T\u00e9 \"q\"", "owner": "a"}"#, "\r",
                    #"{"entity": "Person", "username": "bo"}"#, #"{"entity": "Person", "username": "x"#,
                    #"{"entity": "Person", "username": "never"}"#].joined(separator: "\r\n")
        try text.write(toFile: dir + "/crlf.ndjson", atomically: true, encoding: .utf8)
        let result = try CLI.run(["import", store, "--in", dir + "/crlf.ndjson", "--batch", "2"])
        #expect(result.status == 1)
        #expect(result.err.contains("line 7: invalid JSON"), "\(result.err)")
        #expect(result.out.contains("committed 2") && !result.out.contains("committed 3"), "\(result.out)")
        #expect(try CLI.run(["query", store, "Person", "--count"]).out == "1\n")
        let dvd = try CLI.run(["query", store, "DVD"]).out
        #expect(dvd.contains(#""title": "Té \"q\"""#), "\(dvd)")
    }

    @Test func badLinesStopTheImportAfterEarlierBatches() throws {
        let (dir, data) = try workspace()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = dir + "/s"
        _ = try CLI.run(["create", store, "--schema", dir + "/schema.json"])
        var lines = try String(contentsOfFile: data, encoding: .utf8).split(separator: "\n").map(String.init)
        lines.insert(#"{"entity": "Person", "username": "x", "age": "old"}"#, at: 9)
        try lines.joined(separator: "\n").write(toFile: dir + "/bad.ndjson", atomically: true, encoding: .utf8)
        let result = try CLI.run(["import", store, "--in", dir + "/bad.ndjson", "--batch", "3"])
        #expect(result.status == 1)
        #expect(result.err.contains("line 10: Person.age: expected a whole number"), "\(result.err)")
        #expect(result.out.contains("committed 9"))
        #expect(try CLI.run(["query", store, "Person", "--count"]).out == "3\n")
    }

    /// An import killed at a random moment: the store verifies and holds at least every
    /// batch the import reported committed.
    @Test func importKilledMidwayKeepsCommittedBatches() throws {
        let (dir, data) = try workspace(people: 300)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for round in 0..<3 {
            let store = dir + "/s\(round)"
            _ = try CLI.run(["create", store, "--schema", dir + "/schema.json"])
            let process = Process()
            process.executableURL = CLI.binary
            process.arguments = ["import", store, "--in", data, "--batch", "30"]
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            var reported = 0
            var buffer = ""
            let wanted = 2 + round * 3
            while reported < wanted {
                let chunk = out.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                buffer += String(decoding: chunk, as: UTF8.self)
                reported = buffer.split(separator: "\n").compactMap { $0.hasPrefix("committed ") ? Int($0.dropFirst(10)) : nil }.max() ?? 0
                if buffer.split(separator: "\n").filter({ $0.hasPrefix("committed") }).count >= wanted { break }
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let opened = try Store.open(at: store)
            let total = opened.schema.entities.reduce(0) { $0 + opened.count(entity: $1.number) }
            #expect(total >= reported, "round \(round): \(total) records, \(reported) reported")
            try opened.close()
            // Batches are cut only where every reference is satisfied: whatever landed
            // verifies clean, references and inverses included.
            let verify = try CLI.run(["verify", store])
            #expect(verify.status == 0, "\(verify.out)\(verify.err)")
        }
    }

    @Test func repairSalvagesAStoreThatRefusesToOpen() throws {
        let (dir, data) = try workspace()
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
}

@Suite struct MigrateCommandTests {
    @Test func dryRunThenMigrate() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try CommandTests.schema.write(toFile: dir + "/v1.json", atomically: true, encoding: .utf8)
        let v2 = CommandTests.schema
            .replacingOccurrences(of: #"{"version": 1,"#, with: #"{"version": 2,"#)
            .replacingOccurrences(of: #"{"name": "username", "type": "string"}"#,
                                  with: #"{"name": "handle", "type": "string", "renamingIdentifier": "username"}, {"name": "email", "type": "string", "optional": true}"#)
            .replacingOccurrences(of: #""uniqueness": [["username"]]"#, with: #""uniqueness": [["handle"]]"#)
        try v2.write(toFile: dir + "/v2.json", atomically: true, encoding: .utf8)
        _ = try CLI.run(["create", dir + "/s", "--schema", dir + "/v1.json"])
        try #"{"entity": "Person", "username": "ann", "age": 3}"#.write(toFile: dir + "/d.ndjson", atomically: true, encoding: .utf8)
        _ = try CLI.run(["import", dir + "/s", "--in", dir + "/d.ndjson"])
        let dry = try CLI.run(["migrate", dir + "/s", "--to", dir + "/v2.json", "--dry-run"])
        #expect(dry.status == 0 && dry.out.contains("rename Person.username to handle") && dry.out.contains("add optional Person.email"), "\(dry.out)\(dry.err)")
        #expect(try CLI.run(["schema", dir + "/s"]).out.contains("username"), "a dry run changes nothing")
        let real = try CLI.run(["migrate", dir + "/s", "--to", dir + "/v2.json"])
        #expect(real.status == 0, "\(real.err)")
        let exported = try CLI.run(["export", dir + "/s"]).out
        #expect(exported.contains(#""handle": "ann", "email": null"#), "\(exported)")
        #expect(try CLI.run(["verify", dir + "/s"]).status == 0)
        #expect(try CLI.run(["migrate", dir + "/s"]).status == 2)
    }
}
