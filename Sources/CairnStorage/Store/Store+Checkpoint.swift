import CairnCollections
import Dispatch
import Foundation

/// A checkpoint read back and checked (FORMAT.md §12): its directory, and the file
/// mapped copy-on-write, whose tables become the overlay's and the indexes' in place.
struct LoadedCheckpoint {
    let directory: CheckpointDirectory
    /// The covered frames' groups, read from the file and checked against the directory,
    /// not yet against the log (``FrameGroups/check(_:mapping:layout:depth:)``).
    let layout: GroupLayout
    let mapping: FileMapping
}

extension Store {
    // MARK: Writing

    /// Writes the checkpoint of the log `writer` holds, all of it synced (FORMAT.md §12):
    /// the overlay's tables and the integer runs of the snapshot's stored indexes over the
    /// log's records, so the next open maps them instead of replaying the log. Written to
    /// a temporary file and renamed over the last one; not synced: a checkpoint a crash
    /// tore fails its checksums and is ignored, and the open replays the log instead.
    /// Called with commits shut out, by a clean close (which sorts the runs no lookup has
    /// made yet: `buildingRuns`) and between commits (which writes only those a lookup
    /// made, leaving the rest to the first lookup after an open). Returns whether it wrote one.
    @discardableResult
    func writeCheckpoint(_ writer: LogWriter, buildingRuns: Bool) throws -> Bool {
        #if _endian(little)
        let manifest = writer.manifest
        // (Commits are shut out: the state stays as copied.)
        let state = self.state.withLock { $0 }
        let tail = state.overlayRecords
        // (The frame groups must hold every frame up to the log's end, each transaction's.)
        let groups = state.frameGroups
        guard tail >= options.checkpointMinimumRecords, tail > 0, state.checkpointOffset != writer.appendOffset,
              state.bodies.held.isEmpty, state.lastSequence > state.snapshot.footer.lastSequence,
              groups.end == writer.appendOffset, UInt64(groups.frames) == state.lastSequence - state.snapshot.footer.lastSequence,
              !state.overlay.contains(where: { $0.value.contains(0) }) else { return false }
        // Each integer index the snapshot stores over a changed entity: the run a lookup made
        // whole, else (`buildingRuns`) one sorted from the overlay. (Runs of other values are
        // not kept: sorting them here would be thrown away.)
        var runs: [IndexKey: IntegerRun] = [:]
        for block in state.snapshot.index.attributeIndexes where state.snapshot.storedOrderHolds(block) {
            let key = IndexKey(entity: block.entity, slot: block.attribute)
            guard let changes = state.overlay[block.entity], !changes.isEmpty,
                  let type = state.snapshot.schema.entity(number: block.entity)?.attributes[block.attribute].type,
                  [.int8, .int16, .int32, .int64].contains(type) else { continue }
            let whole = self.state.withLock { current in current.indexes[key]?.wholeIntegerRun(changes: current.overlay(of: block.entity)) }
            if let whole {
                runs[key] = whole
            } else if buildingRuns, case .integers(let built) = try SecondaryIndex(snapshot: state.snapshot, block: block,
                                                                                 changes: state.overlay(of: block.entity)).sorted {
                runs[key] = built
            }
        }
        // The directory's size is known before the sections are placed; their checksums are
        // taken as they are written, and the directory written last.
        let placeholder = CheckpointDirectory.Section(offset: 0, length: 0, checksum: 0)
        var directory = CheckpointDirectory(logOffset: writer.appendOffset, lastSequence: state.lastSequence,
                                            lastFrameOffset: groups.lastFrame,
                                            lastCommitMilliseconds: state.lastCommitMilliseconds ?? 0,
                                            nextSerial: state.nextSerial, logPuts: state.logPuts, shadowed: state.shadowed,
                                            frameGroups: placeholder, entities: [])
        for (number, table) in state.overlay.sorted(by: { $0.key < $1.key }) where !table.isEmpty {
            let entityRuns = runs.filter { $0.key.entity == number }.sorted { $0.key.slot < $1.key.slot }.map { key, run in
                CheckpointDirectory.Run(attribute: key.slot, type: run.width, nulls: placeholder, keyed: placeholder)
            }
            directory.entities.append(CheckpointDirectory.Entity(
                number: number, recordCount: state.counts[number] ?? 0, lastChange: state.lastChanges[number] ?? 0,
                seed: table.mixedSeed, bucketCount: table.bucketCount, entryCount: table.count,
                keys: placeholder, values: placeholder, runs: entityRuns))
        }
        let directorySize = directory.encoded().count
        let temporary = joinPath(path, StoreFileName.checkpoint(manifest.logNumber) + StoreFileName.temporarySuffix)
        let file = try fileSystem.open(temporary, create: true, truncate: true)
        do {
            defer { file.close() }
            var end = FileHeader.size + directorySize
            func place(_ length: Int, _ write: (inout CheckpointSectionWriter) throws -> Void) throws -> CheckpointDirectory.Section {
                let offset = CheckpointDirectory.placement(after: end, length: length)
                var sectionWriter = CheckpointSectionWriter(file: file, offset: offset)
                try write(&sectionWriter)
                precondition(sectionWriter.written == length, "a checkpoint section is the length its directory says")
                end = offset + length
                return CheckpointDirectory.Section(offset: length == 0 ? 0 : offset, length: length,
                                                   checksum: CRC32C.mask(sectionWriter.crc))
            }
            let groupBytes = FrameGroup.encoded(groups.groups)
            directory.frameGroups = try place(groupBytes.count) { section in
                try groupBytes.withUnsafeBytes { try section.append($0) }
            }
            for index in directory.entities.indices {
                let number = directory.entities[index].number
                guard let table = state.overlay[number] else { continue }
                try table.withUnsafeBuckets { keys, entries in
                    directory.entities[index].keys = try place(keys.count * 8) { section in
                        try section.append(UnsafeRawBufferPointer(keys))
                    }
                    // (An empty bucket's value was never written in memory: it is written as 0.)
                    directory.entities[index].values = try place(keys.count * 8) { section in
                        let chunk = 1 << 17
                        var values = [UInt64](repeating: 0, count: chunk)
                        for start in stride(from: 0, to: keys.count, by: chunk) {
                            let count = min(chunk, keys.count - start)
                            for i in 0..<count {
                                values[i] = keys[start + i] == 0 ? 0 : entries[start + i].bits
                            }
                            try values.withUnsafeBytes { try section.append(UnsafeRawBufferPointer(rebasing: $0[..<(count * 8)])) }
                        }
                    }
                }
                for runIndex in directory.entities[index].runs.indices {
                    let key = IndexKey(entity: number, slot: directory.entities[index].runs[runIndex].attribute)
                    guard let run = runs[key] else { continue }
                    directory.entities[index].runs[runIndex].nulls = try place(run.nulls.count * 8) { section in
                        try run.nulls.withUnsafeBufferPointer { try section.append(UnsafeRawBufferPointer($0)) }
                    }
                    directory.entities[index].runs[runIndex].keyed = try place(run.keyed.count * 16) { section in
                        try run.keyed.withUnsafeBufferPointer { try section.append(UnsafeRawBufferPointer($0)) }
                    }
                }
            }
            let header = FileHeader(kind: .checkpoint, storeID: manifest.header.storeID, fileNumber: manifest.logNumber,
                                    baseSequence: state.snapshot.footer.lastSequence, createdMilliseconds: nowMilliseconds())
            let encoded = directory.encoded()
            precondition(encoded.count == directorySize, "a checkpoint directory's size depends only on its counts")
            try file.write(header.encoded() + encoded, at: 0)
            // (The file ends with its last section, or where one would start.)
            try file.truncate(to: Int64(max(end, FileHeader.size + directorySize)))
        } catch {
            try? fileSystem.remove(temporary)
            throw error
        }
        try fileSystem.rename(temporary, joinPath(path, StoreFileName.checkpoint(manifest.logNumber)))
        self.state.withLock { current in
            current.checkpointOffset = directory.logOffset
            current.checkpointRecords = tail
        }
        return true
        #else
        return false  // (The tables are used in place: little-endian platforms only.)
        #endif
    }

