import CairnInterchange
import CairnStorage
import Cairn
import Foundation

enum HistoryCommand: Command {
    static let name = "history"
    static let help = """
        USAGE: cairn history DIR [--since TOKEN] [--json] [--follow]

        The transactions the store's history holds (its log's, and in a store that keeps
        history, what its retention kept across compactions), one line each: sequence
        number, time, inserts (+), updates (~) and deletes (-) per entity, and the author.
        --since TOKEN starts after a token (STOREID:SEQUENCE, as --json prints them, or a
        sequence number); a token the history no longer reaches is an error, never a gap.
        --json prints NDJSON: each transaction with its token, author, counts, and every
        record it changed: inserts and updates with the record's current values (and an
        update's changed keys), deletes by ID.
        With --follow, it goes on printing the transactions another process commits, as
        they are committed, until interrupted (across a compaction of a store that keeps
        no history, one line for the whole step). The store is read as a reader: nothing
        in it changes.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "history", valued: ["--since"], switches: ["--json", "--follow"])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        let store = try openStore(directory, command: "history", readOnly: true)
        defer { try? store.close() }
        let since = try sequence(args.options["--since"], store: store)
        let json = args.flags.contains("--json")
        var last = since ?? 0
        for entry in try store.history(after: since).entries {
            try printEntry(entry, store: store, json: json)
            last = entry.sequence
        }
        guard args.flags.contains("--follow") else { return }
        last = max(last, store.lastSequence)
        while true {
            for step in try store.advance() where step.sequence > last {
                do {
                    for entry in try store.history(after: last).entries where entry.sequence <= step.sequence {
                        try printEntry(entry, store: store, json: json)
                    }
                } catch let error as CairnError where error.code == .historyExpired {
                    // A compaction without history: the step, as a reader saw it.
                    try printEntry(HistoryEntry(sequence: step.sequence, time: step.time, author: nil, changes: step.changes.map { change in
                        HistoryChange(id: change.id, kind: change.kind == .insert ? .insert : change.kind == .update ? .update : .delete,
                                      slots: change.changedSlots)
                    }), store: store, json: json)
                }
                last = step.sequence
            }
            Thread.sleep(forTimeInterval: followInterval)
        }
    }

    /// The sequence number an option (`--since`, `--as-of`) names: from a token of this
    /// store, or a plain number.
    static func sequence(_ text: String?, store: Store, option: String = "--since", command: String = "history") throws -> UInt64? {
        guard let text else { return nil }
        if let sequence = UInt64(text) { return sequence }
        guard let token = HistoryToken(text) else {
            throw UsageError(message: "\(option) needs a history token (STOREID:SEQUENCE) or a sequence number, not '\(text)'",
                             command: command)
        }
        guard token.storeID == store.storeID else {
            throw CairnError(.invalidArgument, "the history token is of store \(token.storeID), not of this one (\(store.storeID))")
        }
        return token.sequence
    }

    /// One transaction: a line of text, or with `json` an NDJSON object with its records.
    static func printEntry(_ entry: HistoryEntry, store: Store, json: Bool) throws {
        let schema = store.schema
        let counts = entry.counts
        let time = Date(timeIntervalSince1970: Double(entry.time) / 1000)
        let parts = counts.sorted { $0.key < $1.key }.map { number, counts -> (String, (Int, Int, Int)) in
            (schema.entity(number: number)?.name ?? "entity \(number)", (counts.inserts, counts.updates, counts.deletes))
        }
        guard json else {
            let summary = parts.map { "\($0.0) +\($0.1.0) ~\($0.1.1) -\($0.1.2)" }.joined(separator: ", ")
            return Console.out("\(entry.sequence)\t\(JSONText.dateStyle.format(time))\t\(summary)" + (entry.author.map { "\t\($0)" } ?? ""))
        }
        var records: [String] = []
        for change in entry.changes {
            guard let entity = schema.entity(number: change.id.entity) else { continue }
            var pairs: [(String, String)] = [("change", JSONText.string("\(change.kind)"))]
            if change.kind != .delete, let record = try store.get(change.id) {
                if let slots = change.slots, change.kind == .update {
                    pairs.append(("keys", JSONText.array(slots.compactMap(entity.propertyName(slot:)).map(JSONText.string))))
                }
                pairs.append(("record", RecordJSON.line(entity: entity, id: change.id, values: record.values)))
            } else {
                pairs.append(("record", JSONText.object([("entity", JSONText.string(entity.name)), ("id", JSONText.string(change.id.description))])))
                if !change.keptSlots.isEmpty {
                    pairs.append(("kept", JSONText.object(zip(change.keptSlots, change.keptValues).compactMap { slot, value in
                        entity.propertyName(slot: slot).map { ($0, JSONText.value(value)) }
                    })))
                }
            }
            records.append(JSONText.object(pairs))
        }
        Console.out(JSONText.object([
            ("token", JSONText.string(HistoryToken(storeID: store.storeID, sequence: entry.sequence).description)),
            ("sequence", String(entry.sequence)), ("time", JSONText.value(.date(time))),
            ("author", entry.author.map(JSONText.string) ?? "null"),
            ("changes", JSONText.object(parts.map { ($0.0, JSONText.object([("inserts", String($0.1.0)), ("updates", String($0.1.1)), ("deletes", String($0.1.2))])) })),
            ("records", JSONText.array(records)),
        ]))
    }
}
