import CairnCollections
import Dispatch
import Synchronization

/// A store: one directory holding a snapshot, a write-ahead log, a manifest naming
/// them, and a lock. It knows records — entity, ID, values — and the schema, not classes.
///
/// Concurrency (every rule has a test):
/// 1. A `Store` is `Sendable`: any thread may read and commit at once.
/// 2. Commits are serialised; concurrent committers share one write and one sync
///    (group commit). A commit is all or nothing.
/// 3. Readers see the latest committed state, never half a transaction, and are never
///    blocked for the length of a write or sync (they take a short lock on the in-memory state).
/// 4. A failed write or sync poisons the store: later writes throw `.poisoned` until it is reopened.
package final class Store: Sendable {
    package let path: String
    package let options: StoreOptions
    package let fileSystem: any FileSystem

    /// The in-memory view: snapshot plus the log's changes. Short critical sections only.
    let state: Protected<StoreState>
    /// The log writer; held for the whole of a commit group's write and sync, and of a compaction.
    let log: Protected<LogWriter?>
    /// Group-commit queue.
    let queue = Protected(CommitQueue())
    package let poison = Protected<CairnError?>(nil)
    package let lockHandle: Protected<(any FileLock)?>
    /// The last recovery's findings.
    package let recovery: RecoveryReport
    /// The generations pinned for reading (``pinGeneration(by:)``), not kept alive by this list.
    let generations = Protected<[WeakGeneration]>([])

    init(path: String, options: StoreOptions, state: StoreState, log: LogWriter, lock: any FileLock,
         recovery: RecoveryReport) {
        self.path = path
        self.options = options
        self.fileSystem = options.fileSystem
        self.state = Protected(state)
        self.log = Protected(log)
        self.lockHandle = Protected(lock)
        self.recovery = recovery
    }

    deinit {
        // (A store closed by its last reference has no caller to report to; close it
        // explicitly to learn of a failed sync.)
        try? close()
    }

    /// The schema stored in the files.
    package var schema: Schema { state.withLock { $0.snapshot.schema } }

    /// The store's identity, fixed at creation.
    package var storeID: String { state.withLock { $0.snapshot.header.storeID.uuidString } }

    /// The sequence number of the last committed transaction.
    package var lastSequence: UInt64 { state.withLock { $0.lastSequence } }

    // MARK: Reads

    /// The record with `id`, or nil.
    package func get(_ id: RecordID, at generation: StoreGeneration? = nil) throws -> Record? {
        let entity = schema.entity(number: id.entity)
        return try withBody(of: id, at: generation) { body in Record(id: id, values: try decodeLocated(body, id: id, entity: entity)) }
    }

    /// ``decodeRecord(_:id:entity:)`` whose errors name the file and the absolute offset
    /// of the record body (``locate(_:of:body:)``).
    package func decodeLocated(_ record: borrowing StoredRecord, id: RecordID, entity: EntityDescription?) throws -> [Value] {
        try decodeLocated(record.bytes, id: id, entity: entity)
    }

    /// ``decodeLocated(_:id:entity:)`` of a body read from the store's files.
    func decodeLocated(_ body: UnsafeRawBufferPointer, id: RecordID, entity: EntityDescription?) throws -> [Value] {
        do { return try Self.decodeRecord(body, id: id, entity: entity) } catch let error as CairnError {
            throw locate(error, of: id, body: body)
        }
    }

    /// An error found in the record body `body` of `id` (offsets relative to the body, no
    /// file), located: in the snapshot when the body lies in its mapping, else in the log,
    /// at the last put of `id` there (found by reading the log again: errors only).
    package func locate(_ error: CairnError, of id: RecordID, body: UnsafeRawBufferPointer) -> CairnError {
        guard error.path == nil else { return error }
        var error = error
        if error.offset == nil { error.offset = 0 }
        let snapshot = state.withLock { $0.snapshot }
        if let start = snapshot.offset(of: body) { return error.located(in: snapshot.path, base: Int64(start)) }
        var found: Int?
        _ = try? forEachLogTransaction { _, payload, base, file in
            _ = try TransactionCoding.decode(payload, base: base) { put, bytes in
                guard put == id, let bytes else { return }
                found = Int(bitPattern: bytes.baseAddress) - Int(bitPattern: file.baseAddress)
            }
        }
        let logNumber = log.withLock { $0?.manifest.logNumber } ?? 0
        guard let found else { return error.located(in: logPath(logNumber)) }
        return error.located(in: logPath(logNumber), base: Int64(found))
    }

    /// Runs `read` on `body`, the body of record `id`: a body error it throws (corrupt,
    /// naming no file) is located in the file the body lies in (FORMAT.md §1.2). Every
    /// read that hands a caller a stored body goes through here, or through
    /// ``marking(_:_:_:)`` and ``locating(_:)``.
    @inline(__always)
    package func reading<T>(_ id: RecordID, _ body: UnsafeRawBufferPointer, _ read: (UnsafeRawBufferPointer) throws -> T) throws -> T {
        do { return try read(body) } catch let error as CairnError where error.code == .corrupt && error.path == nil {
            throw locate(error, of: id, body: body)
        }
    }

    /// A body error (corrupt, naming no file) that a static read loop met in record `id`'s
    /// body at `address` (compared as an address only, never read), for the store that
    /// ran it to locate (``locating(_:)``).
    struct UnlocatedBodyError: Error {
        let error: CairnError
        let id: RecordID
        let address: Int
        let count: Int
    }

    /// Runs `read`, which reads record `id`'s body `bytes`, in a static loop: a body error
    /// it throws is marked as ``UnlocatedBodyError``, with no call more per record.
    @inline(__always)
    static func marking<T>(_ id: RecordID, _ bytes: UnsafeRawBufferPointer, _ read: () throws -> T) throws -> T {
        do { return try read() } catch let error as CairnError where error.code == .corrupt && error.path == nil {
            throw UnlocatedBodyError(error: error, id: id, address: Int(bitPattern: bytes.baseAddress), count: bytes.count)
        }
    }

    /// Runs `body`, locating an ``UnlocatedBodyError`` it throws.
    @inline(__always)
    func locating<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let marked as UnlocatedBodyError {
            throw locate(marked.error, of: marked.id, body: UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: marked.address), count: marked.count))
        }
    }

    /// Calls `body` with the encoded values of `id` (FORMAT.md §2.2), or returns nil.
    package func withBody<T>(of id: RecordID, at generation: StoreGeneration? = nil,
                             _ body: (UnsafeRawBufferPointer) throws -> T) throws -> T? {
        let (entry, snapshot, bodies) = read(at: generation) { ($0.overlay.lookup(id.entity) { $0[id.rawValue] }, $0.snapshot, $0.bodies) }
        switch entry {
        case let entry? where entry.isLive: return try withExtendedLifetime(bodies) { try reading(id, try bodies.body(entry), body) }
        case .some: return nil
        case nil:
            guard let place = snapshot.place(of: id) else { return nil }
            return try withExtendedLifetime(snapshot) { try reading(id, try snapshot.body(at: place, id: id), body) }
        }
    }

    /// The fingerprint of record `id` as the store holds it now (``RecordFingerprint``; 0:
    /// no record).
    package func fingerprint(of id: RecordID) throws -> UInt64 {
        try withBody(of: id, RecordFingerprint.of) ?? 0
    }

    /// The record with `id` and its version, read together, or nil if it does not exist.
    /// The version is the sequence number of the transaction that last changed the
    /// record since the store was opened, or 0; see ``commit(_:expecting:durability:)``.
    package func getVersioned(_ id: RecordID, at generation: StoreGeneration? = nil) throws -> (record: Record, version: UInt64)? {
        try getRow(id, at: generation, keepingIn: nil).map { (Record(id: id, values: $0.row.values), $0.version) }
    }

    /// Record `id` as a row for an object, with its version (as ``getVersioned(_:at:)``):
    /// kept in `arena` where it can be (``RecordArena``), decoded otherwise or without one.
    package func getRow(_ id: RecordID, at generation: StoreGeneration? = nil,
                        keepingIn arena: RecordArena?) throws -> (row: StoredRow, version: UInt64)? {
        let (entry, snapshot, version, bodies) = read(at: generation) {
            ($0.overlay.lookup(id.entity) { $0[id.rawValue] }, $0.snapshot, $0.version(of: id), $0.bodies)
        }
        return try withExtendedLifetime((snapshot, bodies)) {
            try row(id, entry: entry, version: version, snapshot: snapshot, bodies: bodies, arena: arena)
        }
    }

    /// ``getRow(_:at:keepingIn:)`` of each of `ids`, all read in one state with one look
    /// at it (a batch of faults that fire together): `body` is given each one's index in
    /// `ids` and row, in order, outside the store's lock. A record that cannot be read
    /// throws, after the rows before it were given. (Handed out one by one rather than
    /// in an array: an array of optional rows is destroyed through the runtime's generic
    /// witnesses, a tenth of what a fault's load costs.)
    package func forEachRow(_ ids: [RecordID], at generation: StoreGeneration? = nil, keepingIn arena: RecordArena?,
                            _ body: (Int, (row: StoredRow, version: UInt64)?) throws -> Void) throws {
        let (entries, versions, snapshot, bodies) = read(at: generation) { state in
            (ids.map { id in state.overlay.lookup(id.entity) { $0[id.rawValue] } }, ids.map { state.version(of: $0) },
             state.snapshot, state.bodies)
        }
        try withExtendedLifetime((snapshot, bodies)) {
            for index in ids.indices {
                try body(index, try row(ids[index], entry: entries[index], version: versions[index], snapshot: snapshot,
                                        bodies: bodies, arena: arena))
            }
        }
    }

    /// Record `id`'s row from the state read: its log entry (nil: the snapshot's record,
    /// if any), kept or decoded. `snapshot` and `bodies` must be held for the call.
    private func row(_ id: RecordID, entry: OverlayEntry?, version: UInt64, snapshot: SnapshotReader, bodies: LogBodies,
                     arena: RecordArena?) throws -> (row: StoredRow, version: UInt64)? {
        let entity = snapshot.schema.entity(number: id.entity)
        func row(_ body: UnsafeRawBufferPointer) throws -> StoredRow {
            if let arena, let entity, let kept = arena.keep(StoredRecord(body), entity: entity) { return .kept(kept) }
            return .decoded(try decodeLocated(body, id: id, entity: entity))
        }
        switch entry {
        case let entry? where entry.isLive: return (try row(bodies.body(entry)), version)
        case .some: return nil
        case nil:
            guard let place = snapshot.place(of: id) else { return nil }
            return (try row(snapshot.body(at: place, id: id)), version)
        }
    }

    /// The version of a record (existing or deleted): the sequence number of the
    /// transaction that last changed it since the store was opened, or 0.
    package func version(of id: RecordID, at generation: StoreGeneration? = nil) -> UInt64 {
        read(at: generation) { $0.version(of: id) }
    }

    /// The versions of `ids` (see ``version(of:at:)``) and whether each exists, in one look at the state.
    package func versionsAndPresence(_ ids: [RecordID], at generation: StoreGeneration? = nil) -> [(version: UInt64, exists: Bool)] {
        read(at: generation) { state in ids.map { (state.version(of: $0), state.contains($0)) } }
    }

    /// Whether a record with `id` exists.
    package func contains(_ id: RecordID, at generation: StoreGeneration? = nil) -> Bool {
        read(at: generation) { $0.contains(id) }
    }

    /// Whether each of `ids` names a record that exists, in one look at the state.
    package func containsEach(_ ids: [RecordID], at generation: StoreGeneration? = nil) -> [Bool] {
        read(at: generation) { state in ids.map { state.contains($0) } }
    }

    /// The number of records of an entity.
    package func count(entity: UInt16, at generation: StoreGeneration? = nil) -> Int {
        read(at: generation) { $0.counts[entity] ?? 0 }
    }

    /// The sequence number of the last transaction that changed a record of `entity` since
    /// the store was opened (0 if none has).
    package func lastChange(entity: UInt16) -> UInt64 {
        state.withLock { $0.lastChanges[entity] ?? 0 }
    }

    /// The sequence number of the last transaction that changed any of `entities`' records.
    /// (It grows with every such transaction: each comes after all the earlier ones.)
    package func lastChange(entities: [UInt16], at generation: StoreGeneration? = nil) -> UInt64 {
        read(at: generation) { state in entities.reduce(0) { max($0, state.lastChanges[$1] ?? 0) } }
    }

    /// The raw IDs of `entity`'s records changed by transactions after `sequence`, or nil
    /// when they are no longer all known (see ``RecentChanges``).
    package func changedRecords(entity: UInt16, after sequence: UInt64) -> [UInt64]? {
        state.withLock { state in
            guard let recent = state.recentChanges[entity] else { return sequence >= (state.lastChanges[entity] ?? 0) ? [] : nil }
            return recent.changed(after: sequence)
        }
    }

    /// Every record of an entity, in ID order, from one consistent state.
    package func records(entity: UInt16, at generation: StoreGeneration? = nil) throws -> [Record] {
        var result: [Record] = []
        let description = schema.entity(number: entity)
        try scan(entity: entity, at: generation) { id, record in result.append(Record(id: id, values: try decodeLocated(record, id: id, entity: description))) }
        return result
    }

    /// Every record ID of an entity, in ID order.
    package func ids(entity: UInt16, at generation: StoreGeneration? = nil) -> [RecordID] {
        withState(at: generation, { ($0.overlay(of: entity), $0.snapshot) }) { overlay, snapshot in
            var result: [RecordID] = []
            result.reserveCapacity(snapshot.count(of: entity) + overlay.count)
            // (Which records are live is the overlay's entries' word: no body is read.)
            Self.merge(snapshot: snapshot, overlay: overlay, changed: RadixSort.sorted(overlay.keys)[...], entity: entity, groups: nil,
                       live: overlay.uncheckedLiveBody) { id, _ in result.append(id) }
            return result
        }
    }

    /// Runs `body` with what `take` copies out of the state under the lock, and lets go of
    /// the copy under the lock again. A table copied out (``IDMap``) shares its buckets with
    /// the state's until a commit writes, and a commit writes them in place once no copy is
    /// left: letting go under the lock orders this thread's reads before that write for the
    /// thread sanitizer too, which does not see the reference counts (kept by the runtime,
    /// which it does not instrument) that order them.
    func withState<Taken, Result>(_ take: (inout StoreState) throws -> Taken, _ body: (Taken) throws -> Result) rethrows -> Result {
        var held = [try state.withLock(take)]
        defer { state.withLock { _ in held.removeAll() } }
        return try body(held[0])
    }

    /// A new record ID for `entity`, never handed out before in this store.
    package func allocateID(entity: UInt16) throws -> RecordID {
        try state.withLock { state in
            guard state.snapshot.schema.entities.contains(where: { $0.number == entity }) else {
                throw CairnError(.invalidArgument, "entity number \(entity) is not in the schema")
            }
            guard state.nextSerial <= RecordID.maxSerial else {
                throw CairnError(.tooLarge, "the store has used all \(RecordID.maxSerial) record serial numbers")
            }
            defer { state.nextSerial += 1 }
            return RecordID(entity: entity, serial: state.nextSerial)
        }
    }

    /// Reserves serials for IDs a caller chose: `decide` is given the next serial and
    /// returns the highest it keeps (each at or past that one; nil: none), and no later
    /// ``allocateID(entity:)`` hands out a serial up to it. Decided under the state's lock,
    /// so no allocation comes between. `cairn import` keeps an export's IDs so when it
    /// imports into a store that never used them.
    /// Nothing past ``RecordID/maxImportedSerial`` is reserved.
    package func reserveSerials(_ decide: (UInt64) -> UInt64?) {
        state.withLock { state in
            guard let highest = decide(state.nextSerial), highest >= state.nextSerial, highest <= RecordID.maxImportedSerial else { return }
            state.nextSerial = highest + 1
        }
    }

    /// Sizes and counts.
    package var statistics: StoreStatistics {
        let (snapshot, counts, sequence, shadowed, lastCommit, logPuts) = state.withLock { state in
            (state.snapshot, state.counts, state.lastSequence, state.shadowed, state.lastCommitMilliseconds, state.logPuts)
        }
        var named: [String: Int] = [:]
        for entity in snapshot.schema.entities { named[entity.name] = counts[entity.number] ?? 0 }
        let logBytes = log.withLock { $0?.appendOffset ?? 0 }
        let blocks = snapshot.index.attributeIndexes, read = blocks.filter(snapshot.storedOrderHolds).count
        return StoreStatistics(recordCounts: named, snapshotBytes: snapshot.fileSize, logBytes: logBytes,
                               lastSequence: sequence, lastCommitMilliseconds: lastCommit,
                               snapshotRecords: Int(snapshot.footer.recordCount), shadowedSnapshotRecords: shadowed,
                               logRecordVersions: logPuts,
                               snapshotFormatVersion: snapshot.header.version, storedIndexes: read,
                               storedIndexesInOlderOrder: blocks.count - read)
    }

    // MARK: Closing

    /// Makes every commit so far durable (one sync), e.g. after deferred commits.
    package func sync() throws {
        try checkWritable()
        try log.withLock { writer in
            guard let writer else { throw closedError() }
            try poisonOnFailure(discarding: writer) { try writer.sync(through: state.withLock { $0.lastSequence }) }
        }
    }

    /// Syncs the log, closes the files and releases the lock. Later calls throw `.closed`.
    /// Safe to call more than once.
    ///
    /// A failed sync is handled as a failed commit's: the log is cut back to what was
    /// synced, the store is poisoned, and the error is thrown (the files are closed and
    /// the lock released all the same). Commits made with `.deferred` durability since
    /// the last sync may then be lost; every durable commit is kept.
    package func close() throws {
        let readOnly = options.openMode == .readOnly
        let writer = log.withLock { writer -> LogWriter? in
            defer { writer = nil }
            return writer
        }
        var failure: (any Error)?
        if let writer {
            if poison.withLock({ $0 }) == nil, !readOnly {
                do {
                    try poisonOnFailure(discarding: writer) { try writer.sync(through: state.withLock { $0.lastSequence }) }
                } catch {
                    failure = error
                }
                // The next open maps the log's state instead of replaying it. Best effort:
                // every commit is durable already, and without a checkpoint the open replays.
                if failure == nil, options.openMode == .normal { _ = try? writeCheckpoint(writer, buildingRuns: true) }
            }
            writer.file.close()
        }
        lockHandle.withLock { lock in
            lock?.unlock()
            lock = nil
        }
        if let failure { throw failure }
    }

    package var isClosed: Bool { log.withLock { $0 == nil } }

    package func closedError() -> CairnError { CairnError(.closed, "store at \(path) is closed") }

    package func checkWritable() throws {
        if options.openMode == .readOnly {
            throw CairnError(.invalidArgument, "store at \(path) was opened read-only", path: path)
        }
        if let error = poison.withLock({ $0 }) {
            throw CairnError(.poisoned, "store at \(path) refuses writes after an earlier failure (\(error.message)); reopen it",
                             path: error.path, offset: error.offset, errno: error.errno)
        }
    }

    /// Runs `body`; if it throws, the store is poisoned with that error first, and the
    /// log `discarding` names is cut back to its last synced offset.
    func poisonOnFailure<T>(discarding writer: LogWriter? = nil, _ body: () throws -> T) throws -> T {
        do { return try body() } catch {
            let cairnError = error as? CairnError ?? CairnError(.io, "\(error)")
            poison.withLock { if $0 == nil { $0 = cairnError } }
            if let writer {
                // Bodies of commits the discard takes from the log stay readable in memory.
                state.withLock { $0.bodies.holdBodies(from: writer.syncedOffset, in: &$0.overlay) }
                writer.discardUnsynced()
            }
            throw cairnError
        }
    }
}

