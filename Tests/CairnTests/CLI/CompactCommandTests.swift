import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// `cairn compact`: dead versions folded away, the records kept.
@Suite struct CompactCommandTests {
    @Test func compactShrinksAStoreWithGarbageAndKeepsTheExport() throws {
        let (dir, data) = try CLIFixture.workspace(people: 20)
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
        let sizeBefore = try CLIFixture.directorySize(store)
        let compact = try CLI.run(["compact", store])
        #expect(compact.status == 0 && compact.out.contains("compacted"))
        #expect(try CLI.run(["export", store]).out == before)
        #expect(try CLIFixture.directorySize(store) < sizeBefore)
    }
}
