import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// `cairn schema`: the model a store keeps, as the JSON `cairn create` takes.
@Suite struct SchemaCommandTests {
    /// The printed schema makes an equal store: printed again, it is the same text, and
    /// it names the fixture's uniqueness, index, inverse and delete rule.
    @Test func printsWhatCreateTakes() throws {
        let (dir, _) = try CLIFixture.workspace()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try CLI.run(["create", dir + "/a", "--schema", dir + "/schema.json"]).status == 0)
        let printed = try CLI.run(["schema", dir + "/a"])
        #expect(printed.status == 0, "\(printed.err)")
        for fragment in [#""uniqueness": [["username"]]"#, #""indexed": true"#, #""inverse": "owner""#, #""deleteRule": "cascade""#] {
            #expect(printed.out.contains(fragment), "\(fragment) in \(printed.out)")
        }
        try printed.out.write(toFile: dir + "/printed.json", atomically: true, encoding: .utf8)
        #expect(try CLI.run(["create", dir + "/b", "--schema", dir + "/printed.json"]).status == 0)
        #expect(try CLI.run(["schema", dir + "/b"]).out == printed.out)
    }
}
