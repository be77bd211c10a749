import Cairn
import Foundation

/// The scaling table's record: one entity of three attributes, one of them indexed.
final class Item: ManagedObject {
    @Attribute(indexed: true) var key: Int64 = 0
    @Attribute var name: String = ""
    @Attribute var score: Double = 0
}

/// One step of the scaling table, each in a fresh child process on the store the steps
/// before it left (`cairn-bench --scaling-child STEP N DIR`).
enum ScalingStep: String, CaseIterable {
    /// N records through `batchInsert` in transactions of 100k, durably, compaction
    /// automatic (as an app has it), then a clean close.
    case importRecords = "import"
    /// Open after that clean close, and look one record up by its indexed key.
    case openAndLookup = "open"
    /// Open, then count the records an unindexed predicate matches (every record read).
    case scan
    /// Open, then compact.
    case compact
    /// Open the compacted store, and look one record up.
    case openCompacted = "open_compacted"
    /// The import again, into a store of its own, killed (SIGKILL) once its last
    /// transaction is durable: no clean close.
    case importKilled = "import_killed"
    /// Open after that kill, and look one record up.
    case openAfterKill = "open_after_kill"
}

private func scalingModel() throws -> Model { try Model(Item.self) }

private func openCoordinator(_ directory: String, _ model: Model) throws -> Coordinator {
    try Coordinator(path: directory, schema: model.schema, options: StoreOptions(durability: .durable, compaction: .default))
}

/// Runs `step` for a store of `count` records in `directory`; the measurement's extras
/// say the log tail and snapshot the step found.
func runScalingStep(_ step: ScalingStep, count: Int, directory: String) throws -> Measurement {
    let model = try scalingModel()
    switch step {
    case .importRecords, .importKilled:
        let start = startTimedPart()
        let coordinator = try openCoordinator(directory, model)
        var done = 0
        while done < count {
            let batch = min(100_000, count - done)
            let context = Context(coordinator: coordinator, model: model)
            context.undoManager.isEnabled = false
            let base = done
            let ids = try context.batchInsert(Item.self, count: batch) { item, i in
                let n = base + i
                item.key = Int64(n)
                item.name = "item \(n)"
                item.score = Double(n % 1000) / 1000
            }
            guard ids.count == batch else { throw BenchError("import inserted \(ids.count) of \(batch)") }
            done += batch
        }
        let statistics = coordinator.statistics
        if step == .importKilled { kill(getpid(), SIGKILL) }
        try coordinator.close()
        return Measurement(seconds: seconds(since: start), operations: count,
                           extra: ["logBytes": Double(statistics.logBytes), "snapshotBytes": Double(statistics.snapshotBytes)])
    case .openAndLookup, .openCompacted, .openAfterKill:
        let start = startTimedPart()
        let coordinator = try openCoordinator(directory, model)
        let context = Context(coordinator: coordinator, model: model)
        var query = try FetchQuery(Item.self, format: "key == %@", Int64(Int64(count / 2)))
        query.fetchLimit = 1
        let found = try context.fetch(query).first?.score
        let time = seconds(since: start)
        guard found != nil else { throw BenchError("open: no record with key \(count / 2)") }
        let statistics = coordinator.statistics
        try coordinator.close()
        return Measurement(seconds: time, operations: 1,
                           extra: ["logBytes": Double(statistics.logBytes), "snapshotBytes": Double(statistics.snapshotBytes)])
    case .scan:
        let coordinator = try openCoordinator(directory, model)
        let context = Context(coordinator: coordinator, model: model)
        let start = startTimedPart()
        let matches = try context.count(for: FetchQuery(Item.self, format: "score < 0.5"))
        let time = seconds(since: start)
        guard matches == count / 2 else { throw BenchError("scan counted \(matches), expected \(count / 2)") }
        try coordinator.close()
        return Measurement(seconds: time, operations: count)
    case .compact:
        let coordinator = try openCoordinator(directory, model)
        let start = startTimedPart()
        try coordinator.compact()
        let time = seconds(since: start)
        try coordinator.close()
        return Measurement(seconds: time, operations: count)
    }
}

