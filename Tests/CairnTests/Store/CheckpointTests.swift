import Foundation
import Testing
@testable import CairnStorage

/// Checkpoints (FORMAT.md §12): written by a clean close, mapped by the next open in place
/// of replaying the log, and ignored (the log replayed) whenever they do not hold.
@Suite struct CheckpointTests {
    static let checkpointPath = "/db/" + StoreFileName.checkpoint(4)

    static func options(_ fs: MemoryFileSystem) -> StoreOptions {
        var options = memoryOptions(fs)
        options.checkpointMinimumRecords = 1
        options.openIndexTailLimit = 0
        return options
    }

    /// Everything an open gives a reader: records, counts, lookups through every index,
    /// the next serial (allocated, so it moves on), statistics.
    struct Seen: Equatable {
        var contents: Contents
        var counts: [Int]
        var lookups: [[RecordID]]
        var lastSequence: UInt64
        var logRecordVersions: Int
        var shadowed: Int
    }

    static func seen(_ store: Store) throws -> Seen {
        var random = SplitMix64(seed: 3)
        var lookups: [[RecordID]] = []
        for slot in [0, 1, 3] {
            for _ in 0..<4 {
                for condition in StoredIndexTests.conditions(&random, slot: slot) {
                    let wanted: IndexCondition
                    if slot == 3, case .equal(let values) = condition {
                        wanted = .equal(values.map { value -> Value in if case .int64(let n) = value { return .int32(Int32(n)) }; return value })
                    } else {
                        wanted = condition
                    }
                    lookups.append(try store.indexedIDs(entity: 1, slot: slot, matching: wanted).sorted())
                }
            }
        }
        let statistics = store.statistics
        return Seen(contents: try contents(of: store), counts: [store.count(entity: 1), store.count(entity: 2)], lookups: lookups,
                    lastSequence: store.lastSequence, logRecordVersions: statistics.logRecordVersions,
                    shadowed: statistics.shadowedSnapshotRecords)
    }

    /// Puts new records, updates and deletes snapshot and log records, in `commits` commits.
    static func churn(_ store: Store, _ random: inout SplitMix64, model: inout Contents, commits: Int, serialBase: UInt64) throws {
        for commit in 0..<commits {
            var changes: [Change] = []
            for n in 0..<40 {
                let id = try store.allocateID(entity: 1)
                var values = StoredIndexTests.values(&random, serial: serialBase + UInt64(commit * 100 + n))
                if n % 7 == 0 { values[0] = .int64(Int64(n)) }
                changes.append(.put(id, values))
            }
            let existing = model.keys.sorted()
            var touched = Set<RecordID>()
            for _ in 0..<10 {
                let id = existing[Int(random.next() % UInt64(existing.count))]
                guard touched.insert(id).inserted else { continue }
                if random.next() % 3 == 0 {
                    changes.append(.delete(id))
                } else {
                    var values = StoredIndexTests.values(&random, serial: 0)
                    values[3] = model[id]?[3] ?? values[3]  // (codes stay unique)
                    changes.append(.put(id, values))
                }
            }
            apply(changes, to: &model)
            try store.commit(changes)
        }
    }

    /// A compacted store whose log then took `commits` commits of churn, closed cleanly
    /// (so with a checkpoint), and the records it holds.
    static func checkpointedStore(seed: UInt64, commits: Int = 3) throws -> (MemoryFileSystem, Contents, SplitMix64) {
        let fs = try StoredIndexTests.compactedStore()
        var random = SplitMix64(seed: seed)
        let store = try Store.open(at: "/db", options: options(fs))
        var model = try contents(of: store)
        try churn(store, &random, model: &model, commits: commits, serialBase: 1_000)
        try store.close()
        return (fs, model, random)
    }

    static func read(_ fs: MemoryFileSystem, _ path: String = checkpointPath) throws -> [UInt8] {
        try fs.open(path, create: false, truncate: false).read(at: 0, count: 1 << 30)
    }

    static func write(_ bytes: [UInt8], to fs: MemoryFileSystem, _ path: String = checkpointPath) throws {
        let file = try fs.open(path, create: true, truncate: true)
        defer { file.close() }
        try file.write(bytes, at: 0)
    }

