import Cairn
import Dispatch
import Foundation

/// `cairn-bench --phases [N]`: the object layer's hot paths one at a time, for profiling
/// (not a comparison: that is the rest of cairn-bench). Each line is one phase over N
/// objects of the `Row` entity (ten Int64 attributes), in nanoseconds per operation.
///
///     swift run -c release --package-path Benchmarks cairn-bench --phases [N]
///
/// Under callgrind, count one phase's instructions repeatably, e.g. the saves:
///
///     valgrind --tool=callgrind --toggle-collect='$s5Cairn7ContextC4save10durabilityyAA10DurabilityOSg_tKF' \
///         Benchmarks/.build/release/cairn-bench --phases 20000
struct Phases {
    private var start = DispatchTime.now().uptimeNanoseconds

    /// Prints the time since the last lap, per operation, and starts the next phase.
    mutating func lap(_ what: String, _ operations: Int) {
        let end = DispatchTime.now().uptimeNanoseconds
        print(String(format: "%-24@ %9.1f ms %8.0f ns/op", what as NSString, Double(end - start) / 1e6,
                     Double(end - start) / Double(max(1, operations))))
        start = DispatchTime.now().uptimeNanoseconds
    }
}

func runPhases(_ n: Int) throws {
    let directory = NSTemporaryDirectory() + "cairn-phases-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let model = try Model(Row.self)
    let options = StoreOptions(durability: .durable, compaction: .default)
    var coordinator = try Coordinator(path: directory, schema: model.schema, options: options)
    var phases = Phases()
    var detached: [Row] = []
    detached.reserveCapacity(n)
    for _ in 0..<n { detached.append(Row()) }
    phases.lap("Row() detached", n)
    detached = []

    var context = Context(coordinator: coordinator, model: model)
    context.undoManager.isEnabled = false
    var rows: [Row] = []
    rows.reserveCapacity(n)
    phases = Phases()
    createRows(n, in: context, into: &rows)
    phases.lap("create(in:)", n)
    for (i, row) in rows.enumerated() { row.a0 = Int64(i) }
    phases.lap("first set", n)
    for (i, row) in rows.enumerated() {
        row.a1 = Int64(i); row.a2 = 2; row.a3 = 3; row.a4 = 4; row.a5 = 5; row.a6 = 6; row.a7 = 7; row.a8 = 8; row.a9 = 9
    }
    phases.lap("set a1…a9", n * 9)
    var sum: Int64 = 0
    for row in rows { sum &+= row.a0 }
    phases.lap("get (loaded)", n)
    try saveInserts(context)
    phases.lap("save inserts", n)
    rows = []
    context = Context(coordinator: coordinator, model: model)
    phases.lap("release context", n)

    try coordinator.close()
    coordinator = try Coordinator(path: directory, schema: model.schema, options: options)
    phases.lap("reopen (log replay)", n)
    context = Context(coordinator: coordinator, model: model)
    context.undoManager.isEnabled = false
    let fetched = try context.fetch(FetchQuery(Row.self))
    phases.lap("fetch", n)
    for row in fetched { sum &+= row.a0 }
    phases.lap("get (fires fault)", n)
    for row in fetched { sum &+= row.a1 &+ row.a2 &+ row.a3 &+ row.a4 &+ row.a5 &+ row.a6 &+ row.a7 &+ row.a8 &+ row.a9 }
    phases.lap("get a1…a9", n * 9)
    updateRows(fetched)
    phases.lap("update a5", n)
    try saveUpdates(context)
    phases.lap("save updates", n)
    try coordinator.compact()
    phases.lap("compact", n)

    try coordinator.close()
    coordinator = try Coordinator(path: directory, schema: model.schema, options: options)
    context = Context(coordinator: coordinator, model: model)
    context.undoManager.isEnabled = false
    phases = Phases()
    let half = try fetchHalf(context, n)
    phases.lap("fetch half (scan)", n)
    for row in half { context.delete(row) }
    phases.lap("delete", half.count)
    try saveDeletes(context)
    phases.lap("save deletes", half.count)
    try compactAfterDelete(coordinator)
    phases.lap("compact after delete", n - half.count)
    try coordinator.close()
    print("checksum \(sum)")
}

// Some phases as functions of their own, so that callgrind can count one of them
// (`--toggle-collect='*saveDeletes*'`, say). The saves pass their own mark to `phaseMark`:
// identical bodies are merged into one function by the optimizer, and the toggle then
// never fires for the others.
@inline(never) func phaseMark(_ phase: Int) { phaseMarks &+= phase }
/// Written by `phaseMark` only, on the main thread (phases run there one at a time).
nonisolated(unsafe) var phaseMarks = 0
@inline(never) func fetchHalf(_ context: Context, _ n: Int) throws -> [Row] {
    try context.fetch(FetchQuery(Row.self, format: "a0 < %@", Int64(Int64(n / 2))))
}
@inline(never) func createRows(_ n: Int, in context: Context, into rows: inout [Row]) {
    for _ in 0..<n { rows.append(Row.create(in: context)) }
}
@inline(never) func updateRows(_ rows: [Row]) { for row in rows { row.a5 = row.a5 &+ 1 } }
@inline(never) func saveInserts(_ context: Context) throws { phaseMark(1); try context.save() }
@inline(never) func saveUpdates(_ context: Context) throws { phaseMark(2); try context.save() }
@inline(never) func saveDeletes(_ context: Context) throws { phaseMark(3); try context.save() }
@inline(never) func compactAfterDelete(_ coordinator: Coordinator) throws { try coordinator.compact() }
