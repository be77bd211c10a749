import CairnCollections
import Dispatch

/// Scans: an entity's records in ID order, the snapshot's merged with the log's changes,
/// read from one consistent state; on one thread, or with the test of each record split
/// over several.
extension Store {
    /// Calls `body` with each record of an entity in ID order — its ID and encoded values
    /// — from one consistent state, without materialising them all.
    package func scan(entity: UInt16, at generation: StoreGeneration? = nil,
                      _ body: (RecordID, borrowing StoredRecord) throws -> Void) throws {
        try scanVersioned(entity: entity, at: generation) { id, _, record in try body(id, record) }
    }

    /// ``scan(entity:_:)`` that also gives each record's version, read in the same state.
    package func scanVersioned(entity: UInt16, at generation: StoreGeneration? = nil,
                               _ body: (RecordID, UInt64, borrowing StoredRecord) throws -> Void) throws {
        try scanVersioned(entity: entity, recheckingFrames: false, at: generation, body)
    }

    /// ``scanVersioned(entity:_:)``; with `recheckingFrames`, every snapshot frame's
    /// checksum is computed again, even if an earlier read checked it (for ``verify()``).
    package func scanVersioned(entity: UInt16, recheckingFrames: Bool, at generation: StoreGeneration? = nil,
                       _ body: (RecordID, UInt64, borrowing StoredRecord) throws -> Void) throws {
        try locating {
            try withState(at: generation, { Self.scanState(of: entity, in: $0) }) { try Self.scan($0, entity: entity, recheckingFrames: recheckingFrames, body) }
        }
    }

    /// What a scan of `entity` reads, taken in one state: the entity's overlay, the
    /// snapshot and the log's record versions (under the lock, see ``withState(_:_:)``).
    private static func scanState(of entity: UInt16, in state: StoreState)
        -> (overlay: EntityOverlay, snapshot: SnapshotReader, versions: VersionTable) {
        (state.overlay(of: entity), state.snapshot, state.versionTable)
    }

    /// The scan on one thread, of state taken by ``scanState(of:in:)``.
    private static func scan(_ state: (overlay: EntityOverlay, snapshot: SnapshotReader, versions: VersionTable),
                             entity: UInt16, recheckingFrames: Bool,
                             _ body: (RecordID, UInt64, borrowing StoredRecord) throws -> Void) throws {
        let (overlay, snapshot, versions) = state
        // A scan reads every body of the entity's: the frames a checkpoint covered are
        // checked at once, on every core, rather than a lookup per body.
        if !overlay.isEmpty { try overlay.bodies.checkAll() }
        // Both are used through unretained references: they live to the end of this
        // block, and captured strongly they would be retained and released around every record.
        let unretainedSnapshot = Unmanaged.passUnretained(snapshot), unretainedVersions = Unmanaged.passUnretained(versions)
        try withExtendedLifetime((snapshot, versions, overlay)) {
            try merge(snapshot: snapshot, overlay: overlay, entity: entity) { id, source in
                let version = unretainedVersions._withUnsafeGuaranteedRef { $0.version(of: id) }
                // (A body error is marked for the store to locate.)
                switch source {
                case .snapshot(let place):
                    let bytes = try unretainedSnapshot._withUnsafeGuaranteedRef {
                        try recheckingFrames ? $0.checkedBody(at: place, id: id) : $0.body(at: place, id: id)
                    }
                    try marking(id, bytes) { try body(id, version, StoredRecord(bytes)) }
                case .overlay(let bytes): try marking(id, bytes) { try body(id, version, StoredRecord(bytes)) }
                }
            }
        }
    }

    /// A test of stored records for one run of a scan in parts: made for the run on the
    /// thread that scans it, and called there only.
    package typealias RecordTest = (RecordID, borrowing StoredRecord) throws -> Bool

