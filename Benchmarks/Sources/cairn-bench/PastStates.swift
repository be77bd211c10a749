import Cairn
import Foundation

/// Past states (`cairn-bench --past [N]`): a store of N records (one batch, compacted into
/// the snapshot) takes 1,000 transactions of ten updates each; then the time to open a
/// context as of 1,000 transactions back and read it (a count and an indexed-key fetch),
/// with the transactions in the log, again after a compaction moved them into the
/// history file, and again after a reopen. The compaction's time and the history file's
/// size are set beside a store that keeps no history.
func runPastStates(records: Int) throws {
    for keeping in [false, true] {
        let directory = NSTemporaryDirectory() + "cairn-bench-past-\(getpid())"
        try? FileManager.default.removeItem(atPath: directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let model = try Model(Item.self)
        var options = StoreOptions(durability: .deferred, compaction: .manual)
        options.history = keeping ? .unlimited : nil
        var coordinator = try Coordinator(path: directory, schema: model.schema, options: options)
        let context = Context(coordinator: coordinator, model: model)
        context.undoManager.isEnabled = false
        _ = try context.batchInsert(Item.self, count: records) { item, index in
            item.key = Int64(index)
            item.name = "item \(index)"
        }
        try coordinator.compact()
        let start = coordinator.historyToken
        var generator = SystemRandomNumberGenerator()
        for round in 0..<1_000 {
            let keys = (0..<10).map { _ in Int64.random(in: 0..<Int64(records), using: &generator) }
            for item in try context.fetch(Item.self, where: #Predicate { keys.contains($0.key) }) { item.score = Double(round + 1) }
            try context.save()
        }
        try coordinator.sync()
        let label = keeping ? "history kept" : "no history  "
        func measure(_ place: String) throws {
            let begin = now()
            let past = Context(coordinator: coordinator, model: model)
            try past.setQueryGenerationFrom(coordinator.queryGeneration(asOf: start))
            let opened = seconds(since: begin)
            let count = try past.count(Item.self)
            let changed = try past.fetch(Item.self, where: #Predicate { $0.score > 0 }).count
            let read = seconds(since: begin)
            guard count == records, changed == 0 else { throw BenchError("as of the start: \(count) items, \(changed) changed") }
            print(String(format: "%@, %@: open as of 1,000 transactions back %.4f s; with a count and a scan %.3f s",
                         label as NSString, place as NSString, opened, read))
        }
        try measure("from the log         ")
        let compacting = now()
        try coordinator.compact()
        let compacted = seconds(since: compacting)
        let history = (try? FileManager.default.contentsOfDirectory(atPath: directory))?.first { $0.hasSuffix(".history") }
        let bytes = history.flatMap { try? FileManager.default.attributesOfItem(atPath: directory + "/" + $0)[.size] as? Int } ?? 0
        print(String(format: "%@: compaction of 1,000 transactions into %d records %.3f s, history file %d bytes",
                     label as NSString, records, compacted, bytes))
        guard keeping else {
            try coordinator.close()
            continue
        }
        try measure("from the history file")
        try coordinator.close()
        coordinator = try Coordinator(path: directory, schema: model.schema, options: options)
        try measure("after a reopen       ")
        try coordinator.close()
    }
}