    /// Writes a checkpoint between commits once the log's overlay holds at least
    /// ``StoreOptions/periodicCheckpointMinimumRecords`` records and twice as many as the
    /// last checkpoint of the log held: an open after a crash then replays at most about
    /// half the log, and the checkpoints of a log cost about one write of its last one.
    /// Commits wait while it is written (as for a compaction); the log is synced first, so
    /// that the checkpoint covers only frames on disk. Best effort: a failure leaves the
    /// last checkpoint in place, and the store as it was.
    package func checkpointIfDue() {
        guard options.openMode == .normal else { return }
        let (tail, last, held) = state.withLock { state in (state.overlayRecords, state.checkpointRecords, !state.bodies.held.isEmpty) }
        guard tail >= options.periodicCheckpointMinimumRecords, tail >= 2 * last, !held else { return }
        log.withLock { writer in
            guard let writer, poison.withLock({ $0 }) == nil else { return }
            // (A failed sync is a failed commit's, and poisons; a failed checkpoint does not.)
            guard (try? poisonOnFailure(discarding: writer, { try writer.sync(through: state.withLock { $0.lastSequence }) })) != nil else { return }
            let written = try? writeCheckpoint(writer, buildingRuns: false)
            // (One that could not be written is not tried again until the log doubles again.)
            if written != true { state.withLock { $0.checkpointRecords = tail } }
        }
    }