/// The store's in-memory view of the committed state.
struct StoreState: Sendable {
    var snapshot: SnapshotReader
    /// Changes since the snapshot, by entity then raw ID.
    var overlay = EntityMap<IDMap<UInt64, OverlayEntry>>()
    /// What the overlay's bodies are read from.
    var bodies = LogBodies(log: nil)
    var counts = EntityMap<Int>()
    /// The sequence number of the last transaction that changed each entity's records
    /// (entities unchanged since the store was opened are absent): live results ask it
    /// whether a save could have changed them.
    var lastChanges = EntityMap<UInt64>()
    /// The records each entity's latest transactions changed (see ``RecentChanges``).
    var recentChanges = EntityMap<RecentChanges>()
    var lastSequence: UInt64
    var nextSerial: UInt64
    var lastCommitMilliseconds: UInt64?
    /// The puts of the log's transactions (replayed and committed since the snapshot).
    var logPuts = 0
    /// The snapshot's records the overlay holds (replaced or deleted since the snapshot).
    var shadowed = 0
    /// Sequence number of the last change to each record changed since the store was
    /// opened (raw ID → sequence; the log's transactions replayed at open are before it).
    /// Records absent have version 0. Kept across compaction.
    var versions = IDMap<UInt64, UInt64>()
    /// Older versions, moved out of ``versions`` whenever it holds ``recentVersionsLimit``.
    var versionRuns = VersionRuns.empty
    var recentVersionsLimit = 1 << 20
    /// Secondary indexes: those the snapshot stores (attached once the log is replayed),
    /// and those built since on first use.
    var indexes: [IndexKey: SecondaryIndex] = [:]
    /// The history file kept with the snapshot (FORMAT.md §14), mapped, if there is one.
    var keptHistory: FileMapping?
    /// The log offset the checkpoint on disk covers (FORMAT.md §12), if there is one of
    /// this log: a clean close with nothing committed since need not write another.
    var checkpointOffset: Int?
    /// The records the overlay held at that checkpoint (for ``Store/checkpointIfDue()``).
    var checkpointRecords = 0
    /// The log's frames replayed and committed, in the groups a checkpoint records.
    var frameGroups = FrameGroups()