/// `cairn-bench --scaling [MAX] [--json FILE]`: the scaling table at 10k, 100k, 1M and MAX
/// records (10M unless given), one child process per step, printed as a table with each
/// step's cost per record and peak resident set; with `--json`, each step's time and peak
/// resident set also written to FILE, for `--charts`.
func runScaling(maximum: Int, json: String? = nil) throws {
    var records: [ScalingRecord] = []
    let sizes = [10_000, 100_000, 1_000_000, 10_000_000].filter { $0 < maximum } + [maximum]
    print("scaling: one entity of three attributes (an indexed Int64, a String, a Double); each step in a fresh process")
    print("import: batchInsert in transactions of 100k, durable, automatic compaction, then a clean close; open: open plus one lookup by the indexed key")
    print("scan: count of an unindexed predicate over every record; compact: compaction of the imported store; RSS: the step's peak resident set")
    let header = ["records", "log tail", "import s", "µs/rec", "RSS", "open ms", "RSS", "scan s", "ns/rec", "compact s", "µs/rec", "RSS",
                  "reopen ms", "RSS", "killed ms", "RSS"]
    let widths = [10, 10, 10, 8, 9, 10, 9, 9, 8, 10, 8, 9, 10, 8, 10, 8]
    func row(_ cells: [String]) -> String {
        zip(cells, widths).map { cell, width in cell.padding(toLength: max(width, cell.count + 1), withPad: " ", startingAt: 0) }
            .joined().trimmingCharacters(in: .whitespaces)
    }
    print("reopen: open plus one lookup after the compaction; killed: open plus one lookup after the import is killed (SIGKILL) instead of closed")
    print("")
    print(row(header))
    for size in sizes {
        let directory = NSTemporaryDirectory() + "cairn-scaling-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let killedDirectory = directory + "-killed"
        defer { try? FileManager.default.removeItem(atPath: killedDirectory) }
        var results: [ScalingStep: Measurement] = [:]
        for step in ScalingStep.allCases {
            let killed = step == .importKilled || step == .openAfterKill
            results[step] = try runScalingChild(step, count: size, directory: killed ? killedDirectory : directory,
                                                killed: step == .importKilled)
        }
        func f(_ value: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", value) }
        func mb(_ m: Measurement?) -> String { f((m?.extra["peakRSS"] ?? 0) / 1_048_576, 0) + " MB" }
        let imported = results[.importRecords], opened = results[.openAndLookup], scanned = results[.scan]
        let compacted = results[.compact], reopened = results[.openCompacted], afterKill = results[.openAfterKill]
        for step in ScalingStep.allCases where step != .importKilled {
            guard let measured = results[step] else { continue }
            records.append(ScalingRecord(records: size, step: step.rawValue, seconds: measured.seconds,
                                         peakRSSBytes: measured.extra["peakRSS"] ?? 0))
        }
        let perRecord = { (m: Measurement?, unit: Double) in f((m?.seconds ?? 0) / Double(size) * unit, 2) }
        print(row([String(size), f((imported?.extra["logBytes"] ?? 0) / 1_048_576, 1) + " MB",
               f(imported?.seconds ?? 0, 3), perRecord(imported, 1e6), mb(imported),
               f((opened?.seconds ?? 0) * 1000, 1), mb(opened),
               f(scanned?.seconds ?? 0, 3), perRecord(scanned, 1e9),
               f(compacted?.seconds ?? 0, 3), perRecord(compacted, 1e6), mb(compacted),
               f((reopened?.seconds ?? 0) * 1000, 1), mb(reopened),
               f((afterKill?.seconds ?? 0) * 1000, 1), mb(afterKill)]))
    }
    if let json {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try encoder.encode(records).write(to: URL(fileURLWithPath: json))
    }
}

/// Runs one step in a child process (`--scaling-child`), for its own peak resident set.
/// A child that is to kill itself (`killed`) reports nothing: its measurement is empty.
private func runScalingChild(_ step: ScalingStep, count: Int, directory: String, killed: Bool) throws -> Measurement {
    let (reason, status, data) = try runSelf(["--scaling-child", step.rawValue, String(count), directory])
    if killed {
        guard reason == .uncaughtSignal, status == SIGKILL else {
            throw BenchError("scaling step \(step.rawValue) at \(count) records was not killed")
        }
        return Measurement(seconds: 0, operations: count)
    }
    guard status == 0 else { throw BenchError("scaling step \(step.rawValue) at \(count) records failed") }
    return try JSONDecoder().decode(Measurement.self, from: data)
}