    // MARK: Reading

    /// The checkpoint of the manifest's log, read and checked (FORMAT.md §12.5), or nil
    /// when there is none, or none this open may use; `ignored` says why one was not used.
    /// Nothing here trusts the log: ``StoreState/applyCheckpoint(_:log:)`` checks the
    /// checkpoint belongs to it.
    static func loadCheckpoint(in path: String, manifest: Manifest, snapshot: SnapshotReader, options: StoreOptions,
                               ignored: inout String?) -> LoadedCheckpoint? {
        let fs = options.fileSystem
        let checkpointPath = joinPath(path, StoreFileName.checkpoint(manifest.logNumber))
        guard fs.exists(checkpointPath) else { return nil }
        #if _endian(little)
        do {
            let file = try openStoreFile(checkpointPath, options: options)
            defer { file.close() }
            let mapping = try file.mapCopyOnWrite()
            let directory = try checkCheckpoint(mapping.bytes, manifest: manifest, snapshot: snapshot)
            let section = directory.frameGroups
            let groupBytes = UnsafeRawBufferPointer(rebasing: mapping.bytes[section.offset..<(section.offset + section.length)])
            guard CRC32C.masked(groupBytes) == section.checksum else {
                throw CairnError.corrupt("checkpoint section checksum mismatch", offset: section.offset)
            }
            let base = snapshot.footer.lastSequence
            let groups = try directory.decodeFrameGroups(groupBytes, offset: section.offset, baseSequence: base)
            try checkSections(of: directory, in: mapping)
            // (Nothing has written to the mapping: its pages are the file's, read again when needed.)
            mapping.dropResidentPages()
            return LoadedCheckpoint(directory: directory,
                                    layout: GroupLayout(groups: groups, baseSequence: base, lastFrame: directory.lastFrameOffset,
                                                        end: directory.logOffset),
                                    mapping: mapping)
        } catch let error as CairnError {
            ignored = error.located(in: checkpointPath).description
            return nil
        } catch {
            ignored = "\(checkpointPath): \(error)"
            return nil
        }
        #else
        ignored = "checkpoints are read on little-endian platforms only"
        return nil
        #endif
    }

