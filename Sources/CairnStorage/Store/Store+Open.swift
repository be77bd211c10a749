import Foundation

extension Store {
    /// Opens the store in directory `path`, creating it (with `schema`) if the directory
    /// holds none and ``StoreOptions/createIfMissing`` allows.
    ///
    /// Opening takes the directory's lock, reads the manifest, validates the snapshot
    /// through its footer and index (without decoding records) and replays the log. A
    /// torn log tail is cut off (see ``recovery``); damage followed by durable
    /// transactions is refused with the file and offset.
    ///
    /// - Parameter schema: required to create; when given for an existing store, its
    ///   ``Schema/versionHash`` must equal the stored one, or `.schemaMismatch` is thrown.
    package static func open(at path: String, schema: Schema? = nil, options: StoreOptions = StoreOptions()) throws -> Store {
        try open(at: path, schema: schema, options: options, creating: false)
    }

    /// Creates a new store in directory `path` (made if missing) and opens it. Throws
    /// `.invalidArgument` if the directory already holds a store, decided under the
    /// directory's lock: of several processes creating one store at once, exactly one
    /// succeeds (the others are refused as `.locked` while it creates, or as existing after).
    package static func create(at path: String, schema: Schema, options: StoreOptions = StoreOptions()) throws -> Store {
        var options = options
        options.createIfMissing = true
        return try open(at: path, schema: schema, options: options, creating: true)
    }

    private static func open(at path: String, schema: Schema?, options: StoreOptions, creating: Bool) throws -> Store {
        let fs = options.fileSystem
        if options.openMode == .readOnly { return try openReader(at: path, schema: schema, fileSystem: fs, options: options) }
        if !fs.isDirectory(path) {
            guard options.createIfMissing, schema != nil else {
                throw CairnError(.notFound, "no store at \(path)\(schema == nil ? "; give a schema to create one" : "")", path: path)
            }
            try fs.createDirectory(path)
        }
        let lock = try fs.lock(joinPath(path, StoreFileName.lock), storePath: path)
        do {
            if creating, fs.exists(joinPath(path, StoreFileName.manifest)) {
                throw CairnError(.invalidArgument, "a store already exists at \(path)", path: path)
            }
            if !fs.exists(joinPath(path, StoreFileName.manifest)) {
                guard options.createIfMissing, let schema else {
                    throw CairnError(.notFound, "no store at \(path) (no MANIFEST)\(schema == nil ? "; give a schema to create one" : "")",
                                     path: joinPath(path, StoreFileName.manifest))
                }
                try create(at: path, schema: schema, fileSystem: fs, preallocationBytes: options.preallocationBytes)
            }
            return try checkingSchema(schema, of: try openExisting(at: path, options: options, lock: lock))
        } catch {
            lock.unlock()
            throw error
        }
    }

    /// A reader's open (``StoreOptions/readOnly``): it takes no lock, creates nothing,
    /// opens every file for reading only, and changes no byte and no file. It may run
    /// while a writer in another process holds the store: when a compaction retires the
    /// files the manifest named between the reads of the manifest and of the files, the
    /// open reads the new manifest and starts again (FORMAT.md §13), as it does when it
    /// finds the log damaged while a writer took or left the store.
    private static func openReader(at path: String, schema: Schema?, fileSystem fs: any FileSystem,
                                   options: StoreOptions) throws -> Store {
        let manifestPath = joinPath(path, StoreFileName.manifest)
        guard fs.exists(manifestPath) else {
            throw CairnError(.notFound, "no store at \(path) (no MANIFEST)", path: fs.isDirectory(path) ? manifestPath : path)
        }
        let lockPath = joinPath(path, StoreFileName.lock)
        var attempts = 0
        while true {
            let before = try readManifest(in: path, fileSystem: fs)
            let holder = fs.lockHolder(lockPath)
            do {
                return try checkingSchema(schema, of: try openExisting(at: path, options: options, lock: NoLock()))
            } catch {
                attempts += 1
                // Files gone from under the open are a compaction's doing only if the
                // manifest changed meanwhile. A log judged damaged while a writer took or
                // left the store meanwhile was being written (a writer's recovery rewrites
                // the tail a crash left): it is read again. Anything else is the store's state.
                let manifestChanged = (try? readManifest(in: path, fileSystem: fs)).map { $0 != before } ?? false
                let writerChanged = (error as? CairnError)?.code == .corrupt && fs.lockHolder(lockPath) != holder
                guard attempts < 16, manifestChanged || writerChanged else { throw error }
            }
        }
    }

