import Foundation
import Testing
@testable import Cairn
import CairnTesting
@testable import CairnStorage

/// What the workload has done when a crash image is taken.
struct CrashTracker {
    /// Every transaction up to this one was acknowledged durable.
    var acknowledged: UInt64 = 0
    /// The highest sequence number that may be on disk (a commit in flight).
    var attempted: UInt64 = 0
    var states: [Contents] = [[:]]
    var checked = 0
    var failures: [String] = []
}

/// Opens a crash image and checks it holds a committed prefix that includes every
/// acknowledged transaction. Returns a failure description, or nil. `opened` is shown
/// the store as opened, before anything is read.
func verifyCrashImage(_ image: MemoryFileSystem, _ tracker: CrashTracker, _ label: String,
                      adjusting adjust: (inout StoreOptions) -> Void = { _ in }, opened: (Store) -> Void = { _ in }) -> String? {
    do {
        var options = memoryOptions(image)
        adjust(&options)
        let store = try Store.open(at: "/db", options: options)
        defer { try? store.close() }
        opened(store)
        let sequence = store.lastSequence
        guard sequence >= tracker.acknowledged, sequence <= tracker.attempted else {
            return "\(label): reopened at sequence \(sequence), outside [\(tracker.acknowledged), \(tracker.attempted)]"
        }
        let found = try contents(of: store)
        guard found == tracker.states[Int(sequence)] else {
            return "\(label): contents at sequence \(sequence) differ from the committed state"
        }
        return nil
    } catch {
        return "\(label): reopen failed: \(error)"
    }
}

/// Checks, at every sync of `fs`, each of `modes`' crash images with ``verifyCrashImage``
/// against what `tracker` says then, and adds the count and failures to it.
func verifyCrashImagesAtEverySync(of fs: MemoryFileSystem, modes: [MemoryFileSystem.CrashMode], tracker: Locked<CrashTracker>,
                                  adjusting adjust: @escaping @Sendable (inout StoreOptions) -> Void = { _ in },
                                  opened: @escaping @Sendable (Store) -> Void = { _ in }) {
    fs.onSync = { fs, point in
        let snapshot = tracker.value
        var failures: [String] = []
        for (index, mode) in modes.enumerated() {
            let label = "sync #\(fs.syncCount) (\(point)) mode \(index)"
            if let failure = verifyCrashImage(fs.crashImage(mode), snapshot, label, adjusting: adjust, opened: opened) { failures.append(failure) }
        }
        tracker.withLock { $0.checked += modes.count; $0.failures += failures }
    }
}

@Suite struct CrashSimulationTests {
    /// A workload of 240 transactions (mostly durable, some deferred) with a compaction
    /// every 40, crashed at every sync point with every pending write kept, dropped, or
    /// (four seeded ways) kept, dropped or garbled one by one.
    /// (Streamed: each commit's frame written in pieces, header last.)
    @Test(arguments: [false, true]) func everySyncPointReopensToACommittedPrefix(streamed: Bool) throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs, streamed: streamed))
        let tracker = Locked(CrashTracker())
        let modes: [MemoryFileSystem.CrashMode] = [.keepAll, .dropAll, .random(seed: 1), .random(seed: 2),
                                                   .random(seed: 3), .random(seed: 4)]
        verifyCrashImagesAtEverySync(of: fs, modes: modes, tracker: tracker)
        var workload = BlobWorkload(seed: 42)
        for index in 1...240 {
            let changes = workload.nextTransaction(maxBlob: 40)
            let durable = index % 5 != 0
            tracker.withLock { $0.attempted = UInt64(index); $0.states.append(workload.model) }
            let sequence = try store.commit(changes, durability: durable ? .durable : .deferred)
            #expect(sequence == UInt64(index))
            if durable { tracker.withLock { $0.acknowledged = sequence } }
            if index % 40 == 0 {
                try store.compact()
                tracker.withLock { $0.acknowledged = sequence }
            }
        }
        try store.close()
        let result = tracker.value
        #expect(result.failures.isEmpty, "\(result.failures.prefix(5))")
        #expect(result.checked >= 1000, "crash states checked: \(result.checked)")
        print("crash simulation\(streamed ? " (frames in pieces)" : ""): \(result.checked) crash states checked, \(result.failures.count) not a committed prefix")
    }
}

