import Foundation
import Testing
@testable import Cairn
@_spi(Storage) @testable import CairnStorage

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
}