    /// `store`, if `schema` (when given) is the one it stores; else the store is closed
    /// and `.schemaMismatch` thrown.
    private static func checkingSchema(_ schema: Schema?, of store: Store) throws -> Store {
        guard let schema, schema.versionHash != store.schema.versionHash else { return store }
        let stored = store.schema
        try store.close()
        throw CairnError(.schemaMismatch,
                         "store at \(store.path) has schema version \(stored.version) (hash \(hex(stored.versionHash))) but the model given has version \(schema.version) (hash \(hex(schema.versionHash))); migrate the store or open it with its own model")
    }

    /// Opens one of the store's files: for reading only in a reader's open.
    static func openStoreFile(_ path: String, options: StoreOptions) throws -> any StorageFile {
        options.openMode == .readOnly
            ? try options.fileSystem.openForReading(path)
            : try options.fileSystem.open(path, create: false, truncate: false)
    }

    /// Writes a new empty store: snapshot 1, log 2, then the manifest naming them.
    private static func create(at path: String, schema: Schema, fileSystem fs: any FileSystem, preallocationBytes: Int) throws {
        try schema.validate()
        let leftovers = try fs.listDirectory(path).filter { name in
            name != StoreFileName.lock && !name.hasSuffix(StoreFileName.temporarySuffix)
        }
        // Until a manifest exists nothing can have been committed, so the files of an
        // interrupted creation may be replaced; anything else is not ours to overwrite.
        let creationFiles: Set<String> = [StoreFileName.snapshot(1), StoreFileName.log(2)]
        if let stranger = leftovers.first(where: { !creationFiles.contains($0) }) {
            throw CairnError(.invalidArgument,
                             "directory \(path) is not empty and holds no Cairn store (found \(stranger)); use an empty or new directory",
                             path: path)
        }
        let storeID = UUID()
        let now = nowMilliseconds()
        let manifest = Manifest(header: FileHeader(kind: .manifest, storeID: storeID, fileNumber: 0, baseSequence: 0,
                                                   createdMilliseconds: now),
                                snapshotNumber: 1, logNumber: 2, nextFileNumber: 3)
        let snapshotFile = try fs.open(joinPath(path, StoreFileName.snapshot(1)), create: true, truncate: true)
        defer { snapshotFile.close() }
        var writer = SnapshotWriter(file: snapshotFile,
                                    header: FileHeader(kind: .snapshot, storeID: storeID, fileNumber: 1, baseSequence: 0,
                                                       createdMilliseconds: now),
                                    schema: schema)
        _ = try writer.finish(lastSequence: 0, nextSerial: 1)
        let log = try LogWriter.create(at: joinPath(path, StoreFileName.log(2)), fileSystem: fs,
                                       header: FileHeader(kind: .log, storeID: storeID, fileNumber: 2, baseSequence: 0,
                                                          createdMilliseconds: now),
                                       manifest: manifest, preallocationBytes: preallocationBytes)
        log.file.close()
        // The snapshot's and log's names are durable before the manifest can name them.
        try fs.syncDirectory(path)
        try writeManifest(manifest, in: path, fileSystem: fs)
    }

    /// Writes the manifest crash-safely: temporary file, sync, rename, directory sync.
    package static func writeManifest(_ manifest: Manifest, in path: String, fileSystem fs: any FileSystem) throws {
        let temporary = joinPath(path, StoreFileName.manifestTemporary)
        let file = try fs.open(temporary, create: true, truncate: true)
        do {
            try file.write(manifest.encoded(), at: 0)
            try file.sync()
            file.close()
        } catch {
            file.close()
            throw error
        }
        try fs.rename(temporary, joinPath(path, StoreFileName.manifest))
        try fs.syncDirectory(path)
    }

