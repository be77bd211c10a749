import Foundation
import Testing
@testable import Cairn
@_spi(Storage) @testable import CairnStorage

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
}