@Suite struct CheckpointCrashTests {
    /// The crash workload with a clean close and reopen every 12 transactions, each close
    /// writing a checkpoint (FORMAT.md §12) that later opens start from, and more written
    /// between commits as the log doubles: every sync point
    /// (commits, compactions, the opens' syncs of the log) crashed with the checkpoint's
    /// unsynced writes kept, dropped or garbled, and its rename kept or lost, reopens to
    /// a committed prefix, from the checkpoint or from the whole log. (The opens read the
    /// covered frames' headers and check their bytes on first read, as for a long log.)
    @Test func everySyncPointWithCheckpointsReopensToACommittedPrefix() throws {
        let fs = MemoryFileSystem()
        var options = checkpointing(memoryOptions(fs))
        options.periodicCheckpointMinimumRecords = 8
        options.deferredFrameCheckMinimum = 0
        var store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: options)
        let tracker = Locked(CrashTracker())
        let used = Locked(0)
        let modes: [MemoryFileSystem.CrashMode] = [.keepAll, .dropAll, .random(seed: 5), .random(seed: 6), .random(seed: 7)]
        verifyCrashImagesAtEverySync(of: fs, modes: modes, tracker: tracker, adjusting: { $0.deferredFrameCheckMinimum = 0 }) { store in
            if store.recovery.usedCheckpoint { used.withLock { $0 += 1 } }
        }
        var workload = BlobWorkload(seed: 43)
        for index in 1...100 {
            let changes = workload.nextTransaction(maxBlob: 40)
            let durable = index % 5 != 0
            tracker.withLock { $0.attempted = UInt64(index); $0.states.append(workload.model) }
            let sequence = try store.commit(changes, durability: durable ? .durable : .deferred)
            if durable { tracker.withLock { $0.acknowledged = sequence } }
            if index % 50 == 0 {
                try store.compact()
                tracker.withLock { $0.acknowledged = sequence }
            } else if index % 12 == 0 {
                try store.close()
                tracker.withLock { $0.acknowledged = sequence }
                store = try Store.open(at: "/db", options: options)
            }
        }
        try store.close()
        let result = tracker.value
        #expect(result.failures.isEmpty, "\(result.failures.prefix(5))")
        #expect(result.checked >= 500, "crash states checked: \(result.checked)")
        #expect(used.value > 50, "crash states opened from a checkpoint: \(used.value)")
        print("crash simulation with checkpoints: \(result.checked) crash states checked (\(used.value) opened from a checkpoint), \(result.failures.count) not a committed prefix")
    }
}

/// `options` with a checkpoint written at every clean close (FORMAT.md §12), its log's
/// frames in groups of a few each (§12.6), so that an open checks several.
func checkpointing(_ options: StoreOptions) -> StoreOptions {
    var options = options
    options.checkpointMinimumRecords = 1
    options.frameGroupBytes = 300
    return options
}