    /// An open from the checkpoint sees what an open that replays the whole log sees, and
    /// so do later commits over the mapped tables (updates in place, growth, deletes),
    /// across further closes and checkpoints.
    @Test func anOpenFromTheCheckpointIsTheReplayedOne() throws {
        let (fs, initial, seeded) = try Self.checkpointedStore(seed: 47, commits: 5)
        var model = initial, random = seeded
        var store: Store
        #expect(fs.exists(Self.checkpointPath))

        for round in 0..<3 {
            store = try Store.open(at: "/db", options: Self.options(fs))
            #expect(store.recovery.usedCheckpoint, "round \(round)")
            #expect(store.recovery.ignoredCheckpoint == nil)
            #expect(store.recovery.replayedTransactions == 0)
            let fromCheckpoint = try Self.seen(store)
            #expect(fromCheckpoint.contents == model)
            let nextFromCheckpoint = try store.allocateID(entity: 1)
            try store.close()

            let saved = try Self.read(fs)
            try fs.remove(Self.checkpointPath)
            store = try Store.open(at: "/db", options: Self.options(fs))
            #expect(!store.recovery.usedCheckpoint)
            #expect(try Self.seen(store) == fromCheckpoint)
            #expect(try store.allocateID(entity: 1) == nextFromCheckpoint)
            try store.close()
            #expect(fs.exists(Self.checkpointPath), "the replaying open's close wrote one")
            try Self.write(saved, to: fs)

            // Commits over the mapped tables, then a clean close writes the next checkpoint.
            store = try Store.open(at: "/db", options: Self.options(fs))
            #expect(store.recovery.usedCheckpoint)
            try Self.churn(store, &random, model: &model, commits: 3 + round * 20, serialBase: UInt64(5_000 + round * 10_000))
            #expect(try Self.seen(store).contents == model)
            try store.close()
        }
        store = try Store.open(at: "/db", options: Self.options(fs))
        #expect(try contents(of: store) == model)
        try store.compact()
        #expect(!fs.exists(Self.checkpointPath), "a compaction retires the log's checkpoint")
        try store.close()
    }

    /// A checkpoint of an earlier point of the same log (as a version of Cairn that does
    /// not write checkpoints leaves one, appending after it) is used, and the frames after
    /// it replayed.
    @Test func anOlderCheckpointOfTheLogIsUsedAndTheRestReplayed() throws {
        let (fs, initial, seeded) = try Self.checkpointedStore(seed: 48, commits: 3)
        var model = initial, random = seeded
        var store: Store
        let older = try Self.read(fs)
        store = try Store.open(at: "/db", options: Self.options(fs))
        try Self.churn(store, &random, model: &model, commits: 4, serialBase: 2_000)
        try store.close()
        try Self.write(older, to: fs)
        store = try Store.open(at: "/db", options: Self.options(fs))
        defer { try? store.close() }
        #expect(store.recovery.usedCheckpoint)
        #expect(store.recovery.replayedTransactions == 4)
        #expect(try Self.seen(store).contents == model)
    }

    /// Damage anywhere in a checkpoint (header, directory, each table, each run), or a
    /// checkpoint of other bytes of log, is found before anything is used: the open
    /// replays the log instead, says why, and removes the file. Never a trap.
    @Test func aDamagedOrForeignCheckpointIsIgnoredAndTheLogReplayed() throws {
        let (fs, model, _) = try Self.checkpointedStore(seed: 49, commits: 3)
        var store: Store
        let good = try Self.read(fs)
        let directory = try good.withUnsafeBytes {
            try CheckpointDirectory.decode(UnsafeRawBufferPointer(rebasing: $0[FileHeader.size...]), base: FileHeader.size, fileSize: good.count)
        }
        #expect(directory.entities.count == 1)
        #expect(directory.entities.first?.runs.map(\.attribute) == [0, 3], "the integer indexes' runs; the string one has none")
        var places = [0, 20, 61, FileHeader.size + 2, FileHeader.size + 9, FileHeader.size + 40, FileHeader.size + 100,
                      directory.frameGroups.offset + 4]
        for entity in directory.entities {
            places += [entity.keys.offset + 8, entity.keys.offset + entity.keys.length - 1, entity.values.offset + 3]
            for run in entity.runs { places += [run.nulls.offset + 1, run.keyed.offset + 5, run.keyed.offset + run.keyed.length - 2] }
        }
        var damaged: [[UInt8]] = places.filter { $0 < good.count }.map { place in
            var bytes = good
            bytes[place] ^= 0x20
            return bytes
        }
        damaged.append(Array(good.prefix(good.count / 2)))  // cut short
        damaged.append([])
        for (number, bytes) in damaged.enumerated() {
            try Self.write(bytes, to: fs)
            store = try Store.open(at: "/db", options: Self.options(fs))
            #expect(!store.recovery.usedCheckpoint, "damage \(number)")
            #expect(store.recovery.ignoredCheckpoint != nil, "damage \(number)")
            #expect(!fs.exists(Self.checkpointPath), "damage \(number): removed")
            #expect(try contents(of: store) == model)
            try store.close()
        }
        // A checkpoint whose frames are not the log's, every checksum of its own made to
        // hold: its last frame of another sequence, or elsewhere, or a group of frames
        // whose checksums are not the log's.
        let changes: [(String, (inout CheckpointDirectory, inout [UInt8]) -> Void)] = [
            ("frame groups hold", { directory, _ in directory.lastSequence += 1 }),
            ("not made of this log", { directory, _ in directory.lastFrameOffset += 8 }),
            ("not made of this log", { directory, bytes in
                let groups = directory.frameGroups
                bytes[groups.offset + 12] ^= 1
                directory.frameGroups.checksum = CRC32C.masked(bytes[groups.offset..<(groups.offset + groups.length)])
            }),
        ]
        for (reason, change) in changes {
            var foreign = directory, bytes = good
            change(&foreign, &bytes)
            try Self.write(Array(bytes[..<FileHeader.size]) + foreign.encoded() + Array(bytes[(FileHeader.size + foreign.encoded().count)...]), to: fs)
            store = try Store.open(at: "/db", options: Self.options(fs))
            #expect(!store.recovery.usedCheckpoint)
            #expect(store.recovery.ignoredCheckpoint?.contains(reason) == true, "\(store.recovery)")
            #expect(try contents(of: store) == model)
            try store.close()
        }
    }

