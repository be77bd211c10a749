import CairnInterchange
import CairnStorage
import Cairn
import Foundation

enum CompactCommand: Command {
    static let name = "compact"
    static let help = """
        USAGE: cairn compact DIR [--json]

        Folds the log into a new snapshot (crash-safe, streaming) and prints the bytes
        before and after and the time taken. Takes the store's lock like any writer.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "compact", valued: [], switches: ["--json"])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        let json = args.flags.contains("--json")
        let store = try openStore(directory, command: "compact")
        defer { try? store.close() }
        let start = Date()
        Console.progress("compacting…", json: json)
        let result = try store.compact()
        Console.endProgress(json: json)
        let seconds = Date().timeIntervalSince(start)
        if json {
            Console.out(JSONText.object([("bytesBefore", String(result.bytesBefore)), ("bytesAfter", String(result.bytesAfter)),
                                         ("records", String(result.records)), ("seconds", JSONText.number(seconds))]))
        } else {
            Console.out("compacted \(result.records) records: \(result.bytesBefore) → \(result.bytesAfter) bytes in \(String(format: "%.3f", seconds)) s")
        }
    }
}