    package static func readManifest(in path: String, fileSystem fs: any FileSystem) throws -> Manifest {
        let manifestPath = joinPath(path, StoreFileName.manifest)
        let file = try fs.openForReading(manifestPath)
        defer { file.close() }
        let bytes = try file.read(at: 0, count: Manifest.size + 1)
        do {
            return try bytes.withUnsafeBytes { try Manifest.decode($0) }
        } catch let error as CairnError {
            throw error.located(in: manifestPath)
        }
    }

    package static func openExisting(at path: String, options: StoreOptions, lock: any FileLock) throws -> Store {
        let fs = options.fileSystem
        let manifest = try readManifest(in: path, fileSystem: fs)
        let snapshotPath = joinPath(path, StoreFileName.snapshot(manifest.snapshotNumber))
        let snapshotFile = try openStoreFile(snapshotPath, options: options)
        let snapshot: SnapshotReader
        do {
            defer { snapshotFile.close() }
            var expected = manifest.header
            expected.fileNumber = manifest.snapshotNumber
            // The index's checksum, and its entries' structure, are checked while the log
            // is replayed (known before the replay writes anything, and before the store
            // is returned).
            snapshot = try SnapshotReader(file: snapshotFile, expectedStore: expected, backgroundChecksumMinimum: options.backgroundChecksumMinimum)
        }
        // The history kept with the snapshot (FORMAT.md §14), mapped now: a reader goes on
        // reading it after a writer's compaction retires it, as it does the snapshot.
        let keptHistory = try mapHistory(in: path, snapshotNumber: manifest.snapshotNumber, options: options)
        func freshState() -> StoreState {
            var state = StoreState(snapshot: snapshot)
            state.recentVersionsLimit = options.recentVersionsLimit
            state.keptHistory = keptHistory
            return state
        }
        var state = freshState()
        var report = RecoveryReport()
        let checkpoint = loadCheckpoint(in: path, manifest: manifest, snapshot: snapshot, options: options,
                                        ignored: &report.ignoredCheckpoint)
        let logPath = joinPath(path, StoreFileName.log(manifest.logNumber))
        guard fs.exists(logPath) else {
            // The manifest names it: its absence is damage, whatever its checkpoint shows.
            let shown = checkpoint.map { checkpoint in
                "; its checkpoint \(StoreFileName.checkpoint(manifest.logNumber)) shows it held transactions \(snapshot.footer.lastSequence + 1) to \(checkpoint.directory.lastSequence) (\(checkpoint.directory.logOffset) bytes)"
            } ?? ""
            throw CairnError(.corrupt, "the log \(StoreFileName.log(manifest.logNumber)) that the manifest names is missing\(shown); nothing was changed: run `cairn repair`",
                             path: logPath, offset: 0)
        }
        let logFile = try openStoreFile(logPath, options: options)
        // A reader of a store a writer holds stops at the last whole transaction: what
        // follows is the writer's frame being written, not a tail to judge (and judging it
        // would read what the writer's own recovery may cut). Otherwise the tail is judged
        // as a writer's open judges it, and reported, not cut.
        let judgesTail = options.openMode != .readOnly || fs.lockHolder(joinPath(path, StoreFileName.lock)) == nil
        do {
            var writer: LogWriter
            do {
                writer = try recoverLog(logFile, manifest: manifest, checkpoint: checkpoint, into: &state, report: &report,
                                        options: options, judgesTail: judgesTail)
            } catch let torn as TornAfterCheckpoint {
                // Damage past a checkpoint is judged on the whole log's word, not the checkpoint's.
                state = freshState()
                report = RecoveryReport()
                report.ignoredCheckpoint = torn.reason
                writer = try recoverLog(logFile, manifest: manifest, checkpoint: nil, into: &state, report: &report, options: options,
                                        judgesTail: judgesTail)
            }
            state.attachStoredIndexes(tailLimit: options.openIndexTailLimit)
            // The replay read the whole log; the pages it mapped are the kernel's to keep,
            // not this process's (bodies are mapped again as they are read). A short log's
            // stay: the first reads (an index's tail run) would only map them again.
            if writer.appendOffset >= evictionInterval { state.bodies.log?.dropResidentPages() }
            // Nothing is removed, nor the store opened, on the word of an index not yet
            // checked (its checksums and structure, checked while the log was replayed).
            try snapshot.awaitIndexChecksum()
            if options.openMode == .normal {
                // (A checkpoint the open could not use would be checked again at every open.)
                if report.ignoredCheckpoint != nil { try? fs.remove(joinPath(path, StoreFileName.checkpoint(manifest.logNumber))) }
                report.removedFiles = try removeUnnamedFiles(in: path, manifest: manifest, fileSystem: fs)
            }
            state.bodies.covered?.checkInBackground()
            return Store(path: path, options: options, state: state, log: writer, lock: lock, recovery: report)
        } catch {
            logFile.close()
            try snapshot.awaitIndexChecksum()  // a damaged index is what to report first
            throw error
        }
    }

