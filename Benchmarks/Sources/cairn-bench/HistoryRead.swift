import Cairn
import Foundation

/// Reading history (`cairn-bench --history [N]`): a store keeping history takes N
/// transactions of one update each (deferred, then synced); then the time of
/// `history(after:)` and `changes(since:)` from the first, read from the log, and again
/// after a compaction moved them into the history file.
func runHistoryRead(count: Int) throws {
    let directory = NSTemporaryDirectory() + "cairn-bench-history-\(getpid())"
    try? FileManager.default.removeItem(atPath: directory)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let model = try Model(Item.self)
    var options = StoreOptions(durability: .deferred, compaction: .manual)
    options.history = .unlimited
    let coordinator = try Coordinator(path: directory, schema: model.schema, options: options)
    defer { try? coordinator.close() }
    let context = Context(coordinator: coordinator, model: model)
    context.undoManager.isEnabled = false
    context.transactionAuthor = "bench"
    let items = (0..<1_000).map { index -> Item in
        let item = Item.create(in: context)
        item.key = Int64(index)
        return item
    }
    try context.save()
    let start = coordinator.historyToken
    let writing = now()
    for index in 0..<count {
        items[index % items.count].score = Double(index + 1)
        try context.save()
    }
    try coordinator.sync()
    print("store: 1,000 records; \(count) transactions of one update each, history kept (\(String(format: "%.2f", seconds(since: writing))) s to write)")
    func measure(_ label: String) throws {
        var begin = now()
        let history = try coordinator.history(after: start)
        let read = seconds(since: begin)
        begin = now()
        let changes = try coordinator.changes(since: start)
        let changed = seconds(since: begin)
        guard history.count == count, changes.transactions.count == count, changes.current.count == items.count else {
            throw BenchError("read \(history.count) and \(changes.transactions.count) transactions")
        }
        print(String(format: "%@: history(after:) %.3f s (%.2f µs a transaction), changes(since:) %.3f s", label as NSString,
                     read, read / Double(count) * 1e6, changed))
    }
    try measure("from the log         ")
    try coordinator.compact()
    try measure("from the history file")
}
