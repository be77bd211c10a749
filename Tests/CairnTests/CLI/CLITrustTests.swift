import Foundation
import Testing
@testable import Cairn

/// The CLI keeps its promises at the edges: concurrent creates, exports that check what
/// they read, exact round trips.
@Suite struct CLITrustTests {
    /// Six `cairn create` runs on one directory at once: exactly one succeeds, the others
    /// are told the store exists or is locked.
    @Test func oneOfSeveralConcurrentCreatesWins() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try CommandTests.schema.write(toFile: dir + "/schema.json", atomically: true, encoding: .utf8)
        for round in 0..<16 {
            let store = dir + "/store\(round)"
            let processes = (0..<6).map { _ -> (Process, Pipe) in
                let process = Process()
                process.executableURL = CLI.binary
                process.arguments = ["create", store, "--schema", dir + "/schema.json"]
                let err = Pipe()
                process.standardError = err
                process.standardOutput = Pipe()
                return (process, err)
            }
            for (process, _) in processes { try process.run() }
            var succeeded = 0
            for (process, err) in processes {
                let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                if process.terminationStatus == 0 {
                    succeeded += 1
                } else {
                    #expect(message.contains("already exists") || message.contains("locked"), "round \(round): \(message)")
                }
            }
            #expect(succeeded == 1, "round \(round): \(succeeded) creates reported success")
        }
    }

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