    /// Whether `buffer` (the mapping of `file`) holds only zeros from `offset` on, reading
    /// only what the file system says may hold data.
    package static func isAllZero(_ buffer: UnsafeRawBufferPointer, from offset: Int, file: any StorageFile) -> Bool {
        var position = offset
        while position < buffer.count, let extent = file.dataExtent(from: Int64(position)) {
            let start = max(position, Int(clamping: extent.lowerBound))
            guard start < buffer.count else { break }
            // (An extent that does not reach past `start` is taken to run to the end.)
            let upper = Int(clamping: extent.upperBound)
            let end = upper > start ? min(buffer.count, upper) : buffer.count
            guard UnsafeRawBufferPointer(rebasing: buffer[start..<end]).isAllZero else { return false }
            position = end
        }
        return true
    }

    /// Replays the log into `state` (FORMAT.md §9 "Recovery"), cuts a torn tail, and
    /// returns a writer positioned after the last good frame.
    private static func recoverLog(_ file: any StorageFile, manifest: Manifest, checkpoint: LoadedCheckpoint?,
                                   into state: inout StoreState, report: inout RecoveryReport, options: StoreOptions,
                                   judgesTail: Bool) throws -> LogWriter {
        // Mapped, not read: most of a log is often its preallocated tail of zeros, which
        // recovery only scans; reading it first would fill and copy a buffer of that size.
        // The mapping follows the log's appends and stays: the overlay's entries point into
        // it rather than copying the bodies. (Only the file's `size` bytes may be read.)
        let size = Int(try file.size())
        let mapping = try file.map(following: LogBodies.mappingLength(through: size))
        state.bodies.useLog(mapping)
        var tailIsClean = true
        let base = state.snapshot.footer.lastSequence
        var offset = FileHeader.size
        var expected = base + 1
        var damage: String?
        var version = FileHeader.currentVersion
        // For a repair: a checkpoint that shows the log held more than it now does.
        var shownByCheckpoint: CheckpointDirectory?
        do {
            try withExtendedLifetime(mapping) {
                let buffer = UnsafeRawBufferPointer(rebasing: mapping.bytes[..<min(size, mapping.bytes.count)])
                let header = try FileHeader.decode(buffer, expected: .log)
                version = header.version
                guard header.storeID == manifest.header.storeID else {
                    throw CairnError.corrupt("log belongs to another store (\(header.storeID))", offset: 16)
                }
                guard header.fileNumber == manifest.logNumber else {
                    throw CairnError.corrupt("log header says file \(header.fileNumber), expected \(manifest.logNumber)", offset: 32)
                }
                guard header.baseSequence == base else {
                    throw CairnError.corrupt("log starts after sequence \(header.baseSequence) but the snapshot covers \(base)", offset: 40)
                }
                // A checkpoint of this log stands for its frames up to an offset, once the
                // log is found to hold every one of them: the replay goes on from there.
                if let checkpoint {
                    let directory = checkpoint.directory
                    // A long log's frames are read whole on first use (or by a thread of their
                    // own); the open reads their headers, enough to know they are there and
                    // the checkpoint's. A repair reads them all.
                    let deferred = options.openMode != .salvage && directory.logOffset >= options.deferredFrameCheckMinimum
                    switch FrameGroups.check(buffer, mapping: mapping, layout: checkpoint.layout, depth: deferred ? .headers : .whole) {
                    case .hold where options.openMode == .salvage:
                        shownByCheckpoint = directory  // (a repair judges the log frame by frame)
                    case .hold:
                        if let reason = state.applyCheckpoint(checkpoint) {
                            report.ignoredCheckpoint = reason
                        } else {
                            report.usedCheckpoint = true
                            offset = directory.logOffset
                            expected = directory.lastSequence + 1
                            if deferred { state.bodies.cover(CoveredFrameCheck(layout: checkpoint.layout, mapping: mapping, path: file.path)) }
                        }
                    case .differ(let reason):
                        report.ignoredCheckpoint = "the checkpoint was not made of this log: \(reason)"
                    case .damaged(let at, let reason):
                        // Evidence of lost transactions: refused, every file left as it is.
                        guard options.openMode == .salvage else {
                            throw CairnError.corrupt(
                                "\(reason), but its checkpoint \(StoreFileName.checkpoint(manifest.logNumber)) shows the log held transactions \(base + 1) to \(directory.lastSequence) whole (\(directory.logOffset) bytes); nothing was changed: run `cairn repair`",
                                offset: at)
                        }
                        shownByCheckpoint = directory
                    }
                }
                var ids: [RecordID] = [], entries: [OverlayEntry] = []
                // Every `evictionInterval` of log replayed, the pages read so far are let go
                // of: the overlay grows as the log is read, and need not peak beside all of it.
                var nextEviction = evictionInterval
                let schema = state.snapshot.schema
                // The entity last found in the schema: a transaction's records come in runs
                // of one entity, each looked up once.
                var knownEntity: UInt16?
                scan: while true {
                    switch LogFrame.parse(buffer, at: offset) {
                    case .unused:
                        break scan
                    case .invalid(let reason):
                        damage = reason
                        break scan
                    case .frame(let sequence, _, let payload, let next):
                        guard sequence == expected else {
                            damage = "frame has sequence \(sequence), expected \(expected)"
                            break scan
                        }
                        // A frame whose checksum holds but whose contents do not parse was
                        // written that way: that is corruption, not a torn write.
                        ids.removeAll(keepingCapacity: true)
                        entries.removeAll(keepingCapacity: true)
                        let timestamp: UInt64
                        do {
                            let start = Int(bitPattern: buffer.baseAddress)
                            timestamp = try TransactionCoding.decode(
                                UnsafeRawBufferPointer(rebasing: buffer[payload]), base: payload.lowerBound) { id, body in
                                if id.entity != knownEntity || id.serial == 0 {
                                    try checkLogged(id, sequence: sequence, schema: schema, at: payload.lowerBound)
                                    knownEntity = id.entity
                                }
                                ids.append(id)
                                entries.append(body.map { state.bodies.entry(offset: Int(bitPattern: $0.baseAddress) - start, body: $0) } ?? .deleted)
                            }
                        } catch let error as CairnError where options.openMode == .salvage {
                            damage = "transaction \(sequence): \(error.message)"
                            break scan
                        }
                        state.apply(ids, entries, sequence: sequence, versioned: false)
                        state.frameGroups.note(frameAt: offset, size: next - offset, stored: FrameGroups.storedChecksum(buffer, at: offset),
                                               groupBytes: options.frameGroupBytes)
                        state.lastSequence = sequence
                        state.lastCommitMilliseconds = timestamp
                        report.replayedTransactions += 1
                        expected += 1
                        offset = next
                        if offset >= nextEviction {
                            nextEviction = offset + evictionInterval
                            mapping.dropResidentPages()
                        }
                    }
                }
                // Past the last good frame, the usual case: nothing but zeros (the unused
                // part of the preallocated file), so no frame can follow. One pass over the
                // stretches that may hold data; the holes the file system reports (space
                // reserved and never written) are zeros without being read, which would
                // have made the kernel fill a page of zeros for each.
                tailIsClean = !judgesTail || isAllZero(buffer, from: offset, file: file)
                if !tailIsClean, report.usedCheckpoint {
                    throw TornAfterCheckpoint(reason: "the log past the checkpoint's offset \(checkpoint?.directory.logOffset ?? 0) is damaged or torn at offset \(offset)\(damage.map { " (\($0))" } ?? ""); the whole log was replayed to judge it")
                }
                if !tailIsClean {
                    if options.openMode == .salvage {
                        report.droppedTransactions = dropFrames(after: offset, in: buffer, expected: expected, into: &state,
                                                                damage: &damage)
                    } else {
                        try refuseDurableFrame(after: offset, in: buffer, expected: expected, damage: damage)
                    }
                }
                // Transactions the checkpoint shows were committed, and the serials they
                // took, are lost: reported as dropped, and not handed out again.
                if let shown = shownByCheckpoint, shown.lastSequence >= expected {
                    report.droppedTransactions = Array(Set(report.droppedTransactions).union(expected...shown.lastSequence)).sorted()
                    state.nextSerial = max(state.nextSerial, shown.nextSerial)
                }
            }
        } catch let error as CairnError {
            throw error.located(in: file.path)
        }
        if !tailIsClean {
            // Nothing is cut on the word of an index not yet checked. (A clean tail writes
            // nothing; the opener waits for the checks before it goes on.)
            try state.snapshot.awaitIndexChecksum()
            report.truncatedAt = Int64(offset)
            report.truncatedBytes = size - offset
            report.truncationReason = damage ?? "unfinished frame"
            // (Read-only, the report says what would be cut; for a repair, the compaction
            // that follows retires the whole log.)
            if options.openMode == .normal { try zeroTail(of: file, from: offset, to: size) }
        }
        // What was recovered must be durable (after a process kill it may sit only in the
        // page cache) before new frames record it as synced. A tail that was cut is synced
        // now; a clean one when the first new frame is written or a sync is asked for,
        // which keeps the sync off the open's path (FORMAT.md §9 step 8).
        let deferSync = tailIsClean && options.openMode == .normal
        if options.openMode != .readOnly && !deferSync { try file.sync() }
        return LogWriter(file: file, fileSystem: options.fileSystem, manifest: manifest, appendOffset: offset,
                         allocatedEnd: tailIsClean || options.openMode == .normal ? size : offset, lastWritten: expected - 1,
                         syncedThrough: expected - 1, preallocationBytes: options.preallocationBytes, version: version,
                         recoveredUnsynced: deferSync)
    }