    /// Checks a checkpoint's header and directory against the store: its store, log and
    /// snapshot; entities and stored indexes the schema and snapshot have.
    private static func checkCheckpoint(_ bytes: UnsafeRawBufferPointer, manifest: Manifest,
                                        snapshot: SnapshotReader) throws -> CheckpointDirectory {
        let header = try FileHeader.decode(bytes, expected: .checkpoint)
        guard header.storeID == manifest.header.storeID, header.fileNumber == manifest.logNumber else {
            throw CairnError.corrupt("checkpoint belongs to another store or log (\(header.storeID), file \(header.fileNumber))", offset: 16)
        }
        guard header.baseSequence == snapshot.footer.lastSequence else {
            throw CairnError.corrupt("checkpoint is of a log after sequence \(header.baseSequence), but the snapshot covers \(snapshot.footer.lastSequence)",
                                     offset: 40)
        }
        let directory = try CheckpointDirectory.decode(UnsafeRawBufferPointer(rebasing: bytes[FileHeader.size...]),
                                                       base: FileHeader.size, fileSize: bytes.count)
        guard directory.shadowed <= directory.entities.reduce(0, { $0 + $1.entryCount }) else {
            throw CairnError.corrupt("checkpoint counts \(directory.shadowed) snapshot records replaced, more than its entries", offset: Int(FileHeader.size))
        }
        guard directory.lastSequence > header.baseSequence else {
            throw CairnError.corrupt("checkpoint covers no transaction of its log", offset: Int(FileHeader.size))
        }
        let schema = snapshot.schema
        for entity in directory.entities {
            guard let description = schema.entity(number: entity.number) else {
                throw CairnError.corrupt("checkpoint names entity \(entity.number), which the schema does not have")
            }
            // (The log adds at most a record for each entry to what the snapshot holds.)
            guard entity.recordCount <= snapshot.count(of: entity.number) + entity.entryCount else {
                throw CairnError.corrupt("checkpoint counts \(entity.recordCount) records of entity \(entity.number), more than the snapshot's \(snapshot.count(of: entity.number)) and its \(entity.entryCount) entries")
            }
            for run in entity.runs {
                guard snapshot.index.attributeIndexes.contains(where: {
                    $0.entity == entity.number && $0.attribute == run.attribute && snapshot.storedOrderHolds($0)
                }), run.attribute < description.attributes.count else {
                    throw CairnError.corrupt("checkpoint has a run of attribute \(run.attribute) of entity \(entity.number), which the snapshot stores no index of")
                }
                guard run.keyed.length == 0 || description.attributes[run.attribute].type == run.type else {
                    throw CairnError.corrupt("checkpoint's run of attribute \(run.attribute) of entity \(entity.number) holds \(run.type) values, not \(description.attributes[run.attribute].type)")
                }
            }
        }
        return directory
    }

