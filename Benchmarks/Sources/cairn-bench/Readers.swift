import Cairn
import Foundation

/// Readers in other processes (`cairn-bench --readers [N]`): a reader's open of an
/// N-record store while its writer runs, against the writer's own open; and the time
/// from a writer's durable commit to a reader in another process seeing it.
func runReaders(count: Int) throws {
    let directory = NSTemporaryDirectory() + "cairn-bench-readers-\(getpid())"
    try? FileManager.default.removeItem(atPath: directory)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    _ = try runScalingStep(.importRecords, count: count, directory: directory)
    let model = try Model(Item.self)
    func open(readOnly: Bool) throws -> (Coordinator, Double) {
        var options = StoreOptions(durability: .durable, compaction: .manual)
        options.readOnly = readOnly
        let start = now()
        let coordinator = try Coordinator(path: directory, schema: model.schema, options: options)
        var query = try FetchQuery(Item.self, format: "key == %@", Int64(count / 2))
        query.fetchLimit = 1
        guard try Context(coordinator: coordinator, model: model).fetch(query).count == 1 else { throw BenchError("no record") }
        return (coordinator, seconds(since: start))
    }
    var writerOpens: [Double] = [], readerOpens: [Double] = []
    for _ in 0..<5 {
        let (writer, writerTime) = try open(readOnly: false)
        let (reader, readerTime) = try open(readOnly: true)  // beside the writer, which holds the store
        writerOpens.append(writerTime)
        readerOpens.append(readerTime)
        try reader.close()
        try writer.close()
    }
    func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
    print("store: \(count) records (the scaling table's), opened and one record looked up by its indexed key, 5 runs")
    print(String(format: "writer open   median %.1f ms", median(writerOpens) * 1000))
    print(String(format: "reader open   median %.1f ms (while the writer holds the store)", median(readerOpens) * 1000))

    // Commit to sight: a reader process advancing every 1 ms prints when it sees each sequence.
    var options = StoreOptions(durability: .durable, compaction: .manual)
    options.createIfMissing = false
    let writer = try Coordinator(path: directory, schema: model.schema, options: options)
    defer { try? writer.close() }
    let child = Process()
    child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    child.arguments = ["--reader-child", directory]
    let out = Pipe()
    child.standardOutput = out
    try child.run()
    _ = out.fileHandleForReading.availableData  // "ready"
    let context = Context(coordinator: writer, model: model)
    context.undoManager.isEnabled = false
    var query = try FetchQuery(Item.self, format: "key == %@", Int64(1))
    query.fetchLimit = 1
    guard let item = try context.fetch(query).first else { throw BenchError("no record") }
    var committed: [UInt64: UInt64] = [:]
    let commits = 300
    for n in 0..<commits {
        item.score = Double(n)
        try context.save()
        committed[writer.statistics.lastSequence] = now()
        Thread.sleep(forTimeInterval: 0.003)
    }
    Thread.sleep(forTimeInterval: 0.1)
    child.terminate()
    child.waitUntilExit()
    let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    var latencies: [Double] = []
    var early = 0  // seen before the writer's save returned (written, not yet synced)
    for line in text.split(separator: "\n") {
        let parts = line.split(separator: " ")
        guard parts.count == 2, let sequence = UInt64(parts[0]), let seen = UInt64(parts[1]),
              let at = committed[sequence] else { continue }
        if seen < at { early += 1 } else { latencies.append(Double(seen - at) / 1e6) }
    }
    guard !latencies.isEmpty else { throw BenchError("the reader saw no commit") }
    latencies.sort()
    print("commit to sight: \(commits) durable saves; a reader process advancing every 1 ms saw \(early) before the save returned")
    print("  (its frame written, its sync not done) and \(latencies.count) after, this long after the save returned:")
    print(String(format: "  median %.2f ms, p99 %.2f ms, max %.2f ms", latencies[latencies.count / 2],
                 latencies[min(latencies.count - 1, latencies.count * 99 / 100)], latencies[latencies.count - 1]))
}

/// The reader process of ``runReaders(count:)``: advances every millisecond and prints
/// each new last sequence with the time it saw it.
func runReaderChild(directory: String) throws -> Never {
    var options = StoreOptions(compaction: .manual)
    options.readOnly = true
    let model = try Model(Item.self)
    let reader = try Coordinator(path: directory, schema: model.schema, options: options)
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    var last = reader.statistics.lastSequence
    while true {
        for change in try reader.advance() where change.sequence > last {
            last = change.sequence
            FileHandle.standardOutput.write(Data("\(change.sequence) \(now())\n".utf8))
        }
        Thread.sleep(forTimeInterval: 0.001)
    }
}
