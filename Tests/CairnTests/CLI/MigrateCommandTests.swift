import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// `cairn migrate`: a store moved to a new model version, with a dry run first.
@Suite struct MigrateCommandTests {
    @Test func dryRunThenMigrate() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try CLIFixture.schema.write(toFile: dir + "/v1.json", atomically: true, encoding: .utf8)
        let v2 = CLIFixture.schema
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

    /// cairn migrate refuses to drop data without --allow-data-loss, saying what and how
    /// much, and refuses a model older than the store's.
    @Test func migrateRefusesDataLossAndOlderModels() throws {
        let (dir, store, file) = try CLIFixture.storeAndFile([#"{"entity": "Person", "username": "ann", "name": "Ann"}"#,
                                                   #"{"entity": "Person", "username": "bo"}"#])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try CLI.run(["import", store, "--in", file]).status == 0)
        let withoutName = CLIFixture.schema.replacingOccurrences(of: #"{"version": 1,"#, with: #"{"version": 2,"#)
            .replacingOccurrences(of: #"{"name": "name", "type": "string", "optional": true},"#, with: "")
        #expect(withoutName != CLIFixture.schema)
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