    /// Checks every section's checksum, and what each entry may be: keys of the entity
    /// and serials handed out, as many as the directory says; entries deletes or bodies
    /// inside the covered log; run IDs of the entity. In parts, on every core; each part's
    /// pages are let go of once checked (nothing has written to them).
    private static func checkSections(of directory: CheckpointDirectory, in mapping: FileMapping) throws {
        struct Part: Sendable {
            var entity: UInt16
            /// A table part: its keys' section, and `second` its values'; a run part: the
            /// run's nulls (`size` 8) or pairs (`size` 16).
            var first: CheckpointDirectory.Section
            var second: CheckpointDirectory.Section?
            var size: Int
            /// The part's elements (buckets, IDs or pairs).
            var range: Range<Int>
            var bytes: Range<Int> { (range.lowerBound * size)..<(range.upperBound * size) }
        }
        let step = 1 << 19  // elements a part
        var parts: [Part] = []
        func split(_ entity: UInt16, _ first: CheckpointDirectory.Section, _ second: CheckpointDirectory.Section?, size: Int) {
            let count = first.length / size
            for start in stride(from: 0, to: count, by: step) {
                parts.append(Part(entity: entity, first: first, second: second, size: size, range: start..<min(count, start + step)))
            }
        }
        for entity in directory.entities {
            split(entity.number, entity.keys, entity.values, size: 8)
            for run in entity.runs {
                split(entity.number, run.nulls, nil, size: 8)
                split(entity.number, run.keyed, nil, size: 16)
            }
        }
        // Per part: the CRCs of its bytes of each section, and the table keys it found (-1: a bad entry).
        let results = PerRun<(UInt32, UInt32, Int)>(count: parts.count, initial: (0, 0, 0))
        let allParts = parts
        let nextSerial = directory.nextSerial, logOffset = UInt64(directory.logOffset)
        let check: @Sendable (Int) -> Void = { index in
            let part = allParts[index]
            guard let base = mapping.bytes.baseAddress else { return }  // (an empty file has no sections)
            let first = UnsafeRawBufferPointer(rebasing: mapping.bytes[(part.first.offset + part.bytes.lowerBound)..<(part.first.offset + part.bytes.upperBound)])
            let entityBits = UInt64(part.entity) << 48
            var found = 0, bad = false
            if let second = part.second {
                let values = UnsafeRawBufferPointer(start: base + second.offset + part.bytes.lowerBound, count: part.bytes.count)
                for i in 0..<part.range.count {
                    let key = first.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)
                    guard key != 0 else { continue }
                    found += 1
                    let value = values.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)
                    let serial = key & RecordID.maxSerial
                    // A delete, or a body that lies after the log's header and ends inside what is covered.
                    let bodyFits = value >> 63 == 0 && value >> 24 >= UInt64(FileHeader.size)
                        && (value >> 24) + (value & 0xFF_FFFF) <= logOffset
                    if key & ~RecordID.maxSerial != entityBits || serial == 0 || serial >= nextSerial || (value != .max && !bodyFits) {
                        bad = true
                    }
                }
                results[index] = (CRC32C.checksum(first), CRC32C.checksum(values), bad ? -1 : found)
                mapping.dropResidentPages(in: (second.offset + part.bytes.lowerBound)..<(second.offset + part.bytes.upperBound))
            } else {
                // A run's IDs: each null, and the second half of each pair.
                var offset = part.size - 8
                while offset < first.count {
                    let id = first.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                    let serial = id & RecordID.maxSerial
                    if id & ~RecordID.maxSerial != entityBits || serial == 0 || serial >= nextSerial { bad = true }
                    offset += part.size
                }
                results[index] = (CRC32C.checksum(first), 0, bad ? -1 : 0)
            }
            mapping.dropResidentPages(in: (part.first.offset + part.bytes.lowerBound)..<(part.first.offset + part.bytes.upperBound))
        }
        DispatchQueue.concurrentPerform(iterations: parts.count, execute: check)
        // Each section's checksum, from its parts' in order.
        var crcs: [Int: UInt32] = [:], keys: [UInt16: Int] = [:]
        for (index, part) in parts.enumerated() {
            let (a, b, found) = results[index]
            guard found >= 0 else {
                throw CairnError.corrupt("checkpoint of entity \(part.entity) holds an entry of another entity, an unknown serial, or a body outside the log",
                                         offset: part.first.offset + part.bytes.lowerBound)
            }
            let length = part.bytes.count
            crcs[part.first.offset] = crcs[part.first.offset].map { CRC32C.combine($0, a, secondLength: length) } ?? a
            if let second = part.second {
                crcs[second.offset] = crcs[second.offset].map { CRC32C.combine($0, b, secondLength: length) } ?? b
                keys[part.entity, default: 0] += found
            }
        }
        for entity in directory.entities {
            guard keys[entity.number, default: 0] == entity.entryCount else {
                throw CairnError.corrupt("checkpoint table of entity \(entity.number) holds \(keys[entity.number, default: 0]) keys, not \(entity.entryCount)",
                                         offset: entity.keys.offset)
            }
            for section in [entity.keys, entity.values] + entity.runs.flatMap({ [$0.nulls, $0.keyed] }) {
                let crc = section.length == 0 ? 0 : crcs[section.offset] ?? 0
                guard CRC32C.mask(crc) == section.checksum else {
                    throw CairnError.corrupt("checkpoint section checksum mismatch", offset: section.offset)
                }
            }
        }
    }
}

/// Writes one section of a checkpoint in order, taking its CRC as it goes.
struct CheckpointSectionWriter {
    let file: any StorageFile
    let offset: Int
    private(set) var written = 0
    private(set) var crc: UInt32 = 0

    init(file: any StorageFile, offset: Int) {
        self.file = file
        self.offset = offset
    }

    mutating func append(_ bytes: UnsafeRawBufferPointer) throws {
        let chunk = 1 << 20
        var start = 0
        while start < bytes.count {
            let piece = UnsafeRawBufferPointer(rebasing: bytes[start..<min(bytes.count, start + chunk)])
            try file.write(piece, at: Int64(offset + written))
            crc = CRC32C.update(crc, piece)
            written += piece.count
            start += piece.count
        }
    }
}

