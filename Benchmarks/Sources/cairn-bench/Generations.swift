import Cairn
import CSQLite  // (malloc_trim)
import Foundation

/// What a pinned query generation costs (`cairn-bench --generations [N]`): a store of N
/// records, one context pinned to its state (or none), and another context updating
/// every record once, in saves of 1,000. Each mode runs in a child process of its own;
/// the table gives the updates' time, the resident set after them, what
/// `pinnedGenerations` reports the pin holds, and the time the first context, holding
/// every record as a loaded object, takes to take the updates in
/// (`processExternalChanges()`: a merge of the saves' change sets, or a pinned
/// context's move to the newest state).
func runGenerations(count: Int) throws {
    print("store: \(count) records; another context updates each once, in saves of 1,000")
    print("mode       updates (s)   resident after (MB)   generation holds (MB)   records changed since the pin   take in (s)")
    var resident: [String: Double] = [:]
    for mode in ["unpinned", "pinned"] {
        let run = try runSelf(["--generations-child", mode, String(count)])
        guard run.reason == .exit, run.status == 0 else { throw BenchError("--generations-child \(mode) failed") }
        let fields = String(decoding: run.output, as: UTF8.self).split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
        guard fields.count == 5 else { throw BenchError("--generations-child \(mode) printed \(fields)") }
        resident[mode] = fields[1]
        print(String(format: "%-10@ %11.3f   %19.1f   %21.1f   %29d   %11.3f", mode as NSString, fields[0], fields[1] / 1e6,
                     fields[2] / 1e6, Int(fields[3]), fields[4]))
    }
    if let pinned = resident["pinned"], let unpinned = resident["unpinned"] {
        print(String(format: "resident, pinned less unpinned: %.1f MB (the unpinned context holds the saves' change sets until it takes them in)",
                     (pinned - unpinned) / 1e6))
    }
}

/// One mode of ``runGenerations(count:)``; prints the updates' seconds, the resident
/// bytes after them, the bytes the generation holds and the records changed since it.
func runGenerationsChild(pinned: Bool, count: Int) throws -> Never {
    let directory = NSTemporaryDirectory() + "cairn-bench-generations-\(getpid())"
    try? FileManager.default.removeItem(atPath: directory)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    _ = try runScalingStep(.importRecords, count: count, directory: directory)
    let model = try Model(Item.self)
    let coordinator = try Coordinator(path: directory, schema: model.schema,
                                      options: StoreOptions(durability: .durable, compaction: .manual))
    let reader = Context(coordinator: coordinator, model: model)
    if pinned { try reader.setQueryGenerationFrom(.current) }
    var first = try FetchQuery(Item.self, format: "key == %@", Int64(0))
    first.fetchLimit = 1
    let before = try reader.fetch(first).first?.score
    let loaded = try reader.fetch(FetchQuery(Item.self))
    var sum = 0.0
    for item in loaded { sum += item.score }
    let writer = Context(coordinator: coordinator, model: model)
    writer.undoManager.isEnabled = false
    let items = try writer.fetch(FetchQuery(Item.self))
    let start = now()
    for (index, item) in items.enumerated() {
        item.score += 1
        if index % 1_000 == 999 { try writer.save() }
    }
    try writer.save()
    let time = seconds(since: start)
    // The pinned context still reads the state of its pin (a fetch of the unpinned one
    // would take the updates in here).
    if pinned, let after = try reader.fetch(first).first?.score, after != before {
        throw BenchError("the pinned read saw \(after)")
    }
    #if os(Linux)
    malloc_trim(0)
    #endif
    let held = coordinator.pinnedGenerations.first
    let resident = residentBytes()
    let takeInStart = now()
    reader.processExternalChanges()
    let takeIn = seconds(since: takeInStart)
    guard try reader.fetch(first).first?.score == (before ?? 0) + 1 else { throw BenchError("the updates were not taken in") }
    print(time, resident, Double(held?.retainedBytes ?? 0), Double(held?.changedRecords ?? 0), takeIn)
    withExtendedLifetime((reader, items, loaded, sum)) {}
    exit(0)
}

/// This process's resident set now (VmRSS in /proc/self/status), or 0 where unknown.
func residentBytes() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
    return kilobytes * 1024
}
