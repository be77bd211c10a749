import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A store written by a known sequence of transactions, with the expected contents
/// after each: `states[s]` is the store after sequence number `s`.
struct CanonicalStore {
    let fs: MemoryFileSystem
    let states: [Contents]
    let logPath: String
    let snapshotPath: String
    let manifestPath = "/db/MANIFEST"

    init(_ transactions: [[Change]], compactAfter: Int? = nil, schema: Schema = TestSchemas.blobs) throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: schema, options: memoryOptions(fs))
        var model: Contents = [:]
        var states = [model]
        for (index, changes) in transactions.enumerated() {
            try store.commit(changes)
            apply(changes, to: &model)
            states.append(model)
            if index + 1 == compactAfter { try store.compact() }
        }
        try store.close()
        let manifest = try Store.readManifest(in: "/db", fileSystem: fs)
        self.fs = fs
        self.states = states
        logPath = "/db/" + StoreFileName.log(manifest.logNumber)
        snapshotPath = "/db/" + StoreFileName.snapshot(manifest.snapshotNumber)
    }

    var logBytes: [UInt8] { fs.contents(of: logPath) ?? [] }

    /// (start, end) of each frame in the log, in order.
    var frames: [(start: Int, end: Int, sequence: UInt64)] {
        logBytes.withUnsafeBytes { buffer in
            var result: [(Int, Int, UInt64)] = []
            var offset = FileHeader.size
            while case .frame(let sequence, _, _, let next) = LogFrame.parse(buffer, at: offset) {
                result.append((offset, next, sequence))
                offset = next
            }
            return result
        }
    }

    /// A copy of the file system with `path` replaced by `bytes`.
    /// Calls `body` once for every bit of the file at `path` (within `bytes`, default all),
    /// with an image of the store in which that one bit is flipped.
    func withEveryBitFlipped(in path: String, bytes range: Range<Int>? = nil,
                             _ body: (_ fs: MemoryFileSystem, _ byte: Int, _ bit: Int) throws -> Void) throws {
        let bytes = fs.contents(of: path) ?? []
        for byte in range ?? 0..<bytes.count {
            for bit in 0..<8 {
                var damaged = bytes
                damaged[byte] ^= UInt8(1) << UInt8(bit)
                try body(try image(replacing: path, with: damaged), byte, bit)
            }
        }
    }

    func image(replacing path: String, with bytes: [UInt8]) throws -> MemoryFileSystem {
        let copy = fs.crashImage(.keepAll)
        try copy.setContents(of: path, to: bytes)
        return copy
    }
}

func smallTransactions(_ count: Int, seed: UInt64, maxBlob: Int = 24) -> [[Change]] {
    var workload = BlobWorkload(seed: seed)
    return (0..<count).map { _ in workload.nextTransaction(maxBlob: maxBlob) }
}

@Suite struct TruncationTests {
    /// Three canonical logs: small records; records larger than a preallocation chunk
    /// (4 KiB here), so frames span chunks; multi-record transactions.
    static let canonicalLogs: [(String, @Sendable () throws -> CanonicalStore)] = [
        ("small records", { try CanonicalStore(smallTransactions(12, seed: 1, maxBlob: 8)) }),
        ("records spanning chunks", {
            try CanonicalStore((1...2).map { n in
                [.put(RecordID(entity: 1, serial: UInt64(n)),
                      [.string("big\(n)"), .bytes(Data(repeating: UInt8(n), count: 3800 + n * 700))])]
            })
        }),
        ("multi-record transactions", {
            try CanonicalStore((0..<4).map { t in
                (1...5).map { r in .put(RecordID(entity: 1, serial: UInt64(t * 5 + r)), [.string("r\(t).\(r)"), .bytes(Data([UInt8(r)]))]) }
            } + [[.delete(RecordID(entity: 1, serial: 1)), .delete(RecordID(entity: 1, serial: 7))]])
        }),
    ]

