import CairnInterchange
import CairnStorage
import Cairn
import Foundation

enum HistoryCommand: Command {
    static let name = "history"
    static let help = """
        USAGE: cairn history DIR [--since SEQ] [--json]

        The transactions in the log (since the last compaction), one line each: sequence
        number, time, and inserts (+), updates (~) and deletes (-) per entity.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "history", valued: ["--since"], switches: ["--json"])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        let since = UInt64(try args.integer("--since") ?? 0)
        let store = try openStore(directory, command: "history", readOnly: true)
        defer { try? store.close() }
        let schema = store.schema
        for transaction in try store.history() where transaction.sequence > since {
            let time = Date(timeIntervalSince1970: Double(transaction.time) / 1000)
            let parts = transaction.changes.sorted { $0.key < $1.key }.map { number, counts -> (String, (Int, Int, Int)) in
                (schema.entity(number: number)?.name ?? "entity \(number)", (counts.inserts, counts.updates, counts.deletes))
            }
            if args.flags.contains("--json") {
                Console.out(JSONText.object([
                    ("sequence", String(transaction.sequence)), ("time", JSONText.value(.date(time))),
                    ("changes", JSONText.object(parts.map { ($0.0, JSONText.object([("inserts", String($0.1.0)), ("updates", String($0.1.1)), ("deletes", String($0.1.2))])) })),
                ]))
            } else {
                let summary = parts.map { "\($0.0) +\($0.1.0) ~\($0.1.1) -\($0.1.2)" }.joined(separator: ", ")
                Console.out("\(transaction.sequence)\t\(JSONText.dateStyle.format(time))\t\(summary)")
            }
        }
    }
}
