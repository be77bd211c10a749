import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// `cairn export`: every record as NDJSON, checked as it is read.
@Suite struct ExportCommandTests {
    /// A record whose checksum holds but which does not fit the schema (one value of two)
    /// makes export fail naming it, as verify and query do, not print nulls.
    @Test func exportRefusesARecordThatDoesNotFitTheSchema() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try Store.open(at: dir, schema: TestSchemas.blobs)
        try store.commit([.put(RecordID(entity: 1, serial: 1), [.string("a"), .bytes(Data([1]))])])
        let end = try #require(store.log.withLock { $0?.appendOffset })
        try store.close()
        let logPath = dir + "/" + StoreFileName.log(2)
        var bytes = Array(try [UInt8](Data(contentsOf: URL(fileURLWithPath: logPath)))[..<end])
        var frame = ByteWriter()
        LogFrame.append(to: &frame, sequence: 2, syncedThrough: 1) {
            TransactionCoding.encode([.put(RecordID(entity: 1, serial: 2), body: ValueCoding.encode([.string("only one")]))],
                                     timestamp: 0, into: &$0)
        }
        bytes += frame.bytes
        try Data(bytes).write(to: URL(fileURLWithPath: logPath))
        let result = try CLI.run(["export", dir])
        #expect(result.status == 1)
        #expect(result.err.contains("E1-2") && result.err.contains("schema"), "\(result.err)")
    }

    /// A body that does not decode, in the log or in the snapshot, its checksum made to
    /// hold: export and query (reading every record, or testing a predicate in place)
    /// fail naming the file and the absolute offset of the bad value; an export to a file
    /// leaves the file as it was, and no partial file beside it.
    @Test func aBodyThatDoesNotDecodeIsReportedWhereItIs() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var store = try Store.open(at: dir, schema: TestSchemas.blobs)
        let good: [Value] = [.string("a"), .bytes(Data([1]))]
        try store.commit([.put(RecordID(entity: 1, serial: 1), good), .put(RecordID(entity: 1, serial: 2), good)])
        try store.close()
        let logPath = dir + "/" + StoreFileName.log(2)
        // The second record's first value tag, in the log's first frame: tag 166 is none.
        var log = try [UInt8](Data(contentsOf: URL(fileURLWithPath: logPath)))
        let body = ValueCoding.encode(good)
        let payload = FileHeader.size + LogFrame.headerSize
        let second = payload + 8 + 1 + (1 + 8 + 1 + body.count) + (1 + 8 + 1)
        #expect(Array(log[second..<(second + body.count)]) == body)
        log[second + 1] = 166
        let length = Int(log[(FileHeader.size + 4)..<(FileHeader.size + 8)].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })
        let checksum = CRC32C.masked(log[(FileHeader.size + 4)..<(payload + length)])
        withUnsafeBytes(of: checksum.littleEndian) { log.replaceSubrange(FileHeader.size..<(FileHeader.size + 4), with: $0) }
        try Data(log).write(to: URL(fileURLWithPath: logPath))
        let out = dir + "/out.ndjson"
        try "earlier export\n".write(toFile: out, atomically: true, encoding: .utf8)
        func expectLocated(_ path: String, _ offset: Int, _ comment: String) throws {
            for arguments in [["export", dir], ["export", dir, "--out", out], ["query", dir, "Blob"], ["query", dir, "Blob", "name == 'b'"]] {
                let result = try CLI.run(arguments)
                #expect(result.status == 1, "\(comment) \(arguments)")
                #expect(result.err.contains("unknown value tag 166") && result.err.contains("(\(path) at offset \(offset))"),
                        "\(comment) \(arguments): \(result.err)")
            }
            #expect(try String(contentsOfFile: out, encoding: .utf8) == "earlier export\n")
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.contains("partial") }.isEmpty)
        }
        try expectLocated(logPath, second + 1, "in the log")

        // Compacted into the snapshot as it is (compaction copies bodies without decoding).
        store = try Store.open(at: dir)
        try store.compact()
        let snapshotPath = dir + "/" + StoreFileName.snapshot(3)
        try store.close()
        let snapshot = try [UInt8](Data(contentsOf: URL(fileURLWithPath: snapshotPath)))
        let damaged = try #require(snapshot.indices.first { snapshot[$0...].starts(with: [2, 166]) })  // (the value count, then the tag)
        try expectLocated(snapshotPath, damaged + 1, "in the snapshot")
    }
}