    init(snapshot: SnapshotReader) {
        self.snapshot = snapshot
        lastSequence = snapshot.footer.lastSequence
        // Never below a serial the snapshot holds, whatever its footer claims.
        nextSerial = max(1, snapshot.footer.nextSerial, (snapshot.highestID?.serial ?? 0) + 1)
        for range in snapshot.index.entities { counts[range.entity] = range.count }
    }

    /// The records the log's overlay holds, of every entity.
    var overlayRecords: Int { overlay.reduce(0) { $0 + $1.value.count } }

    func contains(_ id: RecordID) -> Bool {
        guard let entry = overlay.lookup(id.entity, { $0[id.rawValue] }) else { return snapshot.contains(id) }
        return entry.isLive
    }

    func version(of id: RecordID) -> UInt64 {
        if let version = versions[id.rawValue] { return version }
        return versionRuns.isEmpty ? 0 : versionRuns.version(of: id.rawValue) ?? 0
    }

    /// The versions as a scan reads them.
    var versionTable: Store.VersionTable { Store.VersionTable(versions, runs: versionRuns) }

    /// Applies transaction `sequence` (already validated and logged), whose frame's
    /// payload starts at offset `payload` of the log: the overlay points at the bodies there.
    mutating func apply(_ operations: [RecordOperation], sequence: UInt64, payloadAt payload: Int) {
        var entries: [OverlayEntry] = []
        entries.reserveCapacity(operations.count)
        TransactionCoding.forEachBody(of: operations, payloadAt: payload) { operation, offset in
            switch operation {
            case .put(_, let body): entries.append(body.withUnsafeBytes { bodies.entry(offset: offset, body: $0) })
            case .delete: entries.append(.deleted)
            }
        }
        apply(operations.map(\.id), entries, sequence: sequence, versioned: true)
    }