    @Test(arguments: 0..<3)
    func everyTruncationReopensToTheCommittedPrefix(which: Int) throws {
        let (name, make) = Self.canonicalLogs[which]
        let canonical = try make()
        let bytes = canonical.logBytes
        let frames = canonical.frames
        #expect(frames.count == canonical.states.count - 1, "\(name): all frames parse")
        let validEnd = frames.last!.end
        var checked = 0
        for cut in 0...validEnd {
            let fs = try canonical.image(replacing: canonical.logPath, with: Array(bytes[..<cut]))
            if cut < FileHeader.size {
                #expect(throws: CairnError.self, "\(name) cut \(cut)") { try Store.open(at: "/db", options: memoryOptions(fs)) }
                continue
            }
            let complete = frames.filter { $0.end <= cut }.count
            let store = try Store.open(at: "/db", options: memoryOptions(fs))
            #expect(store.lastSequence == UInt64(complete), "\(name) cut \(cut)")
            #expect(try contents(of: store) == canonical.states[complete], "\(name) cut \(cut)")
            // A partial frame is reported as cut off, unless its bytes so far are all zero
            // (then it cannot be told from unused space, and there is nothing to cut).
            let goodEnd = frames.last { $0.end <= cut }?.end ?? FileHeader.size
            if bytes[goodEnd..<cut].allSatisfy({ $0 == 0 }) {
                #expect(store.recovery.truncatedBytes == 0, "\(name) cut \(cut)")
            } else {
                #expect(store.recovery.truncatedBytes == cut - goodEnd, "\(name) cut \(cut): torn tail reported")
            }
            // The store goes on: a new commit after the cut lands and survives a reopen.
            guard cut % 5 == 0 else { try store.close(); checked += 1; continue }
            let id = RecordID(entity: 1, serial: 999)
            try store.commit([.put(id, [.string("after"), .bytes(Data())])])
            try store.close()
            let again = try Store.open(at: "/db", options: memoryOptions(fs))
            #expect(again.lastSequence == UInt64(complete + 1), "\(name) cut \(cut)")
            #expect(try again.get(id)?.values == [.string("after"), .bytes(Data())])
            try again.close()
            checked += 1
        }
        #expect(checked > 100)
    }
}

