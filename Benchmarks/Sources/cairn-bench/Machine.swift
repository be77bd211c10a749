import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What this machine can do at best, for reading the results.
struct Machine {
    var fdatasyncMilliseconds = 0.0
    var sequentialWriteMBps = 0.0
    var memcpyMBps = 0.0

    static func measure(in directory: String) -> Machine {
        var machine = Machine()
        let path = directory + "/machine.probe"
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o644)
        defer { close(fd); unlink(path) }
        let block = [UInt8](repeating: 0xAB, count: 4096)
        var offset: off_t = 0
        let rounds = 50
        var start = now()
        for _ in 0..<rounds {
            _ = block.withUnsafeBytes { pwrite(fd, $0.baseAddress, 4096, offset) }
            fdatasync(fd)
            offset += 4096
        }
        machine.fdatasyncMilliseconds = seconds(since: start) * 1000 / Double(rounds)
        let chunk = [UInt8](repeating: 0xCD, count: 1 << 20)
        let megabytes = 256
        start = now()
        for i in 0..<megabytes { _ = chunk.withUnsafeBytes { pwrite(fd, $0.baseAddress, 1 << 20, off_t(i) << 20) } }
        fsync(fd)
        machine.sequentialWriteMBps = Double(megabytes) * 1.048576 / seconds(since: start)
        let size = 256 << 20
        let source = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 64)
        let target = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 64)
        defer { source.deallocate(); target.deallocate() }
        memset(source, 1, size)
        memset(target, 0, size)
        start = now()
        for _ in 0..<4 { memcpy(target, source, size) }
        machine.memcpyMBps = 4 * Double(size) / 1e6 / seconds(since: start)
        return machine
    }
}

/// SplitMix64 (Steele, Lea and Flood): the seeded generator the workloads pick records
/// with, the same sequence for Cairn and SQLite. (Cairn's own is not public.)
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Runs this executable again with `arguments` (a child for one measurement, with its own
/// peak resident set) and returns how it ended and what it printed.
func runSelf(_ arguments: [String]) throws -> (reason: Process.TerminationReason, status: Int32, output: Data) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationReason, process.terminationStatus, data)
}

/// A child's part: runs `measure`, adds its peak resident set (and `extra`'s), prints the
/// measurement as JSON and exits; a failure goes to standard error with status 1.
func reportChild(_ what: String, _ measure: () throws -> Measurement, extra: (inout Measurement) -> Void = { _ in }) -> Never {
    do {
        var measurement = try measure()
        measurement.extra["peakRSS"] = peakResidentBytes()
        extra(&measurement)
        print(String(decoding: try JSONEncoder().encode(measurement), as: UTF8.self))
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("\(what) failed: \(error)\n".utf8))
        exit(1)
    }
}