    /// Applies the changes of transaction `sequence`: `ids[i]` put with the body of
    /// `entries[i]`, or deleted. They come in runs of one entity: each run looks its
    /// entity's overlay, count and indexes up once, not once per record. Only a commit's
    /// changes are `versioned` (see ``versions``); the log's, replayed at open, are not.
    mutating func apply(_ ids: [RecordID], _ entries: [OverlayEntry], sequence: UInt64, versioned: Bool) {
        var start = 0
        while start < ids.count {
            let entity = ids[start].entity
            var end = start + 1
            while end < ids.count, ids[end].entity == entity { end += 1 }
            let watching = indexes.isEmpty ? [] : indexes(of: entity)
            var count = (records: counts[entity] ?? 0, shadowed: shadowed)
            Self.apply(ids[start..<end], entries[start..<end], sequence: sequence, versioned: versioned, snapshot: snapshot,
                       watching: watching, changes: &overlay[entity, default: IDMap()], count: &count, versions: &versions,
                       nextSerial: &nextSerial)
            (counts[entity], shadowed) = count
            for entry in entries[start..<end] where entry.isLive { logPuts += 1 }
            lastChanges[entity] = sequence
            recentChanges[entity, default: RecentChanges()].note(ids[start..<end], sequence: sequence)
            start = end
        }
        if versions.count >= recentVersionsLimit {
            versionRuns = versionRuns.merging(versions)
            versions = IDMap()
        }
    }

