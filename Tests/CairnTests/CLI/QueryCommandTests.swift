import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// `cairn query`: a predicate, an order and a page over one entity, as JSON lines or a count.
@Suite struct QueryCommandTests {
    /// The fixture's people have ages 0, 7, 14, 21, 28: a filter, a descending order, a
    /// page, a count through a relationship, and a predicate that does not parse.
    @Test func filtersSortsPagesAndCounts() throws {
        let (dir, data) = try CLIFixture.workspace()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = dir + "/s"
        #expect(try CLI.run(["create", store, "--schema", dir + "/schema.json"]).status == 0)
        #expect(try CLI.run(["import", store, "--in", data]).status == 0)
        let ages = { (out: String) in out.split(separator: "\n").compactMap { line in
            line.range(of: #""age": "#).flatMap { Int(line[$0.upperBound...].prefix { $0.isNumber }) }
        } }
        let page = try CLI.run(["query", store, "Person", "age >= 7", "--sort", "-age", "--limit", "2", "--offset", "1"])
        #expect(page.status == 0, "\(page.err)")
        #expect(ages(page.out) == [21, 14], "\(page.out)")
        let all = try CLI.run(["query", store, "Person", "--sort", "age"])
        #expect(ages(all.out) == [0, 7, 14, 21, 28], "\(all.out)")
        #expect(try CLI.run(["query", store, "Person", "age < 10", "--count"]).out == "2\n")
        #expect(try CLI.run(["query", store, "DVD", "owner.age == 14", "--count"]).out == "2\n")
        let bad = try CLI.run(["query", store, "Person", "age >>= 3"])
        #expect(bad.status != 0 && bad.err.hasPrefix("cairn: "), "\(bad.out)\(bad.err)")
        let unknown = try CLI.run(["query", store, "Nobody"])
        #expect(unknown.status != 0 && unknown.err.contains("Nobody"), "\(unknown.err)")
    }
}
