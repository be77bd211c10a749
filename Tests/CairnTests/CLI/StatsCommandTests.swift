import Foundation
import Testing
@testable import Cairn
@_spi(Storage) @testable import CairnStorage

/// `cairn stats`: what a store holds and how its files stand.
@Suite struct StatsCommandTests {
    /// `stats` and `history` show the latest commit time a log frame can say (2^64 − 1 ms,
    /// under a good checksum: about 1.8e16 s, finite, which Foundation formats) without
    /// trapping.
    @Test func commitTimesOutOfRangeAreShown() throws {
        let (dir, data) = try CLIFixture.workspace(people: 2)
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
}
