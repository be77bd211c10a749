import CairnCollections
import Dispatch
import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A writer process is killed with SIGKILL at random moments (seeded); after each kill
/// the store must hold every transaction the writer acknowledged, and no half of one.
@Suite struct SIGKILLSoakTests {
    @Test func everyAcknowledgedTransactionSurvivesAKill() throws {
        try soak(kills: Int(ProcessInfo.processInfo.environment["CAIRN_SOAK_KILLS"] ?? "") ?? 100, blobBytes: 0)
    }

    /// The same with frames larger than the log's preallocation (4 MiB), written in
    /// pieces: a kill mid-frame leaves a torn frame of megabytes, which must open by itself.
    @Test func everyAcknowledgedTransactionSurvivesAKillDuringFramesLargerThanThePreallocation() throws {
        try soak(kills: Int(ProcessInfo.processInfo.environment["CAIRN_SOAK_KILLS"] ?? "").map { $0 / 4 } ?? 24, blobBytes: 5 << 20,
                 pause: 600)
    }

    /// Starts `cairn-soak-writer` with `arguments` and waits until it has opened the
    /// store (its `ready` line, or its end); its standard output so far.
    static func startWriter(_ arguments: [String]) throws -> (Process, Pipe, String) {
        let process = Process()
        process.executableURL = CLI.binary.deletingLastPathComponent().appendingPathComponent("cairn-soak-writer")
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        var text = ""
        while !text.contains("ready") {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        return (process, out, text)
    }

    /// Kills the writer `kills` times, after a pause of up to `pause` ms each, and checks
    /// the store after each kill.
    func soak(kills: Int, blobBytes: Int, pause: UInt64 = 40) throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["CAIRN_SEED"] ?? "") ?? 2026
        var random = SplitMix64(seed: seed)
        let directory = temporaryDirectory() + "/soak"
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        var acknowledged: Int64 = 0
        var survived = 0
        for round in 0..<kills {
            // Started, it has opened the store; then it commits for a while.
            let (process, out, started) = try Self.startWriter([directory] + (blobBytes > 0 ? ["--blob", "\(blobBytes)"] : []))
            var text = started
            Thread.sleep(forTimeInterval: Double(random.next() % pause) / 1000)
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            text += String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            for line in text.split(separator: "\n") where line.hasPrefix("ack ") {
                if let n = Int64(line.dropFirst(4)) { acknowledged = max(acknowledged, n) }
            }
            let store: Store
            do { store = try Store.open(at: directory) } catch {
                Issue.record("seed \(seed) round \(round): the store does not open after a kill: \(error)")
                return
            }
            let x = try store.get(RecordID(entity: 1, serial: 1))?.values.first
            let y = try store.get(RecordID(entity: 1, serial: 2))?.values.first
            let entries = store.count(entity: 2)
            try store.close()
            let value: Int64
            if case .int64(let v)? = x { value = v } else { value = 0 }
            #expect(x == y, "seed \(seed) round \(round): half a transaction is visible (\(String(describing: x)) vs \(String(describing: y)))")
            #expect(value >= acknowledged, "seed \(seed) round \(round): acknowledged \(acknowledged) but the store holds \(value)")
            #expect(Int64(entries) == value, "seed \(seed) round \(round): \(entries) entries for counter \(value)")
            if x == y && value >= acknowledged { survived += 1 }
        }
        print("SIGKILL soak: \(survived) of \(kills) kills survived; \(acknowledged) transactions acknowledged (seed \(seed))")
        #expect(survived == kills)
    }
}

/// Readers beside a writer process that is killed with SIGKILL again and again (and
/// compacts as it goes): a reader that follows the writer (`advance()`), readers opened
/// afresh, and `cairn export` processes see only whole committed states, in order, and
/// keep working across every kill.
@Suite struct ReaderSoakTests {
    /// The soak writer's invariant: both counters equal, and one entry per transaction;
    /// the counter then, or nil if the state is not whole. (Before its first commit the
    /// store holds no counter and no entry: counter 0.)
    static func check(_ store: Store) throws -> Int64? {
        let x = try store.get(RecordID(entity: 1, serial: 1)), y = try store.get(RecordID(entity: 1, serial: 2))
        if x == nil, y == nil { return store.count(entity: 2) == 0 ? 0 : nil }
        guard case .int64(let x)? = x?.values.first,
              case .int64(let y)? = y?.values.first, x == y, store.count(entity: 2) == Int(x) else { return nil }
        return x
    }