    /// Cuts a torn tail by writing zeros over it, from `offset` to the file's `size`, where
    /// the file system says data may be: the file keeps its size, so a reader in another
    /// process that mapped it never finds its pages gone (FORMAT.md §9, §13). Zeros past
    /// the last frame are what an unused, preallocated log holds.
    private static func zeroTail(of file: any StorageFile, from offset: Int, to size: Int) throws {
        let zeros = [UInt8](repeating: 0, count: min(1 << 20, max(0, size - offset)))
        var position = offset
        while position < size, let extent = file.dataExtent(from: Int64(position)) {
            let start = max(position, Int(clamping: extent.lowerBound))
            let end = min(size, Int(clamping: extent.upperBound))
            guard start < end else { break }
            var at = start
            while at < end {
                let count = min(zeros.count, end - at)
                try zeros.withUnsafeBytes { try file.write(UnsafeRawBufferPointer(rebasing: $0[..<count]), at: Int64(at)) }
                at += count
            }
            position = end
        }
    }

    /// The replay from a checkpoint found the log torn or damaged after it: the open
    /// replays the whole log instead, so that nothing is cut on a checkpoint's word.
    struct TornAfterCheckpoint: Error {
        let reason: String
    }

    /// Checks a record ID a log transaction names (FORMAT.md §2.3): its entity is in the
    /// schema and its serial is not 0.
    package static func checkLogged(_ id: RecordID, sequence: UInt64, schema: Schema, at offset: Int) throws {
        guard schema.hasEntity(number: id.entity) else {
            throw CairnError.corrupt("transaction \(sequence) names unknown entity \(id.entity)", offset: offset)
        }
        guard id.serial != 0 else {
            throw CairnError.corrupt("transaction \(sequence) names record \(id), but serial 0 is never handed out", offset: offset)
        }
    }