extension StoreState {
    /// Makes `checkpoint`'s state this one's: it was found to cover frames the log holds
    /// (``FrameGroups/check(_:mapping:layout:depth:)``). Returns why not otherwise,
    /// changing nothing.
    mutating func applyCheckpoint(_ checkpoint: LoadedCheckpoint) -> String? {
        let directory = checkpoint.directory
        let mapping = checkpoint.mapping
        // (The file is mapped copy-on-write: later commits write the tables in place, in this process only.)
        guard let address = mapping.bytes.baseAddress else { return "the checkpoint is empty" }
        let base = UnsafeMutableRawPointer(mutating: address)
        for entity in directory.entities {
            let keys = (base + entity.keys.offset).bindMemory(to: UInt64.self, capacity: entity.bucketCount)
            let values = (base + entity.values.offset).bindMemory(to: OverlayEntry.self, capacity: entity.bucketCount)
            overlay[entity.number] = IDMap(borrowingKeys: keys, values: values, bucketCount: entity.bucketCount,
                                           mixedSeed: entity.seed, count: entity.entryCount, owner: mapping)
            counts[entity.number] = entity.recordCount
            if entity.lastChange > 0 { lastChanges[entity.number] = entity.lastChange }
            for run in entity.runs {
                let key = IndexKey(entity: entity.number, slot: run.attribute)
                guard let block = storedBlock(key) else { continue }
                let nulls = UnsafeBufferPointer(start: (base + run.nulls.offset).bindMemory(to: UInt64.self, capacity: run.nulls.length / 8),
                                                count: run.nulls.length / 8)
                let keyed = UnsafeBufferPointer(start: (base + run.keyed.offset).bindMemory(to: (key: Int64, id: UInt64).self,
                                                                                              capacity: run.keyed.length / 16),
                                                count: run.keyed.length / 16)
                indexes[key] = SecondaryIndex(snapshot: snapshot, block: block,
                                              run: IntegerRun(nulls: .mapped(nulls, mapping), keyed: .mapped(keyed, mapping), width: run.type))
            }
        }
        lastSequence = directory.lastSequence
        if directory.lastCommitMilliseconds > 0 { lastCommitMilliseconds = directory.lastCommitMilliseconds }
        nextSerial = max(nextSerial, directory.nextSerial)
        logPuts = directory.logPuts
        shadowed = directory.shadowed
        checkpointOffset = directory.logOffset
        checkpointRecords = directory.entities.reduce(0) { $0 + $1.entryCount }
        frameGroups = FrameGroups(checkpoint.layout.groups, lastFrame: directory.lastFrameOffset, end: directory.logOffset)
        return nil
    }
}

