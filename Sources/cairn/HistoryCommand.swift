import CairnInterchange
import CairnStorage
import Cairn
import Foundation

enum HistoryCommand: Command {
    static let name = "history"
    static let help = """
        USAGE: cairn history DIR [--since SEQ] [--json] [--follow]

        The transactions in the log (since the last compaction), one line each: sequence
        number, time, and inserts (+), updates (~) and deletes (-) per entity.
        With --follow, it goes on printing the transactions another process commits, as
        they are committed, until interrupted (a compaction of the writer's prints one
        line for the whole step). The store is read as a reader: nothing in it changes.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "history", valued: ["--since"], switches: ["--json", "--follow"])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        let since = UInt64(try args.integer("--since") ?? 0)
        let store = try openStore(directory, command: "history", readOnly: true)
        defer { try? store.close() }
        let schema = store.schema
        let json = args.flags.contains("--json")
        for transaction in try store.history() where transaction.sequence > since {
            printTransaction(transaction.sequence, time: transaction.time, counts: transaction.changes, schema: schema, json: json)
        }
        guard args.flags.contains("--follow") else { return }
        while true {
            for step in try store.advance() where step.sequence > since {
                var counts: [UInt16: (inserts: Int, updates: Int, deletes: Int)] = [:]
                for change in step.changes {
                    var count = counts[change.id.entity] ?? (0, 0, 0)
                    switch change.kind {
                    case .insert: count.inserts += 1
                    case .update: count.updates += 1
                    case .delete: count.deletes += 1
                    }
                    counts[change.id.entity] = count
                }
                printTransaction(step.sequence, time: step.time, counts: counts, schema: schema, json: json)
            }
            Thread.sleep(forTimeInterval: followInterval)
        }
    }

    /// One transaction's line: its sequence number, time and counts by entity.
    static func printTransaction(_ sequence: UInt64, time milliseconds: UInt64, counts: [UInt16: (inserts: Int, updates: Int, deletes: Int)],
                                 schema: Schema, json: Bool) {
        let time = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        let parts = counts.sorted { $0.key < $1.key }.map { number, counts -> (String, (Int, Int, Int)) in
            (schema.entity(number: number)?.name ?? "entity \(number)", (counts.inserts, counts.updates, counts.deletes))
        }
        if json {
            Console.out(JSONText.object([
                ("sequence", String(sequence)), ("time", JSONText.value(.date(time))),
                ("changes", JSONText.object(parts.map { ($0.0, JSONText.object([("inserts", String($0.1.0)), ("updates", String($0.1.1)), ("deletes", String($0.1.2))])) })),
            ]))
        } else {
            let summary = parts.map { "\($0.0) +\($0.1.0) ~\($0.1.1) -\($0.1.2)" }.joined(separator: ", ")
            Console.out("\(sequence)\t\(JSONText.dateStyle.format(time))\t\(summary)")
        }
    }
}
