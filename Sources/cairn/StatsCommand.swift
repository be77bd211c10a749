import Cairn
import Foundation

enum StatsCommand {
    static let help = """
        USAGE: cairn stats DIR [--json]

        Format version, schema version, records per entity, snapshot and log bytes, the
        share of stored record versions that are dead (garbage ratio), and the last
        transaction's sequence number and time.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "stats", valued: [], switches: ["--json"])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        let store = try openStore(directory, command: "stats")
        defer { try? store.close() }
        let stats = store.statistics
        let logPuts = try store.history().reduce(0) { total, transaction in
            total + transaction.changes.values.reduce(0) { $0 + $1.inserts + $1.updates }
        }
        let live = stats.recordCounts.values.reduce(0, +)
        let stored = stats.snapshotRecords + logPuts
        let garbage = stored == 0 ? 0 : Double(stored - min(live, stored)) / Double(stored)
        let time = stats.lastCommitMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) }
        if args.flags.contains("--json") {
            let entities = JSONText.object(stats.recordCounts.sorted { $0.key < $1.key }.map { ($0.key, String($0.value)) })
            Console.out(JSONText.object([
                ("formatVersion", String(stats.snapshotFormatVersion)), ("storedIndexes", String(stats.storedIndexes)),
                ("storedIndexesInOlderOrder", String(stats.storedIndexesInOlderOrder)), ("schemaVersion", String(store.schema.version)),
                ("entities", entities), ("snapshotBytes", String(stats.snapshotBytes)), ("logBytes", String(stats.logBytes)),
                ("garbageRatio", JSONText.number((garbage * 10000).rounded() / 10000)), ("lastSequence", String(stats.lastSequence)),
                ("lastCommitTime", time.map { JSONText.value(.date($0)) } ?? "null"),
            ]))
            return
        }
        Console.out("store          \(directory)")
        Console.out("format version \(stats.snapshotFormatVersion)\(stats.snapshotFormatVersion < FileHeader.currentVersion ? " (compact to write version \(FileHeader.currentVersion))" : ""), schema version \(store.schema.version)")
        for (name, count) in stats.recordCounts.sorted(by: { $0.key < $1.key }) { Console.out("  \(name): \(count) records") }
        Console.out("snapshot       \(stats.snapshotBytes) bytes")
        Console.out("log            \(stats.logBytes) bytes")
        let older = stats.storedIndexesInOlderOrder
        Console.out("indexes        \(stats.storedIndexes) stored in the snapshot"
                    + (older > 0 ? ", \(older) more in an older order (built in memory on first use until a compaction)" : ""))
        Console.out("garbage ratio  \(String(format: "%.3f", garbage))")
        Console.out("last sequence  \(stats.lastSequence)\(time.map { " at \($0)" } ?? "")")
    }
}

enum VerifyCommand {
    static let help = """
        USAGE: cairn verify DIR [--json]

        Checks every checksum, decodes every record (every version still in the log too),
        and checks that references point at existing objects, that inverses agree and that
        uniqueness holds. Each problem is reported (with file and offset for damaged bytes).
        Exit status 1 if any. Changes nothing: a torn log tail (left by a crash) is
        reported, with what the next open will cut, not cut.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "verify", valued: [], switches: ["--json"])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        let json = args.flags.contains("--json")
        let store: Store
        do { store = try openStore(directory, command: "verify", readOnly: true) } catch let error as CairnError {
            if json {
                Console.out(JSONText.object([("ok", "false"), ("problems", JSONText.array([JSONText.string(error.description)]))]))
            } else {
                // Only damage is called damage: a locked or missing store is not damaged.
                Console.error("\(error.code == .corrupt ? "damage" : "cannot verify"): \(error)")
            }
            throw Failure()
        }
        defer { try? store.close() }
        Console.progress("verifying…", json: json)
        let problems = store.verify()
        Console.endProgress(json: json)
        let records = store.schema.entities.reduce(0) { $0 + store.count(entity: $1.number) }
        // A torn tail is what a crash leaves: not damage, but said, since the next open cuts it.
        let recovery = store.recovery
        let torn = recovery.truncatedAt.map {
            "the log's last \(recovery.truncatedBytes) bytes from offset \($0) are an unfinished write (\(recovery.truncationReason ?? "torn frame")), which the next open will cut"
        }
        if json {
            Console.out(JSONText.object([("ok", problems.isEmpty ? "true" : "false"), ("records", String(records)),
                                         ("problems", JSONText.array(problems.map { JSONText.string($0.description) })),
                                         ("tornTail", torn.map(JSONText.string) ?? "null")]))
        } else if problems.isEmpty {
            Console.out("ok: \(records) records, every checksum and reference checked")
            if let torn { Console.out("note: \(torn)") }
        } else {
            if let torn { Console.out("note: \(torn)") }
            for problem in problems { Console.out("problem: \(problem)") }
            Console.out("\(problems.count) problem(s) in \(records) records")
        }
        if !problems.isEmpty { throw Failure() }
    }
}

enum CompactCommand {
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

enum HistoryCommand {
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
        let store = try openStore(directory, command: "history")
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

enum RepairCommand {
    static let help = """
        USAGE: cairn repair DIR

        For a store that refuses to open because of damage: keeps a copy of each damaged
        file (FILE.damaged), salvages every transaction before the damage and every
        snapshot record whose checksum holds, and says what was lost.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "repair", valued: [], switches: [])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        let report = try Store.repair(at: directory)
        for copy in report.keptCopies { Console.out("kept a copy of the damaged file: \(copy)") }
        for note in report.notes { Console.out(note) }
        Console.out("kept \(report.keptTransactions) log transactions")
        if report.salvagedRecords > 0 || report.damagedSnapshotRegions > 0 {
            Console.out("salvaged \(report.salvagedRecords) snapshot records; skipped \(report.damagedSnapshotRegions) damaged regions")
        }
        if report.droppedTransactions.isEmpty {
            Console.out("lost: no transaction known")
        } else {
            Console.out("lost: transactions \(report.droppedTransactions.map(String.init).joined(separator: ", ")) (after the damage)")
        }
        let store = try openStore(directory, command: "repair")
        let problems = store.verify()
        try store.close()
        Console.out(problems.isEmpty ? "the store opens and verifies" : "the store opens; verify finds \(problems.count) problem(s)")
    }
}
