import Foundation
/// What a compaction did (``Container/compact()``).
public struct CompactionResult: Sendable, Equatable {
    /// The store's files before, in bytes.
    public var bytesBefore: Int
    /// The store's files after, in bytes.
    public var bytesAfter: Int
    /// The records the new snapshot holds.
    public var records: Int
}

extension Store {

    /// Folds the log into a new snapshot (FORMAT.md §10 "Compaction"):
    ///
    /// 1. stream snapshot + log, merged in ID order, into `N.snapshot.tmp`; sync it;
    /// 2. rename it to `N.snapshot`; create the empty log `N+1.log`, synced; sync the directory;
    /// 3. write the manifest naming both (temporary file, sync, rename, directory sync) —
    ///    the moment the compaction takes effect;
    /// 4. switch readers to the new snapshot, then remove the old snapshot and log.
    ///
    /// A crash before step 3 leaves the old files in force (the new ones are removed on
    /// open); after it, the new ones. Either way the store holds the same records.
    /// Commits wait while a compaction runs; readers do not.
    @discardableResult
    package func compact() throws -> CompactionResult {
        try checkWritable()
        return try log.withLock { writer in
            guard let current = writer else { throw closedError() }
            try checkWritable()
            return try rewriting { try compact(replacing: &writer, current: current) }
        }
    }

    /// A transform refused a record: the rewrite stops, nothing changes, and the store
    /// is not poisoned (no I/O failed).
    package struct RewriteAbort: Error {
        package let error: CairnError
    }

