import CSQLite
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// cairn-bench: Cairn and SQLite side by side in one run.
///
///     swift run -c release --package-path Benchmarks cairn-bench [--scale small|full] [--only NAME] [--reps N] [--json FILE]
///     swift run -c release --package-path Benchmarks cairn-bench --phases [N]   (see Phases.swift)
///     swift run -c release --package-path Benchmarks cairn-bench --undo-cost [N]   (see UndoCost.swift)
///     swift run -c release --package-path Benchmarks cairn-bench --scaling [MAX] [--json FILE]   (see Scaling.swift)
///     swift run -c release --package-path Benchmarks cairn-bench --charts RESULTS_JSON SCALING_JSON DIR   (see Charts.swift)
///     swift run -c release --package-path Benchmarks cairn-bench --readers [N]   (see Readers.swift)
///     swift run -c release --package-path Benchmarks cairn-bench --generations [N]   (see Generations.swift)
///     swift run -c release --package-path Benchmarks cairn-bench --history [N]   (see HistoryRead.swift)
///     swift run -c release --package-path Benchmarks cairn-bench --past [N]   (see PastStates.swift)
///
/// Each repetition of each workload runs in a fresh child process and a fresh directory,
/// alternating the engines, after one warm-up run of each; the child reports its time and
/// its peak resident memory.
let arguments = Array(CommandLine.arguments.dropFirst())

if arguments.first == "--phases" {
    do {
        try runPhases(Int(arguments.dropFirst().first ?? "") ?? 200_000)
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("cairn-bench --phases: \(error)\n".utf8))
        exit(1)
    }
}

if arguments.first == "--undo-cost" {
    do {
        try runUndoCost(Int(arguments.dropFirst().first ?? "") ?? 100_000)
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("cairn-bench --undo-cost: \(error)\n".utf8))
        exit(1)
    }
}

if arguments.first == "--scaling" {
    do {
        let rest = Array(arguments.dropFirst())
        let json = rest.firstIndex(of: "--json").flatMap { $0 + 1 < rest.count ? rest[$0 + 1] : nil }
        try runScaling(maximum: Int(rest.first ?? "") ?? 10_000_000, json: json)
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("cairn-bench --scaling: \(error)\n".utf8))
        exit(1)
    }
}

if arguments.first == "--charts" {
    guard arguments.count == 4 else {
        FileHandle.standardError.write(Data("usage: cairn-bench --charts RESULTS_JSON SCALING_JSON DIRECTORY\n".utf8))
        exit(2)
    }
    do {
        try runCharts(results: arguments[1], scaling: arguments[2], directory: arguments[3])
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("cairn-bench --charts: \(error)\n".utf8))
        exit(1)
    }
}

if arguments.first == "--readers" {
    do {
        try runReaders(count: Int(arguments.dropFirst().first ?? "") ?? 1_000_000)
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("cairn-bench --readers: \(error)\n".utf8))
        exit(1)
    }
}

if arguments.first == "--history" {
    do {
        try runHistoryRead(count: Int(arguments.dropFirst().first ?? "") ?? 100_000)
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("cairn-bench --history: \(error)\n".utf8))
        exit(1)
    }
}

if arguments.first == "--past" {
    do {
        try runPastStates(records: Int(arguments.dropFirst().first ?? "") ?? 1_000_000)
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("cairn-bench --past: \(error)\n".utf8))
        exit(1)
    }
}

if arguments.first == "--generations" {
    do {
        try runGenerations(count: Int(arguments.dropFirst().first ?? "") ?? 100_000)
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("cairn-bench --generations: \(error)\n".utf8))
        exit(1)
    }
}

if arguments.first == "--generations-child", arguments.count == 3, let count = Int(arguments[2]) {
    do { try runGenerationsChild(pinned: arguments[1] == "pinned", count: count) } catch {
        FileHandle.standardError.write(Data("cairn-bench --generations-child: \(error)\n".utf8))
        exit(1)
    }
}

if arguments.first == "--follower-child", arguments.count == 3, let engine = Engine(rawValue: arguments[1]) {
    do { try runFollowerChild(engine: engine, path: arguments[2]) } catch {
        FileHandle.standardError.write(Data("cairn-bench --follower-child: \(error)\n".utf8))
        exit(1)
    }
}

if arguments.first == "--reader-child", arguments.count == 2 {
    do { try runReaderChild(directory: arguments[1]) } catch {
        FileHandle.standardError.write(Data("cairn-bench --reader-child: \(error)\n".utf8))
        exit(1)
    }
}

