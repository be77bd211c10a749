import Foundation
import Testing
@testable import Cairn
@_spi(Storage) @testable import CairnStorage

/// The CLI keeps its promises at the edges: concurrent creates, exports that check what
/// they read, exact round trips.
@Suite struct CLITrustTests {
    /// Six `cairn create` runs on one directory at once: exactly one succeeds, the others
    /// are told the store exists or is locked.
    @Test func oneOfSeveralConcurrentCreatesWins() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try CommandTests.schema.write(toFile: dir + "/schema.json", atomically: true, encoding: .utf8)
        for round in 0..<16 {
            let store = dir + "/store\(round)"
            let processes = (0..<6).map { _ -> (Process, Pipe) in
                let process = Process()
                process.executableURL = CLI.binary
                process.arguments = ["create", store, "--schema", dir + "/schema.json"]
                let err = Pipe()
                process.standardError = err
                process.standardOutput = Pipe()
                return (process, err)
            }
            for (process, _) in processes { try process.run() }
            var succeeded = 0
            for (process, err) in processes {
                let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                if process.terminationStatus == 0 {
                    succeeded += 1
                } else {
                    #expect(message.contains("already exists") || message.contains("locked"), "round \(round): \(message)")
                }
            }
            #expect(succeeded == 1, "round \(round): \(succeeded) creates reported success")
        }
    }

    /// A record whose checksum holds but which does not fit the schema (one value of two)
    /// makes export fail naming it, as verify and query do, not print nulls.
    @Test func exportRefusesARecordThatDoesNotFitTheSchema() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try Store.open(at: dir, schema: TestSchemas.blobs)
        try store.commit([.put(RecordID(entity: 1, serial: 1), [.string("a"), .bytes(Data([1]))])])
        let end = try #require(store.log.withLock { $0?.appendOffset })
        try store.close()
        let logPath = dir + "/" + StoreFileName.log(2)
        var bytes = Array(try [UInt8](Data(contentsOf: URL(fileURLWithPath: logPath)))[..<end])
        var frame = ByteWriter()
        LogFrame.append(to: &frame, sequence: 2, syncedThrough: 1) {
            TransactionCoding.encode([.put(RecordID(entity: 1, serial: 2), body: ValueCoding.encode([.string("only one")]))],
                                     timestamp: 0, into: &$0)
        }
        bytes += frame.bytes
        try Data(bytes).write(to: URL(fileURLWithPath: logPath))
        let result = try CLI.run(["export", dir])
        #expect(result.status == 1)
        #expect(result.err.contains("E1-2") && result.err.contains("schema"), "\(result.err)")
    }

    /// A store made with CommandTests' schema (Person ↔ DVD, unique usernames), and a
    /// file of `lines` to import.
    func storeAndFile(_ lines: [String]) throws -> (dir: String, store: String, file: String) {
        let dir = temporaryDirectory()
        try CommandTests.schema.write(toFile: dir + "/schema.json", atomically: true, encoding: .utf8)
        #expect(try CLI.run(["create", dir + "/s", "--schema", dir + "/schema.json"]).status == 0)
        try lines.joined(separator: "\n").write(toFile: dir + "/in.ndjson", atomically: true, encoding: .utf8)
        return (dir, dir + "/s", dir + "/in.ndjson")
    }

    /// Repeated unique usernames are refused, naming both lines; nothing that violates
    /// uniqueness is committed, and the store verifies.
    @Test func importRefusesRepeatedUniqueValues() throws {
        var lines = (0..<30).map { #"{"entity": "Person", "username": "user\#($0)"}"# }
        lines.append(#"{"entity": "Person", "username": "user7"}"#)
        let (dir, store, file) = try storeAndFile(lines)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try CLI.run(["import", store, "--in", file, "--batch", "10"])
        #expect(result.status == 1)
        #expect(result.err.contains("line 31") && result.err.contains("line 8") && result.err.contains("user7"), "\(result.err)")
        #expect(try CLI.run(["query", store, "Person", "--count"]).out == "30\n")
        #expect(try CLI.run(["verify", store]).status == 0)
        // A username the store already holds is refused too (the save's check).
        try #"{"entity": "Person", "username": "user3"}"#.write(toFile: file, atomically: true, encoding: .utf8)
        let again = try CLI.run(["import", store, "--in", file])
        #expect(again.status == 1 && again.err.contains("uniqueness"), "\(again.err)")
        #expect(try CLI.run(["query", store, "Person", "--count"]).out == "30\n")
    }

    /// A reference to a line that fails later is never committed: the batch stays open
    /// until the referenced line, and is dropped when it fails.
    @Test func importNeverCommitsAReferenceWithoutItsTarget() throws {
        var lines = [#"{"entity": "Person", "id": "p", "username": "ann", "dvds": ["late"]}"#]
        lines += (0..<10).map { #"{"entity": "DVD", "title": "filler \#($0)"}"# }
        lines.append(#"{"entity": "DVD", "id": "late", "title": 42}"#)  // not a string: fails
        let (dir, store, file) = try storeAndFile(lines)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try CLI.run(["import", store, "--in", file, "--batch", "2"])
        #expect(result.status == 1 && result.err.contains("line 12"), "\(result.err)")
        #expect(!result.out.contains("committed"), "no batch could end before line 12: \(result.out)")
        #expect(try CLI.run(["query", store, "Person", "--count"]).out == "0\n")
        #expect(try CLI.run(["verify", store]).status == 0)
    }

    /// A line that names one side of a relationship sets the other: both agree, and the
    /// store verifies.
    @Test func importSetsBothSidesOfARelationship() throws {
        let lines = [#"{"entity": "Person", "id": "p", "username": "ann", "dvds": ["d1", "d2"]}"#,
                     #"{"entity": "DVD", "id": "d1", "title": "One"}"#,
                     #"{"entity": "DVD", "id": "d2", "title": "Two"}"#,
                     #"{"entity": "DVD", "id": "d3", "title": "Three", "owner": "q"}"#,
                     #"{"entity": "Person", "id": "q", "username": "bo"}"#]
        let (dir, store, file) = try storeAndFile(lines)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try CLI.run(["import", store, "--in", file])
        #expect(result.status == 0, "\(result.err)")
        let verify = try CLI.run(["verify", store])
        #expect(verify.status == 0, "\(verify.out)")
        #expect(try CLI.run(["query", store, "DVD", "owner.username == 'ann'", "--count"]).out == "2\n")
        let bo = try CLI.run(["query", store, "Person", "username == 'bo'"]).out
        #expect(bo.contains(#""dvds": ["E"#), "\(bo)")
    }

    /// --upsert updates the record whose unique values a line repeats (in the store or
    /// earlier in the file) with the members the line names.
    @Test func importUpsertsByAUniquenessConstraint() throws {
        let (dir, store, file) = try storeAndFile([#"{"entity": "Person", "username": "ann", "name": "Ann", "age": 1}"#,
                                                   #"{"entity": "Person", "username": "bo", "age": 2}"#])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try CLI.run(["import", store, "--in", file]).status == 0)
        try [#"{"entity": "Person", "username": "ann", "age": 5}"#,
             #"{"entity": "Person", "username": "cy", "age": 3}"#,
             #"{"entity": "Person", "username": "cy", "age": 4}"#].joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let refused = try CLI.run(["import", store, "--in", file])
        #expect(refused.status == 1)
        let result = try CLI.run(["import", store, "--in", file, "--upsert"])
        #expect(result.status == 0, "\(result.err)")
        #expect(try CLI.run(["query", store, "Person", "--count"]).out == "3\n")
        let ann = try CLI.run(["query", store, "Person", "username == 'ann'"]).out
        #expect(ann.contains(#""age": 5"#) && ann.contains(#""name": "Ann""#), "\(ann)")
        #expect(try CLI.run(["query", store, "Person", "username == 'cy'"]).out.contains(#""age": 4"#))
        #expect(try CLI.run(["verify", store]).status == 0)
    }

    /// --atomic: one transaction; a failure on the last line imports nothing.
    @Test func anAtomicImportIsAllOrNothing() throws {
        var lines = (0..<20).map { #"{"entity": "Person", "username": "u\#($0)"}"# }
        lines.append(#"{"entity": "Person"}"#)  // no username: required
        let (dir, store, file) = try storeAndFile(lines)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try CLI.run(["import", store, "--in", file, "--atomic", "--batch", "3"])
        #expect(result.status == 1 && result.err.contains("line 21") && result.err.contains("required"), "\(result.err)")
        #expect(try CLI.run(["query", store, "Person", "--count"]).out == "0\n")
        lines.removeLast()
        try lines.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try CLI.run(["import", store, "--in", file, "--atomic"]).status == 0)
        #expect(try CLI.run(["history", store]).out.split(separator: "\n").count == 1)
    }

    /// cairn migrate refuses to drop data without --allow-data-loss, saying what and how
    /// much, and refuses a model older than the store's.
    @Test func migrateRefusesDataLossAndOlderModels() throws {
        let (dir, store, file) = try storeAndFile([#"{"entity": "Person", "username": "ann", "name": "Ann"}"#,
                                                   #"{"entity": "Person", "username": "bo"}"#])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try CLI.run(["import", store, "--in", file]).status == 0)
        let withoutName = CommandTests.schema.replacingOccurrences(of: #"{"version": 1,"#, with: #"{"version": 2,"#)
            .replacingOccurrences(of: #"{"name": "name", "type": "string", "optional": true},"#, with: "")
        #expect(withoutName != CommandTests.schema)
        try withoutName.write(toFile: dir + "/v2.json", atomically: true, encoding: .utf8)
        let dry = try CLI.run(["migrate", store, "--to", dir + "/v2.json", "--dry-run"])
        #expect(dry.status == 0 && dry.out.contains("drops Person.name, which holds data in 1 record"), "\(dry.out)\(dry.err)")
        let refused = try CLI.run(["migrate", store, "--to", dir + "/v2.json"])
        #expect(refused.status == 1 && refused.err.contains("--allow-data-loss"), "\(refused.err)")
        #expect(try CLI.run(["query", store, "Person", "username == 'ann'"]).out.contains(#""name": "Ann""#))
        #expect(try CLI.run(["migrate", store, "--to", dir + "/v2.json", "--allow-data-loss"]).status == 0)
        // Version 1 again (with name): older than the store's 2.
        let older = try CLI.run(["migrate", store, "--to", dir + "/schema.json", "--allow-data-loss"])
        #expect(older.status == 1 && older.err.contains("model version 2"), "\(older.err)")
    }
}
