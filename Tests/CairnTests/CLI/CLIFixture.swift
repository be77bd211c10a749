import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Runs the built `cairn` binary as a user would.
enum CLI {
    static var binary: URL {
        // The test bundle sits in the build products folder, beside the `cairn` executable.
        let products = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        return products.appendingPathComponent("cairn")
    }

    static func run(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
    }
}

/// A Person ↔ DVD schema and its data files, for the command tests.
enum CLIFixture {
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
    static func workspace(people: Int = 5) throws -> (dir: String, data: String) {
        let dir = temporaryDirectory()
        try CLIFixture.schema.write(toFile: dir + "/schema.json", atomically: true, encoding: .utf8)
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

    /// A store made with the fixture's schema (Person ↔ DVD, unique usernames), and a
    /// file of `lines` to import.
    static func storeAndFile(_ lines: [String]) throws -> (dir: String, store: String, file: String) {
        let dir = temporaryDirectory()
        try CLIFixture.schema.write(toFile: dir + "/schema.json", atomically: true, encoding: .utf8)
        #expect(try CLI.run(["create", dir + "/s", "--schema", dir + "/schema.json"]).status == 0)
        try lines.joined(separator: "\n").write(toFile: dir + "/in.ndjson", atomically: true, encoding: .utf8)
        return (dir, dir + "/s", dir + "/in.ndjson")
    }

    static func directorySize(_ path: String) throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: path).reduce(0) { total, name in
            total + ((try FileManager.default.attributesOfItem(atPath: path + "/" + name)[.size] as? Int) ?? 0)
        }
    }
}
