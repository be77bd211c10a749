import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

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

    /// `stats` says whether the open started from the log's checkpoint: after an import
    /// whose close wrote one, it did; with the checkpoint damaged, it was ignored (the log
    /// replayed, the same records counted, the file removed); the next close writes one
    /// again.
    @Test func statsSaysWhetherTheOpenUsedTheCheckpoint() throws {
        let (dir, data) = try CLIFixture.workspace(people: 3_000)  // 9,000 records: a checkpoint at close
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try CLI.run(["create", dir + "/a", "--schema", dir + "/schema.json"]).status == 0)
        #expect(try CLI.run(["import", dir + "/a", "--in", data]).status == 0)
        let names = try FileManager.default.contentsOfDirectory(atPath: dir + "/a")
        let checkpoint = try #require(names.first { $0.hasSuffix(".checkpoint") }, "\(names)")
        var stats = try CLI.run(["stats", dir + "/a"])
        #expect(stats.out.contains("checkpoint     opened from it; 0 transactions replayed after it"), "\(stats.out)")
        let counts = stats.out.split(separator: "\n").filter { $0.contains(" records") }
        #expect(counts == ["  DVD: 6000 records", "  Person: 3000 records"])

        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/a/" + checkpoint)))
        bytes[bytes.count / 2] ^= 0x40
        try Data(bytes).write(to: URL(fileURLWithPath: dir + "/a/" + checkpoint))
        stats = try CLI.run(["stats", dir + "/a", "--json"])
        #expect(stats.status == 0 && stats.out.contains(#""checkpoint": "ignored""#), "\(stats.out) \(stats.err)")
        #expect(stats.out.contains(#""entities": {"DVD": 6000, "Person": 3000}"#))
        // Stats is a reader: it leaves the damaged checkpoint as it found it.
        stats = try CLI.run(["stats", dir + "/a"])
        #expect(stats.out.contains("checkpoint     ignored"), "\(stats.out)")
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir + "/a/" + checkpoint))) == bytes)
        // A writer's open removes it, and its close writes one again.
        try Store.open(at: dir + "/a").close()
        stats = try CLI.run(["stats", dir + "/a"])
        #expect(stats.out.contains("checkpoint     opened from it"), "the writer's close wrote one again: \(stats.out)")
    }
}
