/// Reading an entity's records in the order of an attribute's index: a sorted fetch with
/// a limit by an indexed attribute reads the records in its sort's order and stops once
/// it has enough, rather than reading every record (the 20 highest of 200,000 by an
/// indexed number).
extension Store {
    /// Calls `body` with the records of `entity` in the index order of the attribute at
    /// `slot` (values, then IDs), or its reverse: each one's ID, version, indexed value and
    /// encoded values, all read in one state, until `body` returns false.
    package func scanInIndexOrder(entity: UInt16, slot: Int, ascending: Bool,
                          _ body: (RecordID, UInt64, Value, borrowing StoredRecord) throws -> Bool) throws {
        guard let description = schema.entity(number: entity), slot >= 0, slot < description.attributes.count else {
            throw CairnError(.invalidArgument, "no attribute \(slot) in entity \(entity) to index")
        }
        let key = IndexKey(entity: entity, slot: slot)
        // (Built again if it went between the build and the walk: a migration keeps only
        // the indexes its snapshot stores.)
        for _ in 0..<3 {
            if state.withLock({ $0.indexes[key] }) == nil { try buildIndex(key) }
            let walked = try withState({ state in
                try state.indexes[key].map { (try $0.tiers(changes: state.overlay(of: entity)), state.snapshot, state.versionTable) }
            }) { taken -> Bool in
                guard let (tiers, snapshot, versions) = taken else { return false }
                try locating { try Self.walk(tiers, snapshot: snapshot, versions: versions, ascending: ascending, body) }
                return true
            }
            if walked { return }
        }
        throw CairnError(.notFound, "the index of attribute \(slot) of entity \(entity) went as it was read, three times")
    }

    /// Walks `tiers`, taken in one state with `snapshot` and `versions` (see
    /// ``scanInIndexOrder(entity:slot:ascending:_:)``).
    private static func walk(_ tiers: IndexTiers, snapshot: SnapshotReader, versions: Store.VersionTable, ascending: Bool,
                             _ body: (RecordID, UInt64, Value, borrowing StoredRecord) throws -> Bool) throws {
        try tiers.walk(ascending: ascending) { value, raw, place in
            let id = RecordID(rawValue: raw)
            let version = versions.version(of: id)
            let bytes: UnsafeRawBufferPointer
            if let place, tiers.stored?.snapshot === snapshot {
                bytes = try snapshot.body(at: place, id: id)
            } else {
                switch tiers.changes[raw] {
                case let entry? where entry.isLive: bytes = try tiers.changes.bodies.body(entry)
                case .some: return true
                case nil:
                    guard let place = snapshot.place(of: id) else { return true }
                    bytes = try snapshot.body(at: place, id: id)
                }
            }
            return try marking(id, bytes) { try body(id, version, value, StoredRecord(bytes)) }
        }
    }
}

/// An index's tiers (see ``SecondaryIndex``) taken together in one state: the stored block
/// (its entries out of date where `changes`, the overlay, holds their IDs), the sorted run
/// (out of date for `stale` IDs), the recent run (for IDs in `delta`) and the delta.
struct IndexTiers {
    let stored: (snapshot: SnapshotReader, block: SnapshotIndex.AttributeIndex)?
    let sorted: SortedRun
    let stale: Set<UInt64>
    let recent: [(value: Value, id: UInt64)]
    let delta: [UInt64: Value?]
    let changes: EntityOverlay

    /// Calls `body` with every current entry in index order (value, then ID), or its
    /// reverse — its value, raw ID and, for a stored entry, where its frame is — until
    /// `body` returns false: the tiers, each in order, merged.
    func walk(ascending: Bool, _ body: (Value, UInt64, SnapshotReader.Place?) throws -> Bool) throws {
        var changed: [(Value, UInt64)] = []
        for (id, value) in delta { if let value { changed.append((value, id)) } }
        let runs = [sorted, .values(recent), .values(SecondaryIndex.sortedRun(unordered: changed))]
        // Each run's next position (counting down, in reverse), and the stored block's.
        var next = runs.map { ascending ? 0 : $0.count - 1 }
        let storedCount = stored?.block.count ?? 0
        var storedNext = ascending ? 0 : storedCount - 1
        func inBounds(_ position: Int, _ count: Int) -> Bool { position >= 0 && position < count }
        /// The stored block's next current entry, past those out of date.
        func storedHead() throws -> (value: Value, id: UInt64, place: SnapshotReader.Place)? {
            guard let (snapshot, block) = stored else { return nil }
            while inBounds(storedNext, storedCount) {
                let (id, place) = try snapshot.record(in: block, at: storedNext)
                if changes.contains(id.rawValue) { storedNext += ascending ? 1 : -1; continue }
                let bytes = try snapshot.body(at: place, id: id)
                do {
                    return (try ValueCoding.value(at: block.attribute, in: bytes) ?? .null, id.rawValue, place)
                } catch let error as CairnError {
                    throw error.located(in: snapshot.path, base: Int64(snapshot.fileOffset(of: bytes)))
                }
            }
            return nil
        }
        /// Run `run`'s next current entry.
        func runHead(_ run: Int) -> (value: Value, id: UInt64)? {
            while inBounds(next[run], runs[run].count) {
                let entry = runs[run][next[run]]
                let outOfDate = run == 0 ? stale.contains(entry.id) : run == 1 ? delta[entry.id] != nil : false
                if !outOfDate { return entry }
                next[run] += ascending ? 1 : -1
            }
            return nil
        }
        var storedEntry = try storedHead()
        while true {
            // The first (or last) of the heads; -1 for the stored block's.
            var best: (value: Value, id: UInt64, tier: Int)? = storedEntry.map { ($0.value, $0.id, -1) }
            for run in runs.indices {
                guard let head = runHead(run) else { continue }
                if let current = best {
                    let order = IndexOrder.compare(head.value, current.value)
                    let before = order == .orderedSame ? head.id < current.id : order == .orderedAscending
                    if before != ascending { continue }
                }
                best = (head.value, head.id, run)
            }
            guard let best else { return }
            if best.tier < 0 {
                guard try body(best.value, best.id, storedEntry?.place) else { return }
                storedNext += ascending ? 1 : -1
                storedEntry = try storedHead()
            } else {
                guard try body(best.value, best.id, nil) else { return }
                next[best.tier] += ascending ? 1 : -1
            }
        }
    }
}