    /// A log torn after the checkpoint's offset (a crash in the middle of a later commit)
    /// is judged on the whole log's word: the open replays all of it, and cuts the torn
    /// frame as it would without a checkpoint.
    @Test func aTornTailPastTheCheckpointIsJudgedByTheWholeLog() throws {
        let (fs, initial, seeded) = try Self.checkpointedStore(seed: 51, commits: 3)
        var model = initial, random = seeded
        var store: Store
        store = try Store.open(at: "/db", options: Self.options(fs))
        #expect(store.recovery.usedCheckpoint)
        let kept = model
        let before = store.log.withLock { $0!.appendOffset }
        try Self.churn(store, &random, model: &model, commits: 1, serialBase: 2_000)
        let after = store.log.withLock { $0!.appendOffset }
        let crashed = fs.crashImage(.keepAll)  // (no clean close: the checkpoint stays the first one)
        try store.close()
        let log = try crashed.open("/db/" + StoreFileName.log(4), create: false, truncate: false)
        try log.write([UInt8](repeating: 0xA5, count: 16), at: Int64((before + after) / 2))
        log.close()
        store = try Store.open(at: "/db", options: Self.options(crashed))
        defer { try? store.close() }
        #expect(!store.recovery.usedCheckpoint)
        #expect(store.recovery.ignoredCheckpoint?.contains("torn") == true, "\(store.recovery)")
        #expect(store.recovery.truncatedAt == Int64(before))
        #expect(try contents(of: store) == kept)
    }

    /// `verify()` replays the log a checkpoint covers and compares: a checkpoint written
    /// right passes; one whose checksums hold but whose entries or counts differ from the
    /// log's (as a bug in its writer would leave) is reported, where the open trusted it.
    @Test func verifyComparesTheCheckpointWithItsLog() throws {
        let (fs, model, _) = try Self.checkpointedStore(seed: 50, commits: 4)
        var store: Store
        store = try Store.open(at: "/db", options: Self.options(fs))
        #expect(store.recovery.usedCheckpoint)
        #expect(store.verify().isEmpty, "\(store.verify())")
        try store.close()

        let good = try Self.read(fs)
        let directory = try good.withUnsafeBytes {
            try CheckpointDirectory.decode(UnsafeRawBufferPointer(rebasing: $0[FileHeader.size...]), base: FileHeader.size, fileSize: good.count)
        }
        /// The file with `change` made to its bytes and directory, every checksum made to hold again.
        func rewritten(_ change: (inout [UInt8], inout CheckpointDirectory) -> Void) throws {
            var bytes = good, changed = directory
            change(&bytes, &changed)
            for index in changed.entities.indices {
                for keyPath in [\CheckpointDirectory.Entity.keys, \CheckpointDirectory.Entity.values] {
                    let section = changed.entities[index][keyPath: keyPath]
                    changed.entities[index][keyPath: keyPath].checksum = CRC32C.masked(bytes[section.offset..<(section.offset + section.length)])
                }
            }
            let encoded = changed.encoded()
            bytes.replaceSubrange(FileHeader.size..<(FileHeader.size + encoded.count), with: encoded)
            try Self.write(bytes, to: fs)
        }
        // Two records' entries swapped: each points at the other's body.
        try rewritten { bytes, directory in
            let entity = directory.entities[0]
            let live = (0..<entity.bucketCount).filter { bucket in
                let at = entity.values.offset + bucket * 8
                let value = bytes[at..<(at + 8)].withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                return value != 0 && value != .max
            }
            let a = entity.values.offset + live[0] * 8, b = entity.values.offset + live[1] * 8
            let first = Array(bytes[a..<(a + 8)])
            bytes.replaceSubrange(a..<(a + 8), with: bytes[b..<(b + 8)])
            bytes.replaceSubrange(b..<(b + 8), with: first)
        }
        store = try Store.open(at: "/db", options: Self.options(fs))
        #expect(store.recovery.usedCheckpoint, "its checksums hold")
        var problems = store.verify()
        #expect(problems.filter { $0.message.contains("checkpoint's entry differs") }.count == 2, "\(problems)")
        #expect(!problems.contains { $0.message.contains("index run") }, "the runs were made of the right values: \(problems)")
        try store.close()
        // A record count off by one.
        try rewritten { _, directory in directory.entities[0].recordCount += 1 }
        store = try Store.open(at: "/db", options: Self.options(fs))
        #expect(store.recovery.usedCheckpoint)
        #expect(store.count(entity: 1) == model.count + 1, "the open trusted the checkpoint")
        problems = store.verify()
        #expect(problems.count == 1 && problems.first?.message.contains("counts") == true, "\(problems)")
        try store.close()
    }

