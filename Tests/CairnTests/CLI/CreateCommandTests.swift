import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// `cairn create`: a store from a schema file, made once however many try at once.
@Suite struct CreateCommandTests {
    /// Six `cairn create` runs on one directory at once: exactly one succeeds, the others
    /// are told the store exists or is locked.
    @Test func oneOfSeveralConcurrentCreatesWins() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try CLIFixture.schema.write(toFile: dir + "/schema.json", atomically: true, encoding: .utf8)
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
}