    /// For a repair: the sequence numbers of the valid frames past damage at `offset`,
    /// which are not replayed. The serials their records took were handed out (the
    /// transactions may have been acknowledged), so they are not handed out again.
    /// A probe that ran out of checksum work before the end says so in `damage`.
    private static func dropFrames(after offset: Int, in buffer: UnsafeRawBufferPointer, expected: UInt64,
                                   into state: inout StoreState, damage: inout String?) -> [UInt64] {
        var dropped: [UInt64] = []
        var highest: UInt64 = 0
        let end = LogFrame.probe(after: offset, in: buffer, expected: expected, durableOnly: false) { sequence, _, payload in
            dropped.append(sequence)
            _ = try? TransactionCoding.decode(UnsafeRawBufferPointer(rebasing: buffer[payload])) { id, _ in
                highest = max(highest, id.serial)
            }
            return true
        }
        if highest >= state.nextSerial { state.nextSerial = highest + 1 }
        if case .exhausted(let at) = end {
            damage = (damage ?? "damage") + "; lost transactions counted up to offset \(at) only: too much damage after it"
        }
        return dropped
    }

    /// Past the last good frame (at `offset`), when what follows is not all zeros: is there
    /// a frame written after the damaged one was known durable? Then the damage is not a
    /// torn write, and the log is refused, naming that frame.
    private static func refuseDurableFrame(after offset: Int, in buffer: UnsafeRawBufferPointer, expected: UInt64,
                                           damage: String?) throws {
        let damage = damage ?? "missing frame"
        var durable: (sequence: UInt64, offset: Int)?
        let end = LogFrame.probe(after: offset, in: buffer, expected: expected, durableOnly: true) { sequence, at, _ in
            durable = (sequence, at)
            return false
        }
        if let durable {
            throw CairnError.corrupt(
                "log is damaged at offset \(offset) (\(damage)), but transaction \(durable.sequence) at offset \(durable.offset) was written after transaction \(expected) was durable; run `cairn repair`",
                offset: offset)
        }
        if case .exhausted(let at) = end {
            throw CairnError.corrupt(
                "log is damaged at offset \(offset) (\(damage)), and past it, up to offset \(at), more would-be frames than a torn write leaves; run `cairn repair`",
                offset: offset)
        }
    }

