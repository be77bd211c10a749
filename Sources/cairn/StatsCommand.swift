import CairnInterchange
import CairnStorage
import Cairn
import Foundation

enum StatsCommand: Command {
    static let name = "stats"
    static let help = """
        USAGE: cairn stats DIR [--json]

        Format version, schema version, records per entity, snapshot and log bytes, the
        share of stored record versions that are dead (garbage ratio), the last
        transaction's sequence number and time, and whether the open started from the
        log's checkpoint (and how many transactions it replayed).
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "stats", valued: [], switches: ["--json"])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        let store = try openStore(directory, command: "stats", readOnly: true)
        defer { try? store.close() }
        let stats = store.statistics
        let live = stats.recordCounts.values.reduce(0, +)
        let stored = stats.snapshotRecords + stats.logRecordVersions
        let garbage = stored == 0 ? 0 : Double(stored - min(live, stored)) / Double(stored)
        let time = stats.lastCommitMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) }
        let recovery = store.recovery
        let checkpoint = recovery.usedCheckpoint ? "used" : recovery.ignoredCheckpoint == nil ? "none" : "ignored"
        if args.flags.contains("--json") {
            let entities = JSONText.object(stats.recordCounts.sorted { $0.key < $1.key }.map { ($0.key, String($0.value)) })
            Console.out(JSONText.object([
                ("formatVersion", String(stats.snapshotFormatVersion)), ("storedIndexes", String(stats.storedIndexes)),
                ("storedIndexesInOlderOrder", String(stats.storedIndexesInOlderOrder)), ("schemaVersion", String(store.schema.version)),
                ("entities", entities), ("snapshotBytes", String(stats.snapshotBytes)), ("logBytes", String(stats.logBytes)),
                ("garbageRatio", JSONText.number((garbage * 10000).rounded() / 10000)), ("lastSequence", String(stats.lastSequence)),
                ("lastCommitTime", time.map { JSONText.value(.date($0)) } ?? "null"),
                ("checkpoint", JSONText.value(.string(checkpoint))), ("replayedTransactions", String(recovery.replayedTransactions)),
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
        switch checkpoint {
        case "used": Console.out("checkpoint     opened from it; \(recovery.replayedTransactions) transactions replayed after it")
        case "ignored": Console.out("checkpoint     ignored (\(recovery.ignoredCheckpoint ?? "")); \(recovery.replayedTransactions) transactions replayed")
        default: Console.out("checkpoint     none; \(recovery.replayedTransactions) transactions replayed")
        }
    }
}
