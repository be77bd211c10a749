import Foundation
import Testing
@testable import CairnStorage

/// A checkpoint is only a cache (FORMAT.md §12.5): it is used only when the log holds
/// every frame it covers, whole and as it was made of; a checkpoint of another log is
/// ignored; and a log that lost frames a checkpoint shows it held is refused, every file
/// left as it was for a repair, never cut back to what remains.
@Suite struct CheckpointTrustTests {
    static let logPath = "/db/" + StoreFileName.log(4)
    static let checkpointPath = CheckpointTests.checkpointPath

    /// Checkpoint options with frame groups of a few frames each, so that a test log has
    /// several groups, checked in parts; `deferred`, the open reads only the covered
    /// frames' headers, and their bytes are checked on first read.
    static func options(_ fs: MemoryFileSystem, deferred: Bool = false) -> StoreOptions {
        var options = CheckpointTests.options(fs)
        options.frameGroupBytes = 512
        if deferred { options.deferredFrameCheckMinimum = 0 }
        return options
    }

    /// A compacted store whose log took `commits` commits of churn and a clean close with
    /// a checkpoint, in several frame groups.
    static func checkpointed(seed: UInt64, commits: Int = 6) throws -> (MemoryFileSystem, Contents) {
        let fs = try StoredIndexTests.compactedStore()
        var random = SplitMix64(seed: seed)
        let store = try Store.open(at: "/db", options: options(fs))
        var model = try contents(of: store)
        try CheckpointTests.churn(store, &random, model: &model, commits: commits, serialBase: 1_000)
        try store.close()
        let checkpoint = try CheckpointTests.read(fs)
        let directory = try checkpoint.withUnsafeBytes {
            try CheckpointDirectory.decode(UnsafeRawBufferPointer(rebasing: $0[FileHeader.size...]), base: FileHeader.size,
                                           fileSize: checkpoint.count)
        }
        #expect(directory.frameGroups.length / FrameGroup.size > 2, "several frame groups")
        return (fs, model)
    }

    /// The frames of a log: offset, size and payload of each.
    static func frames(_ log: [UInt8]) -> [(offset: Int, size: Int, payload: Range<Int>)] {
        log.withUnsafeBytes { buffer in
            var found: [(Int, Int, Range<Int>)] = []
            var offset = FileHeader.size
            while case .frame(_, _, let payload, let next) = LogFrame.parse(buffer, at: offset) {
                found.append((offset, next - offset, payload))
                offset = next
            }
            return found
        }
    }

