import Foundation
import Testing
@testable import Cairn
@_spi(Storage) @testable import CairnStorage

/// Runs the built `cairn` binary as a user would.
enum CLI {
    static var binary: URL {
        // The test bundle sits in the build products folder, beside the `cairn` executable.
        let products = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        return products.appendingPathComponent("cairn")
    }

    static func run(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
    }
}

@Suite struct CLITests {
    @Test func helpAndVersion() throws {
        let help = try CLI.run(["--help"])
        #expect(help.status == 0)
        #expect(help.out.contains("USAGE: cairn"))
        let version = try CLI.run(["--version"])
        #expect(version.status == 0)
        #expect(version.out.contains("store format version \(FileHeader.currentVersion)"))
    }

    /// Every command the help lists answers `--help` with its own usage; the soak writer is
    /// a test helper, not a command of the user-facing tool.
    @Test func everyListedCommandHasItsHelp() throws {
        for command in ["create", "schema", "stats", "verify", "compact", "export", "import", "query", "history", "repair", "migrate"] {
            let result = try CLI.run([command, "--help"])
            #expect(result.status == 0 && result.out.contains("cairn \(command)"), "\(command): \(result.err)")
        }
        #expect(try CLI.run(["_soak-writer", "/tmp/nowhere"]).status == 2)
    }

    @Test func unknownCommandIsAUsageError() throws {
        let result = try CLI.run(["frobnicate"])
        #expect(result.status == 2)
        #expect(result.err.contains("unknown command 'frobnicate'"))
    }
}

@Suite struct DemoTests {
    /// The demo as a user runs it: exit 0, and the store it leaves passes verification.
    @Test func demoRunsAndLeavesAVerifiedStore() throws {
        let directory = temporaryDirectory() + "/demo.cairn"
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        let result = try CLI.run(["demo", "--store", directory])
        #expect(result.status == 0, "\(result.err)")
        #expect(result.out.contains("store at \(directory)"))
        #expect(result.out.contains("popped 'third'"))
        #expect(result.out.contains("cy (Dune)"))
        let store = try Store.open(at: directory)
        #expect(store.verify().isEmpty, "\(store.verify())")
        #expect(store.count(entity: store.schema.entity(named: "Person")!.number) == 3)
        try store.close()
    }

    @Test func demoUsageErrors() throws {
        #expect(try CLI.run(["demo", "--store"]).status == 2)
        #expect(try CLI.run(["demo", "--bogus"]).status == 2)
        #expect(try CLI.run(["demo", "--help"]).out.contains("USAGE: cairn demo"))
    }
}