if arguments.first == "--scaling-child", arguments.count == 4, let step = ScalingStep(rawValue: arguments[1]), let count = Int(arguments[2]) {
    reportChild("scaling step") { try runScalingStep(step, count: count, directory: arguments[3]) }
}

if arguments.first == "--child", arguments.count == 5, let engine = Engine(rawValue: arguments[2]), let scale = Int(arguments[3]) {
    reportChild("child") {
        try runWorkload(arguments[1], engine: engine, scale: scale, directory: arguments[4])
    } extra: { measurement in
        measurement.extra["processPeakRSS"] = max(measurement.extra["peakRSS"] ?? 0, setupPeakResidentBytes)
    }
}

/// This process's peak resident set (VmHWM in /proc/self/status; ru_maxrss would
/// include the parent's, since Linux keeps it across fork and exec).
func peakResidentBytes() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
          let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "") else {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_maxrss) * 1024
    }
    return kilobytes * 1024
}

/// The process's peak resident set before ``resetPeakResident()`` last reset it (the
/// setup's, for a child that ran a workload).
nonisolated(unsafe) var setupPeakResidentBytes: Double = 0  // one thread: the child's main

/// Starts a new peak-resident window: memory freed so far is handed back to the system
/// (`malloc_trim`), then the kernel's high-water mark is reset to the current resident
/// set (writing 5 to /proc/self/clear_refs, Linux). Where that cannot be done, the peak
/// stays the whole process's.
func resetPeakResident() {
    setupPeakResidentBytes = max(setupPeakResidentBytes, peakResidentBytes())
    #if os(Linux)
    malloc_trim(0)
    #endif
    if let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") {
        try? handle.write(contentsOf: Data("5".utf8))
        try? handle.close()
    }
}

func option(_ name: String) -> String? {
    arguments.firstIndex(of: name).flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
}

let usage = "usage: cairn-bench [--scale small|full] [--only NAME] [--reps N] [--json FILE]\n       cairn-bench --phases [N]\n"
if arguments.first == "--help" || arguments.first == "-h" {
    print(usage, terminator: "")
    exit(0)
}
// Every argument is a known option and its value: a mistyped one must not start a
// 13-minute run with defaults.
for index in stride(from: 0, to: arguments.count, by: 2) {
    let name = arguments[index]
    let problem = !["--scale", "--only", "--reps", "--json"].contains(name) ? "unknown option \(name)"
        : index + 1 >= arguments.count ? "no value for \(name)" : nil
    if let problem {
        FileHandle.standardError.write(Data("cairn-bench: \(problem)\n\(usage)".utf8))
        exit(2)
    }
}
if let reps = option("--reps"), (Int(reps) ?? 0) < 1 {
    FileHandle.standardError.write(Data("cairn-bench: --reps is a number of at least 1, not \(reps)\n".utf8))
    exit(2)
}

let scaleName = option("--scale") ?? "full"
guard scaleName == "full" || scaleName == "small" else {
    FileHandle.standardError.write(Data("cairn-bench: --scale is small or full\n".utf8))
    exit(2)
}
let scale = scaleName == "small" ? 10 : 1
let repetitions = Int(option("--reps") ?? "") ?? 5
let selected = option("--only").map { only in workloadNames.filter { $0.hasPrefix(only) } } ?? workloadNames
guard !selected.isEmpty else {
    FileHandle.standardError.write(Data("cairn-bench: no workload named \(option("--only") ?? "")\n".utf8))
    exit(2)
}
let scratch = NSTemporaryDirectory() + "cairn-bench-\(UUID().uuidString)"
try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: scratch) }

func runChild(_ workload: String, _ engine: Engine) throws -> Measurement {
    let directory = scratch + "/\(workload)-\(engine.rawValue)-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let (_, status, data) = try runSelf(["--child", workload, engine.rawValue, String(scale), directory])
    guard status == 0 else { throw BenchError("\(workload) on \(engine) failed") }
    return try JSONDecoder().decode(Measurement.self, from: data)
}

// The machine's limits, measured once.
let machine = Machine.measure(in: scratch)
print("machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB; "
      + String(format: "fdatasync of a 4 KiB append %.3f ms, sequential write %.0f MB/s, memcpy %.0f MB/s",
               machine.fdatasyncMilliseconds, machine.sequentialWriteMBps, machine.memcpyMBps))