    /// One run of one entity's changes, into that entity's overlay `changes` (taken from
    /// the overlay once for the run) and record `count`.
    private static func apply(_ ids: ArraySlice<RecordID>, _ entries: ArraySlice<OverlayEntry>, sequence: UInt64, versioned: Bool,
                              snapshot: SnapshotReader, watching: [SecondaryIndex], changes: inout IDMap<UInt64, OverlayEntry>,
                              count: inout (records: Int, shadowed: Int), versions: inout IDMap<UInt64, UInt64>,
                              nextSerial: inout UInt64) {
        // Room for the whole run first when it outnumbers what the tables hold: a large
        // transaction (a bulk save, or one replayed at open) would grow them by doubling,
        // rehashing every entry each time. (A smaller run may be mostly updates of IDs
        // the tables hold; reserving for it would grow them for nothing.)
        if ids.count > changes.count { changes.reserveCapacity(changes.count + ids.count) }
        if versioned, ids.count > versions.count { versions.reserveCapacity(versions.count + ids.count) }
        for (id, entry) in zip(ids, entries) {
            if versioned { versions[id.rawValue] = sequence }
            apply(id, entry: entry, snapshot: snapshot, watching: watching, changes: &changes, count: &count, nextSerial: &nextSerial)
        }
    }