@Suite struct BitFlipTests {
    /// A flip in the last frame or in the unused space after it is a torn tail: cut off
    /// and reported. A flip in any earlier frame is damage followed by durable frames:
    /// refused, naming the log and the damaged frame's offset. A flip in the header: refused.
    @Test func everyBitOfASmallLogIsChecked() throws {
        let canonical = try CanonicalStore(smallTransactions(10, seed: 5, maxBlob: 6))
        let frames = canonical.frames
        let validEnd = frames.last!.end
        var refused = 0, recovered = 0
        try canonical.withEveryBitFlipped(in: canonical.logPath, bytes: 0..<(validEnd + 40)) { fs, byte, bit in
            let frameIndex = frames.firstIndex { $0.start <= byte && byte < $0.end }
            let context: Comment = "byte \(byte) bit \(bit)"
            if byte < FileHeader.size || (frameIndex != nil && frameIndex! < frames.count - 1) {
                do {
                    _ = try Store.open(at: "/db", options: memoryOptions(fs))
                    Issue.record("damage was not detected: \(context)")
                } catch let error as CairnError {
                    #expect(error.path == canonical.logPath, context)
                    if let frameIndex { #expect(error.offset == Int64(frames[frameIndex].start), context) }
                    refused += 1
                }
            } else {
                let store = try Store.open(at: "/db", options: memoryOptions(fs))
                let kept = frameIndex ?? frames.count
                #expect(store.lastSequence == UInt64(kept), context)
                #expect(try contents(of: store) == canonical.states[kept], context)
                #expect(store.recovery.truncatedBytes > 0, context)
                #expect(store.recovery.truncatedAt == Int64(frameIndex.map { frames[$0].start } ?? validEnd), context)
                recovered += 1
            }
        }
        #expect(refused > 0 && recovered > 0)
    }

    /// Every bit of a small snapshot: the open, or the read of the record it hits, fails
    /// with an error naming the snapshot file.
    @Test func everyBitOfASmallSnapshotIsDetected() throws {
        let canonical = try CanonicalStore(smallTransactions(8, seed: 11, maxBlob: 6), compactAfter: 8)
        #expect(canonical.frames.isEmpty)
        try canonical.withEveryBitFlipped(in: canonical.snapshotPath) { fs, byte, bit in
            do {
                let store = try Store.open(at: "/db", options: memoryOptions(fs))
                let found = try contents(of: store)
                Issue.record("damage at byte \(byte) bit \(bit) not detected; read \(found.count) records")
            } catch let error as CairnError {
                #expect(error.path == canonical.snapshotPath, "byte \(byte) bit \(bit): \(error)")
                #expect(error.offset != nil, "byte \(byte) bit \(bit)")
            }
        }
    }

    /// The index's checksum is computed while the log is replayed; a flip anywhere in the
    /// index is still reported as the index's checksum (whatever else it broke first), and
    /// the log's torn tail is not cut on the word of the damaged snapshot.
    @Test func aDamagedIndexIsReportedBeforeTheLogIsTouched() throws {
        let canonical = try CanonicalStore(smallTransactions(12, seed: 3, maxBlob: 6), compactAfter: 8)
        let frames = canonical.frames
        #expect(frames.count == 4)
        var log = canonical.logBytes
        log[frames[3].start + 30] ^= 0x04  // the last frame: a torn tail
        let torn = try canonical.image(replacing: canonical.logPath, with: log)
        let footer = try #require(torn.contents(of: canonical.snapshotPath)).withUnsafeBytes { try SnapshotFooter.decode(file: $0) }
        let indexStart = Int(footer.indexOffset)
        do {  // Undamaged, the tail is cut.
            let store = try Store.open(at: "/db", options: memoryOptions(torn.crashImage(.keepAll)))
            #expect(store.recovery.truncatedAt == Int64(frames[3].start) && store.lastSequence == 11)
            try store.close()
        }
        let snapshot = try #require(torn.contents(of: canonical.snapshotPath))
        var flips = 0
        for byte in indexStart..<(indexStart + Int(footer.indexLength)) {
            for bit in 0..<8 {
                var damaged = snapshot
                damaged[byte] ^= UInt8(1) << UInt8(bit)
                let fs = torn.crashImage(.keepAll)
                try fs.setContents(of: canonical.snapshotPath, to: damaged)
                #expect { try Store.open(at: "/db", options: memoryOptions(fs)) } throws: { error in
                    guard let error = error as? CairnError else { return false }
                    return error.message.contains("index checksum mismatch") && error.path == canonical.snapshotPath
                        && error.offset == Int64(indexStart)
                }
                #expect(fs.contents(of: canonical.logPath) == log, "byte \(byte) bit \(bit): the log was changed")
                flips += 1
            }
        }
        #expect(flips > 400)
    }