print("scale: \(scaleName), \(repetitions) repetitions after a warm-up, engines alternating, a fresh process and directory each")
print("RSS: the peak resident set of a workload's timed part (what its setup freed handed back first); the whole process's is in --json\n")
let header = "workload".padding(toLength: 24, withPad: " ", startingAt: 0)
    + "cairn median (min–max) s      sqlite median (min–max) s     ratio  cairn RSS  sqlite RSS  notes"
print(header)

struct Summary: Codable {
    var median: Double
    var min: Double
    var max: Double
    var operationsPerSecond: Double
    var peakRSSBytes: Double
    var extra: [String: Double]
}

var results: [[String: Any]] = []
var jsonWorkloads: [String] = []
for workload in selected {
    do {
        _ = try runChild(workload, .cairn)
        _ = try runChild(workload, .sqlite)
        var runs: [Engine: [Measurement]] = [.cairn: [], .sqlite: []]
        for repetition in 0..<repetitions {
            let order: [Engine] = repetition % 2 == 0 ? [.cairn, .sqlite] : [.sqlite, .cairn]
            for engine in order { runs[engine]!.append(try runChild(workload, engine)) }
        }
        func summarize(_ list: [Measurement]) -> Summary {
            let times = list.map(\.seconds).sorted()
            let median = times[times.count / 2]
            var extra: [String: Double] = [:]
            for key in Set(list.flatMap { $0.extra.keys }) where key != "peakRSS" && key != "processPeakRSS" { extra[key] = list.last?.extra[key] }
            extra["processPeakRSSBytes"] = list.compactMap { $0.extra["processPeakRSS"] }.max()
            return Summary(median: median, min: times.first!, max: times.last!,
                           operationsPerSecond: Double(list[0].operations) / median,
                           peakRSSBytes: list.compactMap { $0.extra["peakRSS"] }.max() ?? 0, extra: extra)
        }
        let cairn = summarize(runs[.cairn]!), sqlite = summarize(runs[.sqlite]!)
        let ratio = sqlite.median / cairn.median
        var notes = ""
        if let before = cairn.extra["bytesBefore"], let after = cairn.extra["bytesAfter"],
           let sBefore = sqlite.extra["bytesBefore"], let sAfter = sqlite.extra["bytesAfter"] {
            notes = String(format: "bytes cairn %.1f→%.1f MB, sqlite %.1f→%.1f MB", before / 1e6, after / 1e6, sBefore / 1e6, sAfter / 1e6)
        }
        if let a = cairn.extra["checksum"], let b = sqlite.extra["checksum"], a != b { notes += " CHECKSUMS DIFFER" }
        if let a = cairn.extra["matched"], let b = sqlite.extra["matched"], a != b { notes += " MATCH COUNTS DIFFER" }
        func range(_ s: Summary) -> String { String(format: "%.4f (%.4f–%.4f)", s.median, s.min, s.max).padding(toLength: 30, withPad: " ", startingAt: 0) }
        print(workload.padding(toLength: 24, withPad: " ", startingAt: 0) + range(cairn) + range(sqlite)
              + String(format: "%5.2f  %7.1f MB  %7.1f MB  ", ratio, cairn.peakRSSBytes / 1e6, sqlite.peakRSSBytes / 1e6) + notes)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let c = String(decoding: try encoder.encode(cairn), as: UTF8.self)
        let s = String(decoding: try encoder.encode(sqlite), as: UTF8.self)
        jsonWorkloads.append(#"{"name": "\#(workload)", "cairn": \#(c), "sqlite": \#(s), "ratio": \#(ratio)}"#)
    } catch {
        print(workload.padding(toLength: 24, withPad: " ", startingAt: 0) + "failed: \(error)")
    }
}

if let path = option("--json") {
    let machineJSON = String(format: #"{"cores": %d, "memoryBytes": %llu, "fdatasyncMilliseconds": %.4f, "sequentialWriteMBps": %.1f, "memcpyMBps": %.1f, "scale": "%@", "repetitions": %d}"#,
                             ProcessInfo.processInfo.activeProcessorCount, ProcessInfo.processInfo.physicalMemory,
                             machine.fdatasyncMilliseconds, machine.sequentialWriteMBps, machine.memcpyMBps, scaleName, repetitions)
    let text = #"{"machine": \#(machineJSON), "workloads": [\#(jsonWorkloads.joined(separator: ", "))]}"#
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    print("\nwrote \(path)")
}