extension Store {
    /// For ``verify()``: when this open started from a checkpoint, the log's frames it
    /// covers replayed again and compared with it: each entity's table entry by entry,
    /// record counts, and each index run with the run the replayed entries give. The
    /// checkpoint's checksums only say it is as written; this says it was written right.
    package func verifyCheckpoint() -> [Problem] {
        guard recovery.usedCheckpoint, let manifest = log.withLock({ $0?.manifest }) else { return [] }
        let checkpointPath = joinPath(path, StoreFileName.checkpoint(manifest.logNumber))
        let (snapshot, bodies) = state.withLock { ($0.snapshot, $0.bodies) }
        var ignored: String?
        guard let checkpoint = Self.loadCheckpoint(in: path, manifest: manifest, snapshot: snapshot, options: options, ignored: &ignored) else {
            return [Problem(record: nil, message: "the checkpoint this open used no longer reads back: \(ignored ?? "gone")", path: checkpointPath)]
        }
        let directory = checkpoint.directory
        var replayed = EntityMap<IDMap<UInt64, OverlayEntry>>()
        var last: UInt64 = snapshot.footer.lastSequence
        var problems: [Problem] = []
        do {
            try forEachLogTransaction { sequence, payload, base, file in
                guard sequence <= directory.lastSequence else { return }
                last = sequence
                _ = try TransactionCoding.decode(payload, base: base) { id, body in
                    let entry: OverlayEntry?
                    if let body {
                        let offset = Int(bitPattern: body.baseAddress) - Int(bitPattern: file.baseAddress)
                        entry = OverlayEntry.logged(offset: offset, length: body.count) ?? .held(0)
                    } else {
                        entry = snapshot.contains(id) ? .deleted : nil
                    }
                    // (In place: a copy of the table taken out and put back would be copied whole.)
                    if replayed[id.entity] == nil { replayed[id.entity] = IDMap() }
                    replayed[id.entity]?[id.rawValue] = entry
                }
            }
        } catch {
            return [Problem(record: nil, message: "the log could not be replayed to compare with its checkpoint: \(error)", path: checkpointPath)]
        }
        guard last == directory.lastSequence else {
            return [Problem(record: nil, message: "the checkpoint covers the log through transaction \(directory.lastSequence), but the log's frames end at \(last)",
                            path: checkpointPath)]
        }
        guard let base = checkpoint.mapping.bytes.baseAddress else {
            return [Problem(record: nil, message: "the checkpoint this open used reads back empty", path: checkpointPath)]
        }
        let listed = Set(directory.entities.map(\.number))
        for (number, table) in replayed where !table.isEmpty && !listed.contains(number) {
            problems.append(Problem(record: nil, message: "the checkpoint has no table for entity \(number), whose records the log changed", path: checkpointPath))
        }
        for entity in directory.entities {
            let expected = replayed[entity.number] ?? IDMap()
            var found = 0
            for bucket in 0..<entity.bucketCount {
                let key = base.loadUnaligned(fromByteOffset: entity.keys.offset + bucket * 8, as: UInt64.self)
                guard key != 0 else { continue }
                found += 1
                let value = base.loadUnaligned(fromByteOffset: entity.values.offset + bucket * 8, as: UInt64.self)
                if expected[key]?.bits != value {
                    problems.append(Problem(record: RecordID(rawValue: key), message: "the checkpoint's entry differs from the log's",
                                            path: checkpointPath, offset: Int64(entity.values.offset + bucket * 8)))
                }
            }
            if found != expected.count {
                problems.append(Problem(record: nil, message: "the checkpoint's table of entity \(entity.number) holds \(found) records, the log changed \(expected.count)",
                                        path: checkpointPath, offset: Int64(entity.keys.offset)))
            }
            var count = snapshot.count(of: entity.number)
            for (raw, entry) in expected {
                let inSnapshot = snapshot.contains(RecordID(rawValue: raw))
                if entry.isDeleted { count -= 1 } else if !inSnapshot { count += 1 }
            }
            if count != entity.recordCount {
                problems.append(Problem(record: nil, message: "the checkpoint counts \(entity.recordCount) records of entity \(entity.number), the log gives \(count)",
                                        path: checkpointPath))
            }
            for run in entity.runs {
                guard let block = snapshot.index.attributeIndexes.first(where: { $0.entity == entity.number && $0.attribute == run.attribute }) else { continue }
                guard let rebuilt = try? SecondaryIndex(snapshot: snapshot, block: block, changes: EntityOverlay(expected, bodies: bodies)) else {
                    problems.append(Problem(record: nil, message: "the checkpoint's index run of attribute \(run.attribute) of entity \(entity.number) could not be compared: a log frame it covers fails its check",
                                            path: checkpointPath))
                    continue
                }
                let nulls = UnsafeRawBufferPointer(start: base + run.nulls.offset, count: run.nulls.length)
                let keyed = UnsafeRawBufferPointer(start: base + run.keyed.offset, count: run.keyed.length)
                var same = false
                if case .integers(let built) = rebuilt.sorted, built.nulls.count * 8 == nulls.count, built.keyed.count * 16 == keyed.count {
                    same = built.nulls.withUnsafeBufferPointer { UnsafeRawBufferPointer($0).elementsEqual(nulls) }
                        && built.keyed.withUnsafeBufferPointer { UnsafeRawBufferPointer($0).elementsEqual(keyed) }
                }
                if !same {
                    problems.append(Problem(record: nil, message: "the checkpoint's index run of attribute \(run.attribute) of entity \(entity.number) differs from the log's values",
                                            path: checkpointPath, offset: Int64(run.keyed.offset)))
                }
            }
        }
        return problems
    }
}