    /// Between commits, a checkpoint is written each time the log's overlay doubles past
    /// the periodic minimum, with no close: a crash after it opens from it and replays
    /// only the commits since.
    @Test func aCheckpointIsWrittenBetweenCommitsAsTheLogDoubles() throws {
        let fs = try StoredIndexTests.compactedStore()
        var options = Self.options(fs)
        options.periodicCheckpointMinimumRecords = 100
        var random = SplitMix64(seed: 52)
        let store = try Store.open(at: "/db", options: options)
        defer { try? store.close() }
        var model = try contents(of: store)
        var written: [Int] = []
        for commit in 0..<12 {
            try Self.churn(store, &random, model: &model, commits: 1, serialBase: UInt64(1_000 + commit * 100))
            let records = store.state.withLock { $0.checkpointRecords }
            if records != written.last ?? 0 { written.append(records) }
        }
        // (Each commit adds about 45 records: checkpoints at 100 or more, then at twice the last.)
        #expect(written.count >= 2, "\(written)")
        #expect(written.first.map { $0 >= 100 && $0 < 150 } == true, "\(written)")
        for (before, after) in zip(written, written.dropFirst()) { #expect(after >= 2 * before, "\(written)") }
        let crashed = fs.crashImage(.keepAll)
        let reopened = try Store.open(at: "/db", options: Self.options(crashed))
        defer { try? reopened.close() }
        #expect(reopened.recovery.usedCheckpoint)
        #expect(reopened.recovery.replayedTransactions > 0 && reopened.recovery.replayedTransactions < 12, "\(reopened.recovery)")
        #expect(try Self.seen(reopened).contents == model)
    }

    /// A tail long enough to have its values read and sorted in parts on several threads,
    /// then merged, at the close: the open from its checkpoint answers lookups as a
    /// replaying open does, and verify finds the runs those of the log.
    @Test func aLongTailsRunsAreMergedIntoTheCheckpointInOrder() throws {
        let fs = try StoredIndexTests.compactedStore()
        var random = SplitMix64(seed: 53)
        var store = try Store.open(at: "/db", options: Self.options(fs))
        var changes: [Change] = []
        for serial in 0..<(SecondaryIndex.partsMinimum + 5_000) {
            var values = StoredIndexTests.values(&random, serial: UInt64(serial) + 1_000)
            if serial % 9 == 0 { values[0] = .null }
            changes.append(.put(try store.allocateID(entity: 1), values))
        }
        try store.commit(changes)
        try store.close()
        store = try Store.open(at: "/db", options: Self.options(fs))
        #expect(store.recovery.usedCheckpoint)
        #expect(store.verify().isEmpty)
        let fromCheckpoint = try Self.seen(store)
        try store.close()
        try fs.remove(Self.checkpointPath)
        store = try Store.open(at: "/db", options: Self.options(fs))
        defer { try? store.close() }
        #expect(!store.recovery.usedCheckpoint)
        #expect(try Self.seen(store) == fromCheckpoint)
    }
}
