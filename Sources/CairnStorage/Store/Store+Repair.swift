import Foundation

/// Salvage for a store that refuses to open because of damage (`cairn repair`).
extension Store {
    package struct RepairReport: Sendable, Equatable {
        /// Copies kept of the damaged files (beside them, `*.damaged`).
        package var keptCopies: [String] = []
        /// Log transactions kept, and the sequence numbers of valid ones after the damage that were dropped.
        package var keptTransactions = 0
        package var droppedTransactions: [UInt64] = []
        /// Snapshot records salvaged, and damaged regions skipped.
        package var salvagedRecords = 0
        package var damagedSnapshotRegions = 0
        package var notes: [String] = []
    }

    /// Repairs the store in `path`: keeps a copy of each damaged file, rebuilds a damaged
    /// snapshot from the records whose checksums still hold, and replays the log up to
    /// its first damage. Later transactions would not form a committed prefix, so they
    /// are reported as lost; the serials their records took are not handed out again.
    /// A damaged log is then retired by a compaction (a new snapshot and log, put in
    /// force by the manifest at once), so a crash during the repair leaves either the
    /// damaged store or the repaired one.
    package static func repair(at path: String) throws -> RepairReport {
        try repair(at: path, fileSystem: POSIXFileSystem())
    }

    /// ``repair(at:)`` on another file system (tests: a memory or crash-simulating one).
    package static func repair(at path: String, fileSystem fs: any FileSystem) throws -> RepairReport {
        let lock = try fs.lock(joinPath(path, StoreFileName.lock), storePath: path)
        var report = RepairReport()
        let store: Store
        do {
            try repairSnapshot(at: path, fileSystem: fs, report: &report)
            try recreateMissingLog(at: path, fileSystem: fs, report: &report)
            var options = StoreOptions(fileSystem: fs, compaction: .manual, createIfMissing: false)
            options.openMode = .salvage
            store = try openExisting(at: path, options: options, lock: lock)
        } catch {
            lock.unlock()
            throw error
        }
        do {
            let recovery = store.recovery
            report.keptTransactions = recovery.replayedTransactions
            report.droppedTransactions = recovery.droppedTransactions
            // A log cut short of what its checkpoint shows it held ends cleanly, yet lost
            // transactions all the same: it is retired too.
            if recovery.truncatedAt != nil || !recovery.droppedTransactions.isEmpty {
                let logNumber = store.log.withLock { $0?.manifest.logNumber } ?? 0
                try keepCopy(of: joinPath(path, StoreFileName.log(logNumber)), in: path, fileSystem: fs, report: &report)
                let checkpointPath = joinPath(path, StoreFileName.checkpoint(logNumber))
                if fs.exists(checkpointPath) { try keepCopy(of: checkpointPath, in: path, fileSystem: fs, report: &report) }
                try store.compact()
                if let cut = recovery.truncatedAt {
                    report.notes.append("dropped the log from offset \(cut) (\(recovery.truncationReason ?? "damage")); the store goes on from a new snapshot")
                } else {
                    report.notes.append("the log ends before transactions its checkpoint shows it held; the store goes on from a new snapshot")
                }
            }
        } catch {
            try? store.close()
            throw error
        }
        try store.close()
        return report
    }

    /// Writes an empty log in place of the one the manifest names if it is missing (its
    /// transactions are lost; its checkpoint, if any, tells the open which), after the
    /// snapshot's last transaction.
    private static func recreateMissingLog(at path: String, fileSystem fs: any FileSystem, report: inout RepairReport) throws {
        let manifest = try readManifest(in: path, fileSystem: fs)
        let logName = StoreFileName.log(manifest.logNumber)
        guard !fs.exists(joinPath(path, logName)) else { return }
        let snapshotPath = joinPath(path, StoreFileName.snapshot(manifest.snapshotNumber))
        let snapshotFile = try fs.open(snapshotPath, create: false, truncate: false)
        let footer: SnapshotFooter
        do {
            defer { snapshotFile.close() }
            footer = try SnapshotReader(file: snapshotFile).footer
        }
        let header = FileHeader(kind: .log, storeID: manifest.header.storeID, fileNumber: manifest.logNumber,
                                baseSequence: footer.lastSequence, createdMilliseconds: nowMilliseconds())
        let log = try LogWriter.create(at: joinPath(path, logName), fileSystem: fs, header: header, manifest: manifest,
                                       preallocationBytes: StoreOptions().preallocationBytes)
        log.file.close()
        try fs.syncDirectory(path)
        report.notes.append("the log \(logName) was missing: wrote an empty one; its transactions are lost")
    }

