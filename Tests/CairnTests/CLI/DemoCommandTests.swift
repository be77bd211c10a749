import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

@Suite struct DemoCommandTests {
    /// The demo as a user runs it: exit 0, and the store it leaves passes verification.
    @Test func demoRunsAndLeavesAVerifiedStore() throws {
        let directory = temporaryDirectory() + "/demo.cairn"
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        let result = try CLI.run(["demo", "--store", directory])
        #expect(result.status == 0, "\(result.err)")
        #expect(result.out.contains("store at \(directory)"))
        #expect(result.out.contains("popped 'third'"))
        #expect(result.out.contains("cy (Dune)"))
        let store = try Store.open(at: directory)
        #expect(store.verify().isEmpty, "\(store.verify())")
        #expect(store.count(entity: store.schema.entity(named: "Person")!.number) == 3)
        try store.close()
    }

    @Test func demoUsageErrors() throws {
        #expect(try CLI.run(["demo", "--store"]).status == 2)
        #expect(try CLI.run(["demo", "--bogus"]).status == 2)
        #expect(try CLI.run(["demo", "--help"]).out.contains("USAGE: cairn demo"))
    }
}