    /// The index entries' structure is checked while the log is replayed too: an entry
    /// changed under a good checksum (a buggy writer) that the checks at open refuse is
    /// reported as they report it, whatever else it broke first, and the log's torn tail
    /// is not cut on the word of that index.
    @Test func anIndexOfBrokenStructureIsReportedBeforeTheLogIsTouched() throws {
        let canonical = try CanonicalStore(smallTransactions(12, seed: 3, maxBlob: 6), compactAfter: 8)
        let frames = canonical.frames
        var log = canonical.logBytes
        log[frames[3].start + 30] ^= 0x04  // the last frame: a torn tail
        let torn = try canonical.image(replacing: canonical.logPath, with: log)
        let snapshot = try #require(torn.contents(of: canonical.snapshotPath))
        let footer = try snapshot.withUnsafeBytes { try SnapshotFooter.decode(file: $0) }
        let indexStart = Int(footer.indexOffset), indexEnd = indexStart + Int(footer.indexLength)
        let index = try snapshot.withUnsafeBytes { try SnapshotIndex.decode(file: $0, indexOffset: indexStart, indexLength: Int(footer.indexLength)) }
        let entriesStart = try #require(index.entities.first?.entriesOffset)
        var refused = 0
        for byte in entriesStart..<indexEnd {
            for mask: UInt8 in [0x01, 0x40, 0xFF] {
                var damaged = snapshot
                damaged[byte] ^= mask
                var fixed = footer
                fixed.indexChecksum = CRC32C.masked(damaged[indexStart..<indexEnd])
                damaged.replaceSubrange((damaged.count - SnapshotFooter.size)..., with: fixed.encoded())
                let fs = torn.crashImage(.keepAll)
                try fs.setContents(of: canonical.snapshotPath, to: damaged)
                let expected: CairnError
                do {
                    _ = try SnapshotReader(file: try fs.open(canonical.snapshotPath, create: false, truncate: false))
                    continue  // passes the checks at open (read later, frame by frame)
                } catch let error as CairnError {
                    expected = error
                }
                refused += 1
                #expect { try Store.open(at: "/db", options: memoryOptions(fs)) } throws: { error in
                    guard let error = error as? CairnError else { return false }
                    return error.message == expected.message && error.path == canonical.snapshotPath
                }
                #expect(fs.contents(of: canonical.logPath) == log, "byte \(byte) ^ \(mask): the log was changed")
            }
        }
        #expect(refused > 50, "refused \(refused)")
    }

    @Test func everyBitOfTheManifestIsDetected() throws {
        let canonical = try CanonicalStore(smallTransactions(3, seed: 2))
        let bytes = canonical.fs.contents(of: canonical.manifestPath)!
        for byte in 0..<bytes.count {
            var damaged = bytes
            damaged[byte] ^= 0x10
            let fs = try canonical.image(replacing: canonical.manifestPath, with: damaged)
            #expect(throws: CairnError.self, "byte \(byte)") { try Store.open(at: "/db", options: memoryOptions(fs)) }
        }
    }

    /// Damage in a frame that was never synced, followed by a later frame of the same
    /// unsynced group, is a torn write (frames record what was durable when written).
    /// A killed writer's frames, whole but maybe not yet durable, are synced by the next
    /// writer before its first frame records them as synced-through (FORMAT.md §4.2), not
    /// while it opens: an open that writes nothing waits for no sync, and no power loss
    /// after a frame written since leaves a frame that claims lost ones durable.
    @Test func aKilledWritersFramesAreSyncedBeforeTheNextFrameNotAtTheOpen() throws {
        let fs = MemoryFileSystem()
        var workload = BlobWorkload(seed: 5)
        var states = [workload.model]
        let writer = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs, durability: .deferred))
        try writer.commit(workload.nextTransaction(), durability: .durable)
        states.append(workload.model)
        for _ in 0..<4 {
            try writer.commit(workload.nextTransaction())  // deferred: left to the page cache
            states.append(workload.model)
        }
        let killed = fs.afterProcessKill()
        let store = try Store.open(at: "/db", options: memoryOptions(killed, durability: .deferred))
        #expect(killed.syncCount == 0, "the open of a clean tail waits for no sync")
        #expect(try contents(of: store) == states[5])
        // A power loss now may lose the killed writer's deferred frames, never more.
        for seed in 0..<16 as Range<UInt64> {
            let reopened = try Store.open(at: "/db", options: memoryOptions(killed.crashImage(.random(seed: seed))))
            let found = try contents(of: reopened)
            #expect(reopened.lastSequence >= 1 && found == states[Int(reopened.lastSequence)])
        }
        try store.commit(workload.nextTransaction())  // deferred, recording 5 as synced-through
        states.append(workload.model)
        #expect(killed.syncCount == 1, "the recovered frames synced before the new one")
        for seed in 0..<64 as Range<UInt64> {
            let image = killed.crashImage(.random(seed: seed))
            let reopened = try Store.open(at: "/db", options: memoryOptions(image))
            #expect(reopened.lastSequence >= 5, "seed \(seed): recovered frames lost after they were synced")
            #expect(try contents(of: reopened) == states[Int(reopened.lastSequence)])
        }
        _ = writer  // (the killed writer's store is never closed on `killed`)
    }

    @Test func unsyncedDamageFollowedByUnsyncedFramesIsATornTail() throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs, durability: .deferred))
        var workload = BlobWorkload(seed: 3)
        var states = [workload.model]
        for _ in 0..<3 {
            try store.commit(workload.nextTransaction(), durability: .durable)
            states.append(workload.model)
        }
        for _ in 0..<3 {
            try store.commit(workload.nextTransaction())  // deferred: frames carry synced-through 3
            states.append(workload.model)
        }
        try store.close()  // close syncs, but the frames still say 3 was the durable point when written
        let canonical = (fs: fs, path: "/db/" + StoreFileName.log(2))
        var bytes = fs.contents(of: canonical.path)!
        let frames = bytes.withUnsafeBytes { buffer in
            var result: [Int] = []
            var offset = FileHeader.size
            while case .frame(_, _, _, let next) = LogFrame.parse(buffer, at: offset) { result.append(offset); offset = next }
            return result
        }
        bytes[frames[3] + 40] ^= 1  // damage transaction 4, the first deferred one
        let image = fs.crashImage(.keepAll)
        try image.setContents(of: canonical.path, to: bytes)
        let reopened = try Store.open(at: "/db", options: memoryOptions(image))
        #expect(reopened.lastSequence == 3)
        #expect(try contents(of: reopened) == states[3])

        bytes = fs.contents(of: canonical.path)!
        bytes[frames[2] + 40] ^= 1  // damage transaction 3, durable before 4 was written: refused
        let refused = fs.crashImage(.keepAll)
        try refused.setContents(of: canonical.path, to: bytes)
        #expect { try Store.open(at: "/db", options: memoryOptions(refused)) } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .corrupt && error.offset == Int64(frames[2]) && error.message.contains("repair")
        }
    }
}