    /// Keeps a copy of `file` beside it (`FILE.damaged`), synced, name included, before
    /// the original is changed or retired.
    private static func keepCopy(of file: String, in path: String, fileSystem fs: any FileSystem, report: inout RepairReport) throws {
        let source = try fs.open(file, create: false, truncate: false)
        defer { source.close() }
        let bytes = try source.read(at: 0, count: Int(try source.size()))
        let copy = file + ".damaged"
        let handle = try fs.open(copy, create: true, truncate: true)
        defer { handle.close() }
        try handle.write(bytes, at: 0)
        try handle.sync()
        try fs.syncDirectory(path)
        report.keptCopies.append(copy)
    }

    /// Rebuilds the snapshot the manifest names if it does not read (or an attribute
    /// index of it does not check), and puts the rebuilt one in force.
    private static func repairSnapshot(at path: String, fileSystem fs: any FileSystem, report: inout RepairReport) throws {
        var manifest = try readManifest(in: path, fileSystem: fs)
        let logPath = joinPath(path, StoreFileName.log(manifest.logNumber))
        let snapshotPath = joinPath(path, StoreFileName.snapshot(manifest.snapshotNumber))
        let snapshotFile = try fs.open(snapshotPath, create: false, truncate: false)
        defer { snapshotFile.close() }
        do {
            // Open checks the attribute indexes' placement; their contents are checked here
            // (a damaged one is rebuilt with the snapshot: indexes are derived data).
            let reader = try SnapshotReader(file: snapshotFile)
            for block in reader.index.attributeIndexes { try reader.checkAttributeIndex(block) }
            return
        } catch {
            // Rebuilt below.
        }
        let snapshotBytes = try snapshotFile.read(at: 0, count: Int(try snapshotFile.size()))
        // The log's header tells which sequence the snapshot covered.
        let logFile = try fs.open(logPath, create: false, truncate: false)
        defer { logFile.close() }
        let logHeader = try logFile.read(at: 0, count: FileHeader.size).withUnsafeBytes { buffer in
            do { return try FileHeader.decode(buffer, expected: .log) } catch let error as CairnError {
                throw error.located(in: logPath)
            }
        }
        try keepCopy(of: snapshotPath, in: path, fileSystem: fs, report: &report)
        let rebuilt = try salvageSnapshot(snapshotBytes, path: snapshotPath, header: logHeader, manifest: manifest,
                                          in: path, fileSystem: fs, report: &report)
        manifest.snapshotNumber = rebuilt
        manifest.nextFileNumber = max(rebuilt, manifest.logNumber) + 1
        try writeManifest(manifest, in: path, fileSystem: fs)
        report.notes.append("rebuilt the snapshot as \(StoreFileName.snapshot(rebuilt))")
    }