    /// Every file of the store's directory and its bytes.
    static func files(_ fs: MemoryFileSystem) throws -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for name in try fs.listDirectory("/db") where name != StoreFileName.lock { files[name] = fs.contents(of: "/db/" + name) }
        return files
    }

    /// The open refuses with `.corrupt`, naming the log, and changes no file.
    @discardableResult
    static func expectRefused(_ fs: MemoryFileSystem, mentioning words: [String], _ comment: Comment? = nil,
                              sourceLocation: SourceLocation = #_sourceLocation) throws -> CairnError? {
        let before = try files(fs)
        var refusal: CairnError?
        do {
            let store = try Store.open(at: "/db", options: options(fs))
            Issue.record("the open succeeded: \(store.recovery)", sourceLocation: sourceLocation)
            try store.close()
        } catch let error as CairnError {
            refusal = error
            #expect(error.code == .corrupt, "\(error)", sourceLocation: sourceLocation)
            #expect(error.path == logPath, "\(error)", sourceLocation: sourceLocation)
            for word in words { #expect(error.message.contains(word), "\(error)", sourceLocation: sourceLocation) }
        }
        #expect(try files(fs) == before, "the refused open changed no file", sourceLocation: sourceLocation)
        return refusal
    }

    /// Copies of one store take different commits that leave their logs the same length,
    /// frame for frame (two records' values swapped in one, kept in the other): either's
    /// checkpoint put in the other is found not to be of its log, ignored and removed, and
    /// the open replays its own log; also when the open reads the frames' headers only.
    @Test(arguments: [false, true]) func aClonesCheckpointIsIgnored(deferred: Bool) throws {
        let (fs, model) = try Self.checkpointed(seed: 60)
        let copyA = fs.crashImage(.keepAll), copyB = fs.crashImage(.keepAll)
        let ids = model.keys.filter { $0.entity == 1 }.sorted()
        var models: [Contents] = []
        for (copy, swapping) in [(copyA, true), (copyB, false)] {
            let store = try Store.open(at: "/db", options: Self.options(copy))
            var changes: [Change] = []
            var changed = model
            for pair in stride(from: 0, to: 20, by: 2) {
                let x = ids[pair], y = ids[pair + 1]
                var xValues = model[x]!, yValues = model[y]!
                if swapping { (xValues[0], yValues[0]) = (yValues[0], xValues[0]) }
                changes += [.put(x, xValues), .put(y, yValues)]
                (changed[x], changed[y]) = (xValues, yValues)
            }
            try store.commit(changes)
            try store.close()
            models.append(changed)
        }
        #expect(models[0] != models[1])
        let logA = try #require(copyA.contents(of: Self.logPath)), logB = try #require(copyB.contents(of: Self.logPath))
        #expect(Self.frames(logA).map(\.offset) == Self.frames(logB).map(\.offset), "the logs' frames lie at the same offsets")
        for (into, from, expected) in [(copyB, copyA, models[1]), (copyA, copyB, models[0])] {
            try into.setContents(of: Self.checkpointPath, to: try #require(from.contents(of: Self.checkpointPath)))
            let store = try Store.open(at: "/db", options: Self.options(into, deferred: deferred))
            #expect(!store.recovery.usedCheckpoint)
            #expect(store.recovery.ignoredCheckpoint?.contains("not made of this log") == true, "\(store.recovery)")
            #expect(!into.exists(Self.checkpointPath), "the other copy's checkpoint is removed")
            #expect(try contents(of: store) == expected)
            #expect(store.verify().isEmpty)
            try store.close()
        }
    }

    /// A log edited under its checkpoint, frame checksums made to hold again (a value
    /// changed in place): the checkpoint is not of these bytes, so it is ignored and the
    /// open replays the log as it now is; also when the open reads the frames' headers only.
    @Test(arguments: [false, true]) func anEditedLogsCheckpointIsIgnored(deferred: Bool) throws {
        let (fs, _) = try Self.checkpointed(seed: 61)
        var log = try #require(fs.contents(of: Self.logPath))
        let frame = Self.frames(log)[1]
        // The frame's first put: kind, ID, body length, then the body's first value.
        let payload = frame.offset + LogFrame.headerSize
        #expect(log[payload + 9] == TransactionCoding.put)
        let body = payload + 9 + 1 + 8 + 1
        let original = try log[body...].withUnsafeBytes { try ValueCoding.decode(UnsafeRawBufferPointer(rebasing: $0[..<Int(log[body - 1])])) }
        var edited = original
        edited[0] = .int64(original[0] == .int64(3) ? 4 : 3)  // the indexed `rank`: the same encoded size
        let encoded = ValueCoding.encode(edited)
        #expect(encoded.count == Int(log[body - 1]))
        log.replaceSubrange(body..<(body + encoded.count), with: encoded)
        let length = Int(log[(frame.offset + 4)..<(frame.offset + 8)].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })
        let checksum = CRC32C.masked(log[(frame.offset + 4)..<(frame.offset + LogFrame.headerSize + length)])
        withUnsafeBytes(of: checksum.littleEndian) { log.replaceSubrange(frame.offset..<(frame.offset + 4), with: $0) }
        try fs.setContents(of: Self.logPath, to: log)

        // What the log now holds, replayed without the checkpoint.
        let replayed = fs.crashImage(.keepAll)
        try replayed.remove(Self.checkpointPath)
        let expected = try CheckpointTests.seen(try Store.open(at: "/db", options: Self.options(replayed)))

        let store = try Store.open(at: "/db", options: Self.options(fs, deferred: deferred))
        defer { try? store.close() }
        #expect(!store.recovery.usedCheckpoint)
        #expect(store.recovery.ignoredCheckpoint?.contains("not made of this log") == true, "\(store.recovery)")
        #expect(store.recovery.replayedTransactions == Self.frames(log).count)
        #expect(try CheckpointTests.seen(store) == expected)
        #expect(!fs.exists(Self.checkpointPath))
    }

    /// One byte of rot in any frame the checkpoint covers, the first, one in the middle or
    /// the last (which no later frame follows, so a replay alone would cut it as a torn
    /// tail): the open refuses, naming the log and the frame, and changes nothing.
    @Test func rotUnderACheckpointIsRefusedNotServed() throws {
        let (fs, _) = try Self.checkpointed(seed: 62)
        let log = try #require(fs.contents(of: Self.logPath))
        let frames = Self.frames(log)
        for frame in [frames[0], frames[frames.count / 2], frames[frames.count - 1]] {
            for place in [frame.offset + 2, frame.offset + LogFrame.headerSize + 11, frame.offset + frame.size - 9] {
                let image = fs.crashImage(.keepAll)
                var damaged = log
                damaged[place] ^= 0x04
                try image.setContents(of: Self.logPath, to: damaged)
                let refusal = try Self.expectRefused(image, mentioning: ["damaged", "checkpoint", "repair"], "byte \(place)")
                #expect(refusal?.offset == Int64(frame.offset), "\(String(describing: refusal))")
            }
        }
    }

    /// Rot in a covered frame of a long log, whose frames the open checks by their
    /// headers only: in a header, the open refuses as above; in a payload, the open
    /// succeeds and no byte of that frame's group is served: a read of a record there, a
    /// scan, `verify` and a compaction each report it at the frame's offset in the log,
    /// while records elsewhere read as before. Nothing is changed on disk.
    @Test func rotInADeferredFrameIsReportedOnFirstRead() throws {
        let (fs, model) = try Self.checkpointed(seed: 66)
        let log = try #require(fs.contents(of: Self.logPath))
        let frames = Self.frames(log)
        // Where each record's last put lies.
        var latest: [RecordID: Int] = [:]
        try log.withUnsafeBytes { buffer in
            for (index, frame) in frames.enumerated() {
                _ = try TransactionCoding.decode(UnsafeRawBufferPointer(rebasing: buffer[frame.payload])) { id, body in latest[id] = body == nil ? nil : index }
            }
        }
        let target = frames.count / 2
        let inFrame = try #require(latest.first { $0.value == target }?.key)
        let elsewhere = try #require(latest.first { $0.value == 0 }?.key)
        let snapshotRecord = try #require(model.keys.first { latest[$0] == nil && $0.serial < 100 })

        var headerRot = log
        headerRot[frames[target].offset + 1] ^= 0x40
        let header = fs.crashImage(.keepAll)
        try header.setContents(of: Self.logPath, to: headerRot)
        var options = Self.options(header, deferred: true)
        #expect(throws: CairnError.self) { try Store.open(at: "/db", options: options) }

        var bodyRot = log
        bodyRot[frames[target].payload.lowerBound + 20] ^= 0x40
        try fs.setContents(of: Self.logPath, to: bodyRot)
        let before = try Self.files(fs)
        options = Self.options(fs, deferred: true)
        let store = try Store.open(at: "/db", options: options)
        defer { try? store.close() }
        #expect(store.recovery.usedCheckpoint)
        func isTheDamage(_ error: any Error) -> Bool {
            let error = error as? CairnError
            return error?.code == .corrupt && error?.path == Self.logPath && error?.offset == Int64(frames[target].offset)
        }
        #expect(performing: { try store.get(inFrame) }, throws: isTheDamage)
        #expect(performing: { try store.get(inFrame) }, throws: isTheDamage)  // (again: the failure is kept)
        #expect(try store.get(elsewhere)?.values == model[elsewhere])
        #expect(try store.get(snapshotRecord)?.values == model[snapshotRecord])
        #expect(performing: { try store.records(entity: 1) }, throws: isTheDamage)
        let problems = store.verify()
        #expect(problems.contains { $0.path == Self.logPath && $0.offset == Int64(frames[target].offset) }, "\(problems)")
        #expect(performing: { try store.compact() }, throws: isTheDamage)
        #expect(try Self.files(fs).filter { $0.key != StoreFileName.checkpoint(4) } == before.filter { $0.key != StoreFileName.checkpoint(4) })
    }

    /// A log cut to half, or to its header, under a checkpoint that covers all of it:
    /// refused, naming where the log ends and what the checkpoint shows it held, every file
    /// as it was. A repair keeps copies of the log and checkpoint, reports the transactions
    /// lost, and hands out no serial they took.
    @Test func aLogCutBelowItsCheckpointIsRefusedAndRepaired() throws {
        let (fs, _) = try Self.checkpointed(seed: 63)
        let log = try #require(fs.contents(of: Self.logPath))
        let frames = Self.frames(log)
        let highest = try Self.highestSerial(in: log)
        for cut in [frames[frames.count / 2].offset, frames[frames.count / 2].offset + 13, FileHeader.size] {
            let image = fs.crashImage(.keepAll)
            try image.setContents(of: Self.logPath, to: Array(log[..<cut]))
            try Self.expectRefused(image, mentioning: ["checkpoint", "shows the log held", "repair"], "cut at \(cut)")

            let report = try Store.repair(at: "/db", fileSystem: image)
            let kept = frames.filter { $0.offset + $0.size <= cut }.count
            #expect(report.keptTransactions == kept, "\(report)")
            #expect(report.droppedTransactions == Array(UInt64(kept + 1)...UInt64(frames.count)).map { $0 + 1 }, "\(report)")
            #expect(Set(report.keptCopies) == [Self.logPath + ".damaged", Self.checkpointPath + ".damaged"], "\(report)")
            let store = try Store.open(at: "/db", options: Self.options(image))
            #expect(store.verify().isEmpty)
            #expect(try store.allocateID(entity: 1).serial > highest, "no serial a lost transaction took is handed out again")
            try store.close()
        }
    }

    /// The log the manifest names is gone and its checkpoint is there: refused, naming
    /// the log and what its checkpoint shows; a repair writes an empty log, reports what
    /// was lost, and hands out none of its serials again.
    @Test func aCheckpointWhoseLogIsGoneIsRefusedAndRepaired() throws {
        let (fs, _) = try Self.checkpointed(seed: 64)
        let log = try #require(fs.contents(of: Self.logPath))
        let highest = try Self.highestSerial(in: log)
        try fs.remove(Self.logPath)
        try Self.expectRefused(fs, mentioning: ["missing", "checkpoint", "repair"])
        let report = try Store.repair(at: "/db", fileSystem: fs)
        #expect(report.droppedTransactions.count == Self.frames(log).count, "\(report)")
        let store = try Store.open(at: "/db", options: Self.options(fs))
        defer { try? store.close() }
        #expect(store.verify().isEmpty)
        #expect(try store.allocateID(entity: 1).serial > highest)
    }

    /// A byte of the log changed after the open read it (as rot on disk met by a later
    /// read): a compaction checks the log it copies first, refuses, and writes nothing; the
    /// store is not poisoned, and the damage is still there for `verify` and a repair.
    @Test func aCompactionRefusesALogThatChangedUnderIt() throws {
        let (fs, model) = try Self.checkpointed(seed: 65)
        let store = try Store.open(at: "/db", options: Self.options(fs))
        defer { try? store.close() }
        #expect(store.recovery.usedCheckpoint)
        let log = try #require(fs.contents(of: Self.logPath))
        let frame = Self.frames(log)[3]
        let file = try fs.open(Self.logPath, create: false, truncate: false)
        try file.write([log[frame.offset + 40] ^ 0x10], at: Int64(frame.offset + 40))
        file.close()
        let before = try Self.files(fs)
        #expect {
            try store.compact()
        } throws: { error in
            let error = error as? CairnError
            return error?.code == .corrupt && error?.path == Self.logPath && error?.offset == Int64(frame.offset)
        }
        #expect(try Self.files(fs) == before, "nothing written")
        #expect(try store.commit([.delete(model.keys.sorted()[0])]) > 0, "not poisoned")
    }

    /// The highest serial any transaction of `log` names.
    static func highestSerial(in log: [UInt8]) throws -> UInt64 {
        var highest: UInt64 = 0
        try log.withUnsafeBytes { buffer in
            for frame in frames(log) {
                _ = try TransactionCoding.decode(UnsafeRawBufferPointer(rebasing: buffer[frame.payload])) { id, _ in
                    highest = max(highest, id.serial)
                }
            }
        }
        return highest
    }
}