@Suite struct IOFaultTests {
    /// For every N: call N of a workload (open from a checkpoint, commits, compaction, more
    /// commits, a close that writes a checkpoint) fails with EIO (odd N) or ENOSPC (even N). The failing operation throws; the
    /// store's visible state is the last committed one; later writes are refused; and
    /// the store reopens to a committed prefix holding every acknowledged transaction,
    /// both as left and after a power loss.
    /// (Streamed: each commit's frame written in pieces, so a call can fail between them.)
    @Test(arguments: [false, true]) func everyFailingCallLeavesACommittedPrefix(streamed: Bool) throws {
        var n = 1
        var injected = 0, fromCheckpoint = 0
        while true {
            let base = MemoryFileSystem()
            var workload = BlobWorkload(seed: 7)
            var tracker = CrashTracker()
            do {
                let setup = try Store.open(at: "/db", schema: TestSchemas.blobs, options: checkpointing(memoryOptions(base)))
                for _ in 0..<3 {
                    let sequence = try setup.commit(workload.nextTransaction())
                    tracker.states.append(workload.model)
                    tracker.acknowledged = sequence
                    tracker.attempted = sequence
                }
                try setup.close()
            }
            let faulty = FaultInjectingFileSystem(base: base, failingCalls: [n], errno: n % 2 == 1 ? 5 : 28)
            var failed = false
            var store: Store?
            do {
                let opened = try Store.open(at: "/db", options: checkpointing(memoryOptions(faulty, streamed: streamed)))
                store = opened
                if opened.recovery.usedCheckpoint { fromCheckpoint += 1 }
                for step in 0..<10 {
                    if step == 6 {
                        try opened.compact()
                        continue
                    }
                    let changes = workload.nextTransaction()
                    let before = try contents(of: opened)
                    tracker.attempted += 1
                    tracker.states.append(workload.model)
                    do {
                        tracker.acknowledged = try opened.commit(changes)
                    } catch let error as CairnError {
                        #expect(try contents(of: opened) == before, "N=\(n): a failed commit is not visible")
                        #expect(opened.lastSequence == tracker.acknowledged, "N=\(n)")
                        #expect(error.code == .io && error.errno != nil, "N=\(n): \(error)")
                        throw error
                    }
                }
                try opened.close()
            } catch let error as CairnError {
                failed = true
                if let store {
                    #expect(throws: CairnError.self, "N=\(n): writes refused after a failure") {
                        try store.commit([.delete(RecordID(entity: 1, serial: 1))])
                    }
                    #expect((try? store.commit([])) == nil || error.code != .io, "N=\(n): poisoned")
                    try store.close()
                }
            }
            if failed {
                // A failed write is discarded: no frame follows the log's last whole frame
                // (each unsynced one lost its header; a frame written in pieces never had one).
                for name in try base.listDirectory("/db") where name.hasSuffix(".log") {
                    let log = base.contents(of: "/db/" + name) ?? []
                    log.withUnsafeBytes { bytes in
                        var offset = FileHeader.size
                        while offset < bytes.count, case .frame(_, _, _, let next) = LogFrame.parse(bytes, at: offset) { offset = next }
                        var later: Int?
                        for at in stride(from: offset, to: bytes.count - LogFrame.headerSize, by: 8) {
                            if case .frame = LogFrame.parse(bytes, at: at) { later = at; break }
                        }
                        #expect(later == nil, "N=\(n): \(name) holds a frame at \(later ?? 0), after its last whole frame at \(offset)")
                    }
                }
            }
            if !failed && faulty.callCount < n { break }  // the workload finished before call N
            if failed { injected += 1 }
            // As left (the process goes on and reopens), and after a power loss.
            let label = "N=\(n)"
            if let failure = verifyCrashImage(base.crashImage(.keepAll), tracker, label + " kept") { Issue.record("\(failure)") }
            if let failure = verifyCrashImage(base.crashImage(.dropAll), tracker, label + " dropped") { Issue.record("\(failure)") }
            n += 1
        }
        #expect(injected > 40, "faults injected: \(injected)")
        #expect(fromCheckpoint > 20, "workloads opened from a checkpoint: \(fromCheckpoint)")
        print("I/O faults\(streamed ? " (frames in pieces)" : ""): \(injected) failing calls injected, each state checked kept and dropped")
    }

    @Test func aFailedSyncPoisonsUntilReopen() throws {
        let base = MemoryFileSystem()
        let faulty = FaultInjectingFileSystem(base: base)
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(faulty))
        let id = RecordID(entity: 1, serial: 1)
        try store.commit([.put(id, [.string("a"), .bytes(Data())])])
        faulty.fail(calls: [faulty.callCount + 2])  // write succeeds, fdatasync fails
        #expect { try store.commit([.put(id, [.string("b"), .bytes(Data())])]) } throws: {
            ($0 as? CairnError)?.code == .io
        }
        #expect(try store.get(id)?.values.first == .string("a"))
        #expect { try store.commit([.delete(id)]) } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .poisoned && error.message.contains("reopen")
        }
        #expect(throws: CairnError.self) { try store.compact() }
        try store.close()
        let reopened = try Store.open(at: "/db", options: memoryOptions(base))
        // The failed commit's frame reached the page cache but maybe not the disk (after a
        // failed fsync Linux may mark the pages clean), so the store cut it off the log.
        #expect(try reopened.get(id)?.values.first == .string("a"))
        try reopened.commit([.delete(id)])
        #expect(try reopened.get(id) == nil)
    }
}

