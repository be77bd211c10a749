import CairnCollections

/// Past states (FORMAT.md §14): the committed state just after an earlier transaction,
/// rebuilt from the newest one by putting back what each record was before the first
/// change after it: from the log's frames since the snapshot, and before the snapshot
/// from the history file's past values.
extension Store {
    /// A generation holding the committed state just after transaction `sequence`: reads
    /// at it see exactly the records that state had, as ``pinGeneration(by:)``'s do,
    /// while the store goes on. The newest state is pinned as it is.
    ///
    /// Throws `.historyExpired` when the store no longer holds what that state needs (a
    /// compaction let its history go, or kept it without past values), `.invalidArgument`
    /// for a transaction past the newest, and `.poisoned` after a failed write.
    package func pastGeneration(at sequence: UInt64, by label: String) throws -> StoreGeneration {
        // (A poisoned store's state holds commits its log no longer does: what they changed
        // could not be put back.)
        if let error = poison.withLock({ $0 }) {
            throw CairnError(.poisoned, "store at \(path) cannot rebuild past states after an earlier failure (\(error.message)); reopen it")
        }
        // The state, and the log (mapped, so that a compaction closing it meanwhile does
        // not matter) and history file it was read from: a compaction switches them while
        // it holds the log.
        guard let taken = try log.withLock({ writer in
            try writer.map { writer in
                (self.state.withLock { $0 }, try writer.file.map(), writer.file.path, writer.appendOffset, writer.manifest.snapshotNumber)
            }
        }) else { throw closedError() }
        // The state as taken is let go of under the lock (see ``withState(_:_:)``): the
        // tables the past state changes share their storage with the store's until then.
        var held = [taken.0]
        defer { self.state.withLock { _ in held.removeAll() } }
        var state = held[0]
        let (logMapping, logPath, end, snapshotNumber) = (taken.1, taken.2, taken.3, taken.4)
        guard sequence <= state.lastSequence else {
            throw CairnError(.invalidArgument, "transaction \(sequence) is past the store's newest, \(state.lastSequence)")
        }
        if sequence == state.lastSequence {
            return register(StoreGeneration(store: self, state: state, pinnedBy: label, isPast: true))
        }
        let snapshotSequence = state.snapshot.footer.lastSequence
        // What each record changed after `sequence` was then: as the snapshot has it, or
        // the overlay entry to read instead (deleted, a body in the log, or one held).
        var then: [RecordID: OverlayEntry?] = [:]
        var pastValueBytes = 0
        if sequence < snapshotSequence {
            pastValueBytes = try takePastValues(after: sequence, through: snapshotSequence, snapshotNumber: snapshotNumber,
                                                mapped: state.keptHistory, into: &then, bodies: &state.bodies)
        }
        // The log: each record's last entry up to `sequence` (frames after the snapshot),
        // and the records changed after it.
        var lastEntry: [RecordID: OverlayEntry] = [:]
        var changedAfter: [RecordID] = []
        let newest = state.lastSequence
        try Self.forEachTransaction(in: logMapping, path: logPath, end: end) { number, payload, offset, log in
            guard number <= newest else { return }
            _ = try TransactionCoding.decode(payload, base: offset) { id, body in
                if number > sequence {
                    changedAfter.append(id)
                } else if let body {
                    lastEntry[id] = state.bodies.entry(offset: Int(bitPattern: body.baseAddress) - Int(bitPattern: log.baseAddress), body: body)
                } else {
                    lastEntry[id] = .deleted
                }
            }
        }
        for id in changedAfter where then[id] == nil { then[id] = .some(lastEntry[id]) }
        state.revert(to: then, sequence: sequence)
        return register(StoreGeneration(store: self, state: state, pinnedBy: label, isPast: true, pastValueBytes: pastValueBytes))
    }

    /// Adds to `then` what the records changed after `sequence`, up to the snapshot's
    /// last transaction `through`, were just after `sequence`: the value before the first
    /// of those changes, from the history file kept with snapshot `snapshotNumber`.
    /// Returns the bytes of the past values it holds.
    private func takePastValues(after sequence: UInt64, through snapshotSequence: UInt64, snapshotNumber: UInt64,
                                mapped: FileMapping?, into then: inout [RecordID: OverlayEntry?], bodies: inout LogBodies) throws -> Int {
        guard let mapped, let kept = try keptHistory(mapped, snapshotNumber: snapshotNumber, pastValues: true, after: sequence),
              kept.header.baseSequence <= sequence else {
            throw CairnError(.historyExpired,
                             "the state after transaction \(sequence) is no longer held: the store keeps no history before its snapshot's transaction \(snapshotSequence)")
        }
        if let last = kept.entries.last?.sequence, last != snapshotSequence {
            throw CairnError(.corrupt, "the kept history ends at transaction \(last), not at its snapshot's \(snapshotSequence)",
                             path: joinPath(path, StoreFileName.history(snapshotNumber)))
        }
        var held = 0
        for entry in kept.entries {
            for change in entry.changes where then[change.id] == nil {
                switch change.kind {
                case .insert: then[change.id] = .some(.deleted)
                case .update, .delete:
                    guard let before = change.before else {
                        throw CairnError(.historyExpired,
                                         "the state after transaction \(sequence) is not held: the history of transaction \(entry.sequence) keeps no past values (it was kept by format version 5)")
                    }
                    then[change.id] = .some(before.withUnsafeBytes { bodies.hold($0) })
                    held += before.count
                }
            }
        }
        return held
    }
}

extension StoreState {
    /// Puts back what the records of `then` were (nil: as the snapshot has them), making
    /// this the state just after transaction `sequence`. A read at it scans (the indexes
    /// follow the newest state), and the versions of the records it puts back are 0.
    mutating func revert(to then: [RecordID: OverlayEntry?], sequence: UInt64) {
        for (id, entry) in then {
            let entity = id.entity, inSnapshot = snapshot.contains(id)
            // (In place: the first change to an entity's overlay copies it from the store's.)
            let (existed, exists) = Self.put(entry, for: id, inSnapshot: inSnapshot, into: &overlay[entity, default: IDMap()])
            if exists != existed { counts[entity] = (counts[entity] ?? 0) + (exists ? 1 : -1) }
            versions[id.rawValue] = 0
        }
        indexes = [:]
        lastSequence = sequence
    }

    /// Sets record `id`'s entry in its entity's overlay `entries` to `entry` (nil, or a
    /// delete of a record the snapshot lacks: no entry), and says whether it existed
    /// before and exists after.
    private static func put(_ entry: OverlayEntry?, for id: RecordID, inSnapshot: Bool,
                            into entries: inout IDMap<UInt64, OverlayEntry>) -> (existed: Bool, exists: Bool) {
        let existed = entries[id.rawValue]?.isLive ?? inSnapshot
        if let entry, entry.isLive || inSnapshot {
            entries[id.rawValue] = entry
            return (existed, entry.isLive)
        }
        entries.removeValue(forKey: id.rawValue)
        return (existed, inSnapshot)
    }
}