    /// The history file of snapshot `number`, mapped, or nil if there is none.
    static func mapHistory(in path: String, snapshotNumber number: UInt64, options: StoreOptions) throws -> FileMapping? {
        let historyPath = joinPath(path, StoreFileName.history(number))
        guard options.fileSystem.exists(historyPath) else { return nil }
        let file = try openStoreFile(historyPath, options: options)
        defer { file.close() }
        return try file.map()
    }

    /// Removes snapshot, log, checkpoint, history and temporary files the manifest does not
    /// name (a history file is named by its snapshot's number, FORMAT.md §14).
    private static func removeUnnamedFiles(in path: String, manifest: Manifest, fileSystem fs: any FileSystem) throws -> [String] {
        let keep: Set<String> = [StoreFileName.manifest, StoreFileName.lock,
                                 StoreFileName.snapshot(manifest.snapshotNumber), StoreFileName.log(manifest.logNumber),
                                 StoreFileName.checkpoint(manifest.logNumber), StoreFileName.history(manifest.snapshotNumber)]
        let stale = try fs.listDirectory(path).filter { name in
            !keep.contains(name) && (name.hasSuffix(StoreFileName.temporarySuffix) || name.hasSuffix(".snapshot") || name.hasSuffix(".log")
                || name.hasSuffix(".checkpoint") || name.hasSuffix(".history"))
        }.sorted()
        // Best effort: a file left behind is harmless (the manifest does not name it) and is
        // tried again at the next open, so failing to remove it must not keep the store shut.
        var removed: [String] = []
        for name in stale where (try? fs.remove(joinPath(path, name))) != nil { removed.append(name) }
        if !removed.isEmpty { try? fs.syncDirectory(path) }
        return removed
    }
}

func hex(_ value: UInt64) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: max(0, 16 - digits.count)) + digits
}
