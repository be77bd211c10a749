import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// `cairn verify`: every checksum and structure, damage named with its file and offset.
@Suite struct VerifyCommandTests {
    @Test func verifyNamesTheOffsetOfAFlippedByte() throws {
        let (dir, data) = try CLIFixture.workspace()
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
}