/// Checkpoints written by earlier builds (FORMAT.md §11).
@Suite struct CheckpointUpgradeTests {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/checkpoint-layout1").path

    /// A checkpoint of directory layout 1 (no frame groups) is ignored for its layout: the
    /// open replays the log, as with no checkpoint, and removes the file; the next clean
    /// close writes a layout-2 checkpoint, which the open after it uses.
    @Test func aLayoutOneCheckpointIsIgnoredAndReplaced() throws {
        let fs = MemoryFileSystem()
        try fs.createDirectory("/db")
        for name in ["MANIFEST", "000001.snapshot", "000002.log", "000002.checkpoint"] {
            let bytes = try #require(FileManager.default.contents(atPath: Self.fixture + "/" + name))
            try fs.setContents(of: "/db/" + name, to: [UInt8](bytes))
        }
        let replayed = fs.crashImage(.keepAll)
        try replayed.remove("/db/000002.checkpoint")
        let expected = try contents(of: try Store.open(at: "/db", options: CheckpointTests.options(replayed)))
        #expect(expected.count == 30)  // 20, 15 put, 5 deleted

        var store = try Store.open(at: "/db", options: CheckpointTests.options(fs))
        #expect(!store.recovery.usedCheckpoint)
        #expect(store.recovery.ignoredCheckpoint?.contains("layout 1") == true, "\(store.recovery)")
        #expect(store.lastSequence == 6)
        #expect(try contents(of: store) == expected)
        #expect(!fs.exists("/db/000002.checkpoint"))
        try store.close()
        store = try Store.open(at: "/db", options: CheckpointTests.options(fs))
        defer { try? store.close() }
        #expect(store.recovery.usedCheckpoint)
        #expect(try contents(of: store) == expected)
        #expect(store.verify().isEmpty)
    }
}