    /// ``scanVersioned(entity:_:)`` with a test that runs on several threads at once. The
    /// entity's records are split into up to `parts` runs of ID order (of at least
    /// `minimumPerRun` records each), each run is scanned on a thread of its own with the
    /// test `tester(run)` makes for it, which picks the records to keep (no tester: all,
    /// on one thread, as there is nothing to split); then `body` is called on this thread
    /// for each kept record, in ID order, with its version, all read in one state.
    ///
    /// Each run's test is made and called on that run's thread alone: what it keeps (one
    /// per run, 0 to `parts - 1`) needs no lock. When the records make one run (`parts` 1,
    /// a small entity, a file older than version 3), the test of run 0 and `body` take
    /// turns on this thread, record by record, so a `body` that throws ends the scan there.
    /// Split, `body` is called only when every run succeeded; otherwise the first error of
    /// a run, in run order, is thrown.
    @inline(__always)
    package func scanVersioned(entity: UInt16, parts: Int, minimumPerRun: Int, at generation: StoreGeneration? = nil,
                       where tester: (@Sendable (Int) -> RecordTest)?,
                       _ body: (RecordID, UInt64, borrowing StoredRecord) throws -> Void) throws {
        try locating {
            try withState(at: generation, { Self.scanState(of: entity, in: $0) }) { taken in
                try Self.scanVersioned(taken, entity: entity, parts: parts, minimumPerRun: minimumPerRun, where: tester, body)
            }
        }
    }

    /// ``scanVersioned(entity:parts:minimumPerRun:where:_:)`` of state taken by ``scanState(of:in:)``.
    private static func scanVersioned(_ taken: (overlay: EntityOverlay, snapshot: SnapshotReader, versions: VersionTable),
                                      entity: UInt16, parts: Int, minimumPerRun: Int,
                                      where tester: (@Sendable (Int) -> RecordTest)?,
                                      _ body: (RecordID, UInt64, borrowing StoredRecord) throws -> Void) throws {
        let (overlay, snapshot, versions) = taken
        if !overlay.isEmpty { try overlay.bodies.checkAll() }
        guard let tester else { return try Self.scan(taken, entity: entity, recheckingFrames: false, body) }
        let runs = snapshot.scanRuns(of: entity, parts: parts, minimumPerRun: minimumPerRun)
        guard runs.count >= 2 else {
            let test = tester(0)
            return try Self.scan(taken, entity: entity, recheckingFrames: false) { id, version, record in
                if try marking(id, record.bytes, { try test(id, record) }) { try body(id, version, record) }
            }
        }
        let changed = RadixSort.sorted(overlay.keys)
        // Run r holds the overlay's IDs from its first snapshot ID (run 0: from the
        // lowest) to the next run's first.
        let cuts = [0] + runs.dropFirst().map { run in changed.partitionPoint { $0 >= run.firstID } } + [changed.count]
        // (Every body kept, the snapshot's and the overlay's, stays valid while `taken` does.)
        let kept = PerRun<Result<[(RecordID, UnsafeRawBufferPointer)], any Error>>(count: runs.count, initial: .success([]))
        // (The snapshot through an unretained reference, as in the scan on one thread.)
        let unretainedSnapshot = Unmanaged.passUnretained(snapshot)
        try withExtendedLifetime((snapshot, overlay)) {
            DispatchQueue.concurrentPerform(iterations: runs.count) { run in
                let test = tester(run)
                kept[run] = Result {
                    var hits: [(RecordID, UnsafeRawBufferPointer)] = []
                    try Self.merge(snapshot: snapshot, overlay: overlay, changed: changed[cuts[run]..<cuts[run + 1]],
                                   entity: entity, groups: runs[run].groups, live: { try overlay.liveBody($0) }) { id, source in
                        switch source {
                        case .snapshot(let place):
                            let bytes = try unretainedSnapshot._withUnsafeGuaranteedRef { try $0.body(at: place, id: id) }
                            if try marking(id, bytes, { try test(id, StoredRecord(bytes)) }) { hits.append((id, bytes)) }
                        case .overlay(let bytes):
                            if try marking(id, bytes, { try test(id, StoredRecord(bytes)) }) { hits.append((id, bytes)) }
                        }
                    }
                    return hits
                }
            }
            // Nothing is handed on unless every run succeeded.
            let hits = try (0..<runs.count).map { try kept[$0].get() }
            for run in hits {
                for (id, bytes) in run { try marking(id, bytes) { try body(id, versions.version(of: id), StoredRecord(bytes)) } }
            }
        }
    }