    /// Writes a new snapshot from every record frame of `bytes` whose checksum holds.
    private static func salvageSnapshot(_ bytes: [UInt8], path snapshotPath: String, header logHeader: FileHeader,
                                        manifest: Manifest, in path: String, fileSystem fs: any FileSystem,
                                        report: inout RepairReport) throws -> UInt64 {
        let (schema, records) = try bytes.withUnsafeBytes { buffer -> (Schema, [UInt64: [UInt8]]) in
            let header: FileHeader
            do { header = try FileHeader.decode(buffer, expected: .snapshot) } catch let error as CairnError {
                throw error.located(in: snapshotPath)
            }
            let (schemaBytes, afterSchema) = try SchemaBlock.read(file: buffer, at: FileHeader.size, limit: buffer.count)
            let schema = try SchemaCoding.decode(schemaBytes, base: FileHeader.size + 8)
            // Frames lie in the record area: when the footer still reads, the walk stops at the
            // index, and when the index's checksum holds too, at the first attribute index block.
            var limit = buffer.count
            if let footer = try? SnapshotFooter.decode(file: buffer) {
                limit = Int(footer.indexOffset)
                let index = UnsafeRawBufferPointer(rebasing: buffer[limit..<(limit + Int(footer.indexLength))])
                if CRC32C.masked(index) == footer.indexChecksum,
                   let first = (try? SnapshotIndex.decode(file: buffer, indexOffset: limit, indexLength: Int(footer.indexLength),
                                                          version: header.version))?.attributeIndexes.first,
                   first.blockOffset >= afterSchema, first.blockOffset <= limit {
                    limit = first.blockOffset
                }
            }
            // Frames of versions 1–2 start at multiples of 8; version 3 frames at any byte.
            let step = header.version >= 3 ? 1 : 8
            var records: [UInt64: [UInt8]] = [:]
            var offset = afterSchema
            var inDamage = false
            var checksumBudget = 4 * buffer.count + (1 << 20)
            while offset < limit {
                let claimed = SnapshotRecord.header(in: buffer, at: offset, limit: limit, version: header.version)
                let plausible = claimed.map { schema.entity(number: $0.id.entity) != nil } ?? false
                if plausible, let claimed { checksumBudget -= claimed.size }
                if checksumBudget < 0 {
                    report.notes.append("stopped salvaging the snapshot at offset \(offset): too much damage")
                    break
                }
                if plausible, let claimed,
                   let body = try? SnapshotRecord.body(in: buffer, at: offset, limit: limit, expected: claimed.id, version: header.version),
                   (try? ValueCoding.decode(body)) != nil {
                    records[claimed.id.rawValue] = [UInt8](body)
                    inDamage = false
                    offset = claimed.next
                } else {
                    if !inDamage {
                        // Zero bytes to the end are the record area's padding, not damage.
                        if UnsafeRawBufferPointer(rebasing: buffer[offset..<limit]).isAllZero { break }
                        report.damagedSnapshotRegions += 1
                    }
                    inDamage = true
                    offset += step
                }
            }
            return (schema, records)
        }
        let number = manifest.nextFileNumber
        let file = try fs.open(joinPath(path, StoreFileName.snapshot(number)), create: true, truncate: true)
        defer { file.close() }
        var writer = SnapshotWriter(file: file,
                                    header: FileHeader(kind: .snapshot, storeID: manifest.header.storeID, fileNumber: number,
                                                       baseSequence: logHeader.baseSequence, createdMilliseconds: nowMilliseconds()),
                                    schema: schema)
        // Serials already handed out must not be reused: the damaged footer's next serial
        // counts when it still reads.
        var nextSerial: UInt64 = 1
        if let footer = bytes.withUnsafeBytes({ try? SnapshotFooter.decode(file: $0) }) { nextSerial = footer.nextSerial }
        for entity in schema.entities.map(\.number).sorted() {
            writer.beginEntity(entity)
            for (raw, body) in records.filter({ RecordID(rawValue: $0.key).entity == entity }).sorted(by: { $0.key < $1.key }) {
                try body.withUnsafeBytes { try writer.append(id: RecordID(rawValue: raw), body: $0) }
                nextSerial = max(nextSerial, RecordID(rawValue: raw).serial + 1)
                report.salvagedRecords += 1
            }
        }
        _ = try writer.finish(lastSequence: logHeader.baseSequence, nextSerial: nextSerial)
        try fs.syncDirectory(path)
        return number
    }
}