/// A failed sync on the paths other than commit (close, compaction) is handled as a
/// failed commit's: the log is cut back to what was synced, the store is poisoned, and
/// the error is reported.
@Suite struct FailedSyncPathTests {
    /// A store with one durable commit ("a") and one deferred ("b", not yet synced), whose
    /// next file-system call fails.
    static func storeWithUnsyncedCommit() throws -> (base: MemoryFileSystem, store: Store, faulty: FaultInjectingFileSystem) {
        let base = MemoryFileSystem()
        let faulty = FaultInjectingFileSystem(base: base)
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(faulty, durability: .deferred))
        try store.commit([.put(RecordID(entity: 1, serial: 1), [.string("a"), .bytes(Data())])], durability: .durable)
        try store.commit([.put(RecordID(entity: 1, serial: 2), [.string("b"), .bytes(Data())])])
        faulty.fail(calls: [faulty.callCount + 1])
        return (base, store, faulty)
    }

    @Test func aFailedSyncAtCloseCutsBackAndIsThrown() throws {
        let (base, store, _) = try Self.storeWithUnsyncedCommit()
        #expect { try store.close() } throws: { ($0 as? CairnError)?.code == .io }
        #expect(store.isClosed)
        // The process goes on: what the page cache holds of the unsynced frame was cut.
        let reopened = try Store.open(at: "/db", options: memoryOptions(base.crashImage(.keepAll)))
        #expect(try reopened.get(RecordID(entity: 1, serial: 1)) != nil)
        #expect(try reopened.get(RecordID(entity: 1, serial: 2)) == nil)
        #expect(reopened.recovery.truncatedBytes > 0, "the frame lost its header at close, and the open cuts it as a torn tail")
    }

    @Test func aFailedSyncBeforeCompactionCutsBackAndPoisons() throws {
        let (base, store, _) = try Self.storeWithUnsyncedCommit()
        #expect { try store.compact() } throws: { ($0 as? CairnError)?.code == .io }
        #expect { try store.commit([.delete(RecordID(entity: 1, serial: 1))]) } throws: { ($0 as? CairnError)?.code == .poisoned }
        let reopened = try Store.open(at: "/db", options: memoryOptions(base.crashImage(.keepAll)))
        #expect(try reopened.get(RecordID(entity: 1, serial: 1)) != nil)
        #expect(try reopened.get(RecordID(entity: 1, serial: 2)) == nil)
        #expect(reopened.recovery.truncatedBytes > 0, "the frame lost its header when the sync failed, and the open cuts it")
        try store.close()
    }
}

@Suite struct StreamedFrameTests {
    /// A commit written in pieces (header last) leaves the very bytes the one-buffer path
    /// writes for the same transaction, and reopens to it; pieces smaller than a record,
    /// records larger than a piece, deletes, and several frames in a row.
    @Test func aFrameWrittenInPiecesIsTheFrameWrittenWhole() throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs, streamed: true))
        var workload = BlobWorkload(seed: 5)
        for round in 0..<6 {
            var changes = workload.nextTransaction(maxBlob: round * 60)
            if round == 3 {
                let big = RecordID(entity: 1, serial: 9_999)
                changes.append(.put(big, [.string("big"), .bytes(Data((0..<500).map { UInt8(truncatingIfNeeded: $0) }))]))
                Cairn_apply([changes.last!], to: &workload.model)
            }
            try store.commit(changes, durability: round % 2 == 0 ? .durable : .deferred)
        }
        try store.sync()
        let logName = try #require(try fs.listDirectory("/db").first { $0.hasSuffix(".log") })
        let log = try #require(fs.contents(of: "/db/" + logName))
        var offset = FileHeader.size, frames = 0
        try log.withUnsafeBytes { bytes in
            while case .frame(let sequence, let syncedThrough, let payload, let next) = LogFrame.parse(bytes, at: offset) {
                var operations: [RecordOperation] = []
                let timestamp = try TransactionCoding.decode(UnsafeRawBufferPointer(rebasing: bytes[payload])) { id, body in
                    operations.append(body.map { .put(id, body: [UInt8]($0)) } ?? .delete(id))
                }
                var whole = ByteWriter()
                LogFrame.append(to: &whole, sequence: sequence, syncedThrough: syncedThrough) {
                    TransactionCoding.encode(operations, timestamp: timestamp, into: &$0)
                }
                #expect(Array(bytes[offset..<next]) == whole.bytes, "frame \(sequence)")
                offset = next
                frames += 1
            }
        }
        #expect(frames == 6)
        try store.close()
        let reopened = try Store.open(at: "/db", options: memoryOptions(fs))
        #expect(try contents(of: reopened) == workload.model)
        try reopened.close()
    }
}