    @Test func readersSeeWholeStatesWhileTheWriterIsKilled() throws {
        let kills = Int(ProcessInfo.processInfo.environment["CAIRN_READER_SOAK_KILLS"] ?? "") ?? 12
        let seed = UInt64(ProcessInfo.processInfo.environment["CAIRN_SEED"] ?? "") ?? 58
        var random = SplitMix64(seed: seed)
        let directory = temporaryDirectory() + "/soak"
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        let options = {
            var options = StoreOptions(compaction: .manual)
            options.readOnly = true
            options.createIfMissing = false
            return options
        }()

        let stop = Protected(false)
        let problems = Protected<[String]>([])
        let seen = Protected((followed: 0, opened: 0))
        let finalFollowed = Protected<Int64?>(nil)
        // On threads of their own: a loop on a Dispatch queue could wait for a free worker
        // until the test is over, on a busy machine with two cores.
        let done = DispatchGroup()
        func startReaders() {
            done.enter()
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                do {
                    let follower = try Store.open(at: directory, options: options)
                    defer { try? follower.close() }
                    var last: Int64 = -1
                    while !stop.withLock({ $0 }) {
                        _ = try follower.advance()
                        guard let x = try Self.check(follower) else {
                            problems.withLock { $0.append("the follower saw half a transaction at sequence \(follower.lastSequence)") }
                            return
                        }
                        if x < last { problems.withLock { $0.append("the follower went back from \(last) to \(x)") } }
                        if x > last { seen.withLock { $0.followed += 1 } }
                        last = x
                    }
                    // After the last kill: caught up with everything the writers committed.
                    _ = try follower.advance()
                    finalFollowed.withLock { $0 = try? Self.check(follower) }
                } catch {
                    problems.withLock { $0.append("the follower failed: \(error)") }
                }
            }
            Thread.detachNewThread {
                defer { done.leave() }
                while !stop.withLock({ $0 }) {
                    do {
                        let reader = try Store.open(at: directory, options: options)
                        if try Self.check(reader) == nil { problems.withLock { $0.append("a reader opened on half a transaction") } }
                        try reader.close()
                        seen.withLock { $0.opened += 1 }
                    } catch {
                        problems.withLock { $0.append("a reader's open failed: \(error)") }
                    }
                }
            }
        }

        for round in 0..<kills {
            let (process, _, _) = try SIGKILLSoakTests.startWriter([directory])
            if round == 0 { startReaders() }
            let export = try CLI.run(["export", directory])
            #expect(export.status == 0, "round \(round): \(export.err)")
            let counters = export.out.split(separator: "\n").filter { $0.contains(#""entity": "Counter""#) }
            let entries = export.out.split(separator: "\n").filter { $0.contains(#""entity": "Entry""#) }.count
            #expect(counters.count == 2 && counters.allSatisfy { $0.contains(#""value": \#(entries)"#) },
                    "round \(round): an export is not a whole state: \(counters), \(entries) entries")
            Thread.sleep(forTimeInterval: Double(5 + random.next() % 60) / 1000)
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        stop.withLock { $0 = true }
        done.wait()
        let (followed, opened) = seen.withLock { $0 }
        #expect(problems.withLock { $0 }.isEmpty, "seed \(seed): \(problems.withLock { $0 }.prefix(5))")
        #expect(followed > 1 && opened > 0, "the readers kept working: \(followed) states followed, \(opened) opens")
        // The follower, open since the first round, ends where a reader opened now starts.
        let last = try Store.open(at: directory, options: options)
        defer { try? last.close() }
        #expect(finalFollowed.withLock { $0 } == (try Self.check(last)), "the follower did not follow the writers to the end")
        #expect(try Self.check(last).map { $0 > 0 } == true)
    }
}