    /// One record's change, into its entity's overlay `changes`, its record count and the
    /// count of snapshot records the overlay holds. The snapshot is searched only if the
    /// overlay does not know the record.
    @inline(__always)
    private static func apply(_ id: RecordID, entry: OverlayEntry, snapshot: SnapshotReader, watching: [SecondaryIndex],
                              changes: inout IDMap<UInt64, OverlayEntry>, count: inout (records: Int, shadowed: Int),
                              nextSerial: inout UInt64) {
        let raw = id.rawValue
        // Every ID the log names was handed out, deleted ones too.
        if id.serial >= nextSerial { nextSerial = id.serial + 1 }
        for index in watching { index.noteChange(raw) }
        if entry.isLive {
            switch changes.updateValue(entry, forKey: raw) {
            case let old?: if old.isDeleted { count.records += 1 }
            case nil: if snapshot.contains(id) { count.shadowed += 1 } else { count.records += 1 }
            }
        } else {
            switch changes[raw] {
            case let old?:
                guard old.isLive else { break }
                count.records -= 1
                if snapshot.contains(id) { changes[raw] = .deleted } else { _ = changes.removeValue(forKey: raw) }
            case nil:
                if snapshot.contains(id) {
                    count.records -= 1
                    count.shadowed += 1
                    changes[raw] = .deleted
                }
            }
        }
    }
}
