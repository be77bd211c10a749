import CSQLite
import Cairn
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `cairn-bench --undo-cost [N]`: the memory one undo level holds, by kind of change.
/// Each kind runs twice on N loaded rows of ten integers, undo off and on (every level
/// kept, one event per row); the difference in resident memory, over N, is a level's cost.
///
///     Benchmarks/.build/release/cairn-bench --undo-cost 100000
func runUndoCost(_ count: Int) throws {
    let directory = NSTemporaryDirectory() + "cairn-undo-cost-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let side = try CairnSide(path: directory + "/store", durability: .deferred)
    defer { side.close() }
    try side.insertRows(count)
    print("undo cost per level, \(count) levels (one event per row), resident bytes")
    for kind in ["set one attribute", "delete", "insert"] {
        var resident: [Bool: Double] = [:]
        for undo in [false, true] {
            let context = side.context(undo: undo)
            context.undoManager.levelsLimit = 0
            let rows = kind == "insert" ? [] : try context.fetch(Row.self)
            for row in rows { _ = row.a0 }  // loaded before the measure
            let before = currentResidentBytes()
            switch kind {
            case "set one attribute":
                for row in rows { row.a0 += 1; context.undoManager.endEvent() }
            case "delete":
                for row in rows { context.delete(row); context.undoManager.endEvent() }
            default:
                for i in 0..<count { fillRow(i, in: context); context.undoManager.endEvent() }
            }
            resident[undo] = currentResidentBytes() - before
            withExtendedLifetime(context) {}
        }
        let perLevel = ((resident[true] ?? 0) - (resident[false] ?? 0)) / Double(count)
        print("\(kind.padding(toLength: 20, withPad: " ", startingAt: 0)) \(String(format: "%6.0f", perLevel)) bytes per level")
    }
}

/// This process's resident set now (VmRSS), after handing freed memory back.
func currentResidentBytes() -> Double {
    #if os(Linux)
    malloc_trim(0)
    #endif
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
    return kilobytes * 1024
}