    /// Where a merged record's body is: the snapshot's place, or the bytes the overlay
    /// reads (valid while the overlay given to the merge is).
    enum Source {
        case snapshot(SnapshotReader.Place)
        case overlay(UnsafeRawBufferPointer)
    }

    /// The log's record versions as a scan reads them, by reference: a scan's per-record
    /// closure that captured the map itself would copy it, through its generic value
    /// witnesses, for every record.
    package final class VersionTable {
        private let versions: IDMap<UInt64, UInt64>
        private let runs: VersionRuns
        private let isEmpty: Bool
        init(_ versions: IDMap<UInt64, UInt64>, runs: VersionRuns) {
            self.versions = versions
            self.runs = runs
            isEmpty = versions.isEmpty && runs.isEmpty
        }
        @inline(__always) package func version(of id: RecordID) -> UInt64 {
            isEmpty ? 0 : versions[id.rawValue] ?? runs.version(of: id.rawValue) ?? 0
        }
    }

    /// Merges an entity's snapshot entries with the log's changes, in ID order.
    static func merge(snapshot: SnapshotReader, overlay: EntityOverlay, entity: UInt16,
                      _ body: (RecordID, Source) throws -> Void) throws {
        try merge(snapshot: snapshot, overlay: overlay, changed: RadixSort.sorted(overlay.keys)[...], entity: entity, groups: nil,
                  live: { try overlay.liveBody($0) }, body)
    }

    /// ``merge(snapshot:overlay:entity:_:)`` of the snapshot entries of `groups` (all with
    /// nil) and the log's changes `changed` (IDs sorted, all of the overlay's in that span).
    /// Inlined, with ``SnapshotReader/forEach(entity:groups:_:)``, into the scan's loop, so
    /// that the two closures between them and the caller's cost no call per record.
    /// `live` gives an overlay record's body, or nil for a deleted one (``EntityOverlay/liveBody(_:)``).
    @inline(__always)
    static func merge(snapshot: SnapshotReader, overlay: EntityOverlay, changed: ArraySlice<UInt64>,
                      entity: UInt16, groups: Range<Int>?, live: (UInt64) throws -> UnsafeRawBufferPointer?,
                      _ body: (RecordID, Source) throws -> Void) rethrows {
        var next = changed.startIndex
        try snapshot.forEach(entity: entity, groups: groups) { id, place in
            while next < changed.endIndex && changed[next] < id.rawValue {
                if let bytes = try live(changed[next]) { try body(RecordID(rawValue: changed[next]), .overlay(bytes)) }
                next += 1
            }
            if next < changed.endIndex && changed[next] == id.rawValue {
                if let bytes = try live(changed[next]) { try body(id, .overlay(bytes)) }
                next += 1
            } else {
                try body(id, .snapshot(place))
            }
        }
        while next < changed.endIndex {
            if let bytes = try live(changed[next]) { try body(RecordID(rawValue: changed[next]), .overlay(bytes)) }
            next += 1
        }
    }
}

/// One value per run of a scan in parts, each written by the thread of its run alone.
package final class PerRun<Value>: @unchecked Sendable {
    // @unchecked: the element of run r is written only by the one thread running run r
    // (inside `concurrentPerform`), and read only after `concurrentPerform` has returned,
    // which orders every run's writes before those reads. No element has two writers.
    private let slots: UnsafeMutableBufferPointer<Value>

    package var count: Int { slots.count }

    package init(count: Int, initial: Value) {
        slots = .allocate(capacity: count)
        slots.initialize(repeating: initial)
    }

    package init(count: Int, making make: (Int) -> Value) {
        slots = .allocate(capacity: count)
        for run in 0..<count { slots.initializeElement(at: run, to: make(run)) }
    }

    deinit { slots.deinitialize().deallocate() }

    /// The value of run `run`, borrowed in place (a class instance is not retained to
    /// call a method on it).
    package subscript(run: Int) -> Value {
        _read { yield slots[run] }
        _modify { yield &slots[run] }
    }
}