    /// Runs a rewrite: an abort is rethrown as its error; any other failure poisons.
    package func rewriting<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let abort as RewriteAbort {
            throw abort.error
        } catch {
            let failure = error as? CairnError ?? CairnError(.io, "\(error)")
            poison.withLock { if $0 == nil { $0 = failure } }
            throw failure
        }
    }

    func compact(replacing writer: inout LogWriter?, current: LogWriter, schema newSchema: Schema? = nil,
                 transform: ((RecordID, UnsafeRawBufferPointer) throws -> [UInt8]?)? = nil,
                 finish: (() throws -> Void)? = nil) throws -> CompactionResult {
        // Commits are excluded (we hold the log), so this view stays the latest.
        let (snapshot, taken, lastSequence, nextSerial) = state.withLock {
            ($0.snapshot, $0, $0.lastSequence, $0.nextSerial)
        }
        // A failed sync here is a failed commit's: the unsynced tail is cut back.
        try poisonOnFailure(discarding: current) { try current.sync(through: lastSequence) }
        let manifest = current.manifest
        let storeID = manifest.header.storeID
        let snapshotNumber = manifest.nextFileNumber
        guard snapshotNumber + 2 <= FormatLimits.maxFileNumber else {
            throw RewriteAbort(error: CairnError(.invalidArgument,
                "store at \(path) has used every file number (\(FormatLimits.maxFileNumber)); export and import it into a new store"))
        }
        let logNumber = snapshotNumber + 1
        let snapshotName = StoreFileName.snapshot(snapshotNumber)
        let temporaryPath = joinPath(path, snapshotName + StoreFileName.temporarySuffix)
        let now = nowMilliseconds()
        let bytesBefore = snapshot.fileSize + current.appendOffset
        try Self.checkLogFrames(of: taken, through: current.appendOffset, path: joinPath(path, StoreFileName.log(manifest.logNumber)))

        let file = try fileSystem.open(temporaryPath, create: true, truncate: true)
        var records = 0
        let schema = newSchema ?? snapshot.schema
        do {
            defer { file.close() }
            let output = WriterCell(SnapshotWriter(file: file,
                                                   header: FileHeader(kind: .snapshot, storeID: storeID, fileNumber: snapshotNumber,
                                                                      baseSequence: lastSequence, createdMilliseconds: now),
                                                   schema: schema))
            try withExtendedLifetime(snapshot) {
                for entity in schema.entities.map(\.number).sorted() where snapshot.schema.entity(number: entity) != nil {
                    let overlay = taken.overlay(of: entity)
                    output.writer.beginEntity(entity, expected: taken.counts[entity] ?? 0)
                    try Self.merge(snapshot: snapshot, overlay: overlay, entity: entity) { id, source in
                        func emit(_ body: UnsafeRawBufferPointer) throws {
                            guard let transform else {
                                try output.writer.append(id: id, body: body)
                                return
                            }
                            let changed: [UInt8]?
                            do { changed = try transform(id, body) } catch let error as CairnError { throw RewriteAbort(error: error) }
                            guard let changed else { return }
                            try changed.withUnsafeBytes { try output.writer.append(id: id, body: $0) }
                        }
                        // Every 64 MiB written, the pages of the inputs read so far are let
                        // go of, so the resident set stays bounded by what is held, not read.
                        if output.writer.position >= output.nextEviction {
                            output.nextEviction = output.writer.position + Self.evictionInterval
                            snapshot.mapping.dropResidentPages()
                            taken.bodies.log?.dropResidentPages()
                        }
                        switch source {
                        case .snapshot(let place):
                            // Untransformed, a frame of the current version is copied as it is, checked once.
                            if transform == nil, let (frame, body) = try snapshot.currentFrame(at: place, id: id) {
                                try output.writer.append(id: id, frame: frame, body: body)
                            } else {
                                try emit(try snapshot.body(at: place, id: id))
                            }
                        case .overlay(let bytes): try emit(bytes)
                        }
                    }
                }
            }
            do { try finish?() } catch let error as CairnError { throw RewriteAbort(error: error) }
            records = Int(output.writer.recordCount)
            _ = try output.writer.finish(lastSequence: lastSequence, nextSerial: nextSerial)
        } catch let abort as RewriteAbort {
            try? fileSystem.remove(temporaryPath)
            throw abort
        }
        let snapshotPath = joinPath(path, snapshotName)
        try fileSystem.rename(temporaryPath, snapshotPath)
        // The history the retention keeps goes beside the new snapshot, before the switch.
        // An opener that sets no retention (a tool's compaction) keeps what the store kept:
        // a history file, or notes in the log. (A migration's history is not kept: its
        // changed slots are of the old schema.)
        // (The history file the open or the last compaction mapped; looked for again only
        // if none was, so that one whose mapping failed is still carried over.)
        let oldHistory = try taken.keptHistory ?? Self.mapHistory(in: path, snapshotNumber: manifest.snapshotNumber, options: options)
        let keeps = try options.history != nil || oldHistory != nil || Self.hasNotes(log: current.file, end: current.appendOffset)
        if keeps, newSchema == nil {
            let retention = options.history ?? .unlimited
            try writeHistory(retention, for: snapshotNumber, storeID: storeID, lastSequence: lastSequence, now: now,
                             old: (manifest.snapshotNumber, oldHistory), log: current, snapshot: snapshot)
        }
        let newManifest = Manifest(header: FileHeader(kind: .manifest, storeID: storeID, fileNumber: 0, baseSequence: 0,
                                                      createdMilliseconds: now),
                                   snapshotNumber: snapshotNumber, logNumber: logNumber, nextFileNumber: logNumber + 1)
        let newLog = try LogWriter.create(at: joinPath(path, StoreFileName.log(logNumber)), fileSystem: fileSystem,
                                          header: FileHeader(kind: .log, storeID: storeID, fileNumber: logNumber,
                                                             baseSequence: lastSequence, createdMilliseconds: now),
                                          manifest: newManifest, preallocationBytes: options.preallocationBytes)
        let newBodies: FileMapping
        do {
            // (Mapped before the switch: a failure here leaves the old files in force.)
            newBodies = try newLog.file.map(following: LogBodies.mappingLength(through: newLog.appendOffset))
            try fileSystem.syncDirectory(path)
            try Self.writeManifest(newManifest, in: path, fileSystem: fileSystem)
        } catch {
            newLog.file.close()
            throw error
        }
        // In force. Switch readers, then retire the old files.
        let reader: SnapshotReader
        do {
            let newFile = try fileSystem.open(snapshotPath, create: false, truncate: false)
            defer { newFile.close() }
            reader = try SnapshotReader(file: newFile)
        } catch {
            newLog.file.close()
            throw error
        }
        // (Mapped after the switch, as the snapshot is read: a failure leaves the history
        // unread until the next open, never wrong.)
        let history = try? Self.mapHistory(in: path, snapshotNumber: snapshotNumber, options: options)
        state.withLock { $0.replaceSnapshot(with: reader, log: newBodies, history: history ?? nil) }
        current.file.close()
        writer = newLog
        // Failing to remove an old file loses nothing: open removes files the manifest does not name.
        try? fileSystem.remove(joinPath(path, StoreFileName.snapshot(manifest.snapshotNumber)))
        try? fileSystem.remove(joinPath(path, StoreFileName.log(manifest.logNumber)))
        try? fileSystem.remove(joinPath(path, StoreFileName.checkpoint(manifest.logNumber)))
        try? fileSystem.remove(joinPath(path, StoreFileName.history(manifest.snapshotNumber)))
        return CompactionResult(bytesBefore: bytesBefore, bytesAfter: reader.fileSize + newLog.appendOffset, records: records)
    }

    /// Writes `N.history` for snapshot `number` (FORMAT.md §14): the history kept with the
    /// old snapshot `old` and the transactions of the log `log`, as much as `retention`
    /// keeps (written whole, synced, then renamed into place; the compaction's directory
    /// sync makes the name durable before the manifest names the snapshot). Kept history
    /// that does not read back whole stops the compaction: it is never dropped unseen.
    /// The old file's frames are copied as they are when this version wrote them (their
    /// checksums checked), and decoded and written again otherwise.
    private func writeHistory(_ retention: HistoryRetention, for number: UInt64, storeID: UUID, lastSequence: UInt64,
                              now: UInt64, old: (number: UInt64, mapped: FileMapping?), log: LogWriter,
                              snapshot: SnapshotReader) throws {
        // The old file's transactions: whole frames to copy, or entries to write again.
        var frames: [(sequence: UInt64, time: UInt64, range: Range<Int>, payload: Range<Int>)] = []
        var entries: [HistoryEntry] = []
        let oldBytes = old.mapped.map { $0.bytes } ?? UnsafeRawBufferPointer(start: nil, count: 0)
        do {
            if let mapped = old.mapped {
                let carried = try withExtendedLifetime(mapped) { try HistoryFileCoding.frames(mapped.bytes) }
                guard carried.header.storeID.uuidString == storeID.uuidString, carried.header.fileNumber == old.number else {
                    throw CairnError.corrupt("the history file is of another store or snapshot", offset: 16)
                }
                if carried.header.version == FileHeader.currentVersion {
                    frames = carried.frames
                } else {
                    entries = try HistoryFileCoding.decode(mapped.bytes, pastValues: true).entries
                }
            }
        } catch let error as CairnError {
            let located = error.path == nil ? error.located(in: joinPath(path, StoreFileName.history(old.number))) : error
            throw RewriteAbort(error: CairnError(.corrupt, "the store's kept history is damaged (\(located.message)); nothing was compacted",
                                                 path: located.path, offset: located.offset))
        }
        let logged = try Self.logHistory(file: log.file, end: log.appendOffset, snapshot: snapshot, after: nil, pastValues: true)
        if let last = entries.last?.sequence ?? frames.last?.sequence, last != logged.base {
            throw RewriteAbort(error: CairnError(.corrupt, "the store's kept history ends at transaction \(last), not at its snapshot's \(logged.base); nothing was compacted",
                                                 path: joinPath(path, StoreFileName.history(old.number))))
        }
        entries += logged.entries
        // Oldest first: the frames carried, then the entries.
        let first = Self.firstRetained(count: frames.count + entries.count,
                                       time: { $0 < frames.count ? frames[$0].time : entries[$0 - frames.count].time },
                                       frameSize: { $0 < frames.count ? frames[$0].range.count : HistoryFileCoding.frameSize(of: entries[$0 - frames.count]) },
                                       by: retention, now: now)
        let keptFrames = frames[min(first, frames.count)...], keptEntries = entries[max(0, first - frames.count)...]
        let base = keptFrames.first.map { $0.sequence - 1 } ?? keptEntries.first.map { $0.sequence - 1 } ?? lastSequence
        let header = FileHeader(kind: .history, storeID: storeID, fileNumber: number, baseSequence: base, createdMilliseconds: now)
        let finalPath = joinPath(path, StoreFileName.history(number))
        let temporary = finalPath + StoreFileName.temporarySuffix
        let file = try fileSystem.open(temporary, create: true, truncate: true)
        do {
            defer { file.close() }
            // Written in pieces: the header, the frames carried (one run of the old file,
            // from its mapping), then the entries a few megabytes at a time.
            var offset = 0
            try file.write(header.encoded(), at: 0)
            offset += FileHeader.size
            if let firstFrame = keptFrames.first, let lastFrame = keptFrames.last {
                let run = UnsafeRawBufferPointer(rebasing: oldBytes[firstFrame.range.lowerBound..<lastFrame.range.upperBound])
                try withExtendedLifetime(old.mapped) { try file.write(run, at: Int64(offset)) }
                offset += run.count
            }
            var writer = ByteWriter()
            for entry in keptEntries {
                HistoryFileCoding.appendFrame(of: entry, version: header.version, to: &writer)
                if writer.count >= 4 << 20 || entry.sequence == keptEntries.last?.sequence {
                    try file.write(writer.bytes, at: Int64(offset))
                    offset += writer.count
                    writer.removeAll()
                }
            }
            try file.sync()
        }
        try fileSystem.rename(temporary, finalPath)
    }

    /// Whether any transaction of the log `log` (up to `end`) carries history notes. The
    /// frames were checked when replayed or written: they are walked by their lengths and
    /// their operations read in place, without the checksums' pass over every byte (a
    /// large body's pages stay untouched).
    static func hasNotes(log: any StorageFile, end: Int) throws -> Bool {
        let mapping = try log.map()
        return try withExtendedLifetime(mapping) {
            let buffer = UnsafeRawBufferPointer(rebasing: mapping.bytes[..<min(max(0, end), mapping.bytes.count)])
            var offset = FileHeader.size
            while offset + LogFrame.headerSize <= buffer.count {
                let length = Int(UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)))
                let next = offset + LogFrame.frameSize(payloadLength: length)
                guard length > 0, next <= buffer.count else { return false }
                var noted = false
                _ = try TransactionCoding.decode(UnsafeRawBufferPointer(rebasing: buffer[(offset + LogFrame.headerSize)..<(offset + LogFrame.headerSize + length)]),
                                                 base: offset + LogFrame.headerSize, notes: { _ in noted = true }) { _, _ in }
                if noted { return true }
                offset = next
            }
            return false
        }
    }

    /// Checks that the log still holds every frame of `state` as it was written (each
    /// frame's checksum, and its group's, FORMAT.md §12.6) before a compaction copies its
    /// bodies: damage found now is refused, never copied under new checksums. (Snapshot
    /// frames are checked as they are copied.)
    static func checkLogFrames(of state: StoreState, through end: Int, path: String) throws {
        let groups = state.frameGroups
        guard !groups.groups.isEmpty, let log = state.bodies.log, end <= log.bytes.count else { return }
        let bytes = UnsafeRawBufferPointer(rebasing: log.bytes[..<end])
        let found: (offset: Int?, reason: String)
        let layout = GroupLayout(groups: groups.groups, baseSequence: state.snapshot.footer.lastSequence, lastFrame: groups.lastFrame,
                                 end: end)
        switch FrameGroups.check(bytes, mapping: log, layout: layout, depth: .whole) {
        case .hold: return
        case .differ(let reason): found = (nil, reason)
        case .damaged(let offset, let reason): found = (offset, reason)
        }
        throw RewriteAbort(error: CairnError(.corrupt, "the log changed since its frames were written: \(found.reason); nothing was compacted",
                                             path: path, offset: found.offset.map(Int64.init)))
    }

    /// How much a compaction writes between letting go of its inputs' pages.
    static let evictionInterval = 16 << 20

    /// Runs a compaction if the policy asks for one. A failure poisons the store (the
    /// commit that triggered it has already succeeded).
    package func compactIfNeeded() {
        guard case .automatic(let ratio, let minimum) = options.compaction else { return }
        let (logBytes, snapshotBytes) = (log.withLock { $0?.appendOffset ?? 0 }, state.withLock { $0.snapshot.fileSize })
        guard logBytes > minimum, Double(logBytes) > ratio * Double(snapshotBytes) else { return }
        _ = try? compact()
    }
}

/// The snapshot writer of one compaction, reached from the merge callback by reference:
/// a captured `var` writer would pay a dynamic exclusivity check per record. Unchecked
/// because only the compacting thread touches it, and never while one of its own
/// accesses is under way.
private final class WriterCell {
    @exclusivity(unchecked) var writer: SnapshotWriter
    /// Where in the new snapshot the inputs' pages are next let go of.
    var nextEviction = Store.evictionInterval
    init(_ writer: SnapshotWriter) { self.writer = writer }
}