@Suite struct LogTailTests {
    /// What a file system reports as data covers every byte that is not zero, on disk and
    /// in memory: recovery reads only the reported stretches of a log's unused tail.
    @Test func reportedDataCoversEveryByteThatIsNotZero() throws {
        let path = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let systems: [(String, any FileSystem)] = [("disk", POSIXFileSystem()), ("memory", MemoryFileSystem())]
        for (name, fs) in systems {
            let directory = name == "disk" ? path : "/d"
            try fs.createDirectory(directory)
            let file = try fs.open("\(directory)/f", create: true, truncate: true)
            defer { file.close() }
            try file.write([7, 7, 7], at: 0)
            try file.preallocate(to: 1 << 20)
            try file.write([9], at: 600_000)
            try file.write([5], at: (1 << 20) - 1)
            let bytes = try file.read(at: 0, count: 1 << 20)
            var covered = [Bool](repeating: false, count: bytes.count)
            var position: Int64 = 0
            while position < Int64(bytes.count), let extent = file.dataExtent(from: position) {
                #expect(extent.lowerBound >= position && extent.upperBound > extent.lowerBound, "\(name)")
                guard extent.lowerBound < Int64(bytes.count), extent.upperBound > extent.lowerBound else { break }
                for index in Int(extent.lowerBound)..<min(bytes.count, Int(extent.upperBound)) { covered[index] = true }
                position = extent.upperBound
            }
            #expect(bytes.indices.allSatisfy { bytes[$0] == 0 || covered[$0] }, "\(name)")
            #expect(covered[0] && covered[600_000] && covered[(1 << 20) - 1], "\(name)")
        }
    }

    /// A byte that is not zero far past the last frame, beyond space reserved and never
    /// written, is still found: the tail is cut there and reported, as before holes were
    /// skipped.
    @Test func damageBeyondAHoleInTheLogIsFound() throws {
        let path = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        var workload = BlobWorkload(seed: 3)
        do {
            let store = try Store.open(at: path, schema: TestSchemas.blobs,
                                       options: StoreOptions(compaction: .manual, preallocationBytes: 1 << 20))
            for _ in 0..<5 { try store.commit(workload.nextTransaction(maxBlob: 50)) }
            try store.close()
        }
        let logName = try #require(try FileManager.default.contentsOfDirectory(atPath: path).first { $0.hasSuffix(".log") })
        do {
            let store = try Store.open(at: path)
            #expect(store.recovery.truncatedBytes == 0)
            try store.close()
        }
        let log = try POSIXFileSystem().open("\(path)/\(logName)", create: false, truncate: false)
        let size = try log.size()
        #expect(size == 1 << 20)
        try log.write([0x41], at: size - 3)
        log.close()
        let store = try Store.open(at: path)
        defer { try? store.close() }
        #expect(try contents(of: store) == workload.model)
        #expect(store.recovery.truncatedBytes > 0)
        #expect(store.recovery.truncatedAt.map { $0 < size - 4096 } == true)
    }
}
