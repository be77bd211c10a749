/// Reading history: the transactions after a sequence number, each with what it did to
/// each record, from the frames' notes (FORMAT.md §5.1).
extension Store {
    /// One record a transaction changed, as history reports it.
    package struct HistoryChange: Sendable, Equatable {
        package enum Kind: Sendable, Equatable { case insert, update, delete }
        package var id: RecordID
        package var kind: Kind
        /// For an update: the slots (attributes, then relationships) it changed, or nil
        /// when its frame has no notes (written without history).
        package var slots: [Int]?
    }

    /// One committed transaction, as history reports it.
    package struct HistoryEntry: Sendable, Equatable {
        package var sequence: UInt64
        /// When it was committed, in milliseconds since 1970.
        package var time: UInt64
        package var author: String?
        package var changes: [HistoryChange]
    }

    /// The history the store holds: the transactions after `sequence`, oldest first, and
    /// the first sequence number it can report from (a token older is expired).
    package struct HistoryWindow: Sendable {
        package var entries: [HistoryEntry]
        /// Transactions after this one are held; one at or before it may not be.
        package var start: UInt64
        /// The last transaction read.
        package var end: UInt64
    }

    /// The transactions after `sequence` (nil: every one held), up to the newest, read
    /// from the log. Throws `.historyExpired` if transactions after `sequence` are no
    /// longer held (a compaction folded them), and `.invalidArgument` for a sequence past
    /// the newest.
    package func history(after sequence: UInt64?) throws -> HistoryWindow {
        // (Read again if a compaction swapped the files between taking the snapshot and the log.)
        for _ in 0..<3 {
            let snapshot = state.withLock { $0.snapshot }
            var window = HistoryWindow(entries: [], start: 0, end: 0)
            // Whether each record the log touched exists after it, for frames without notes.
            var exists: [UInt64: Bool] = [:]
            let base = try forEachLogTransaction { number, payload, offset, _ in
                window.end = number
                let wanted = number > (sequence ?? 0)
                var entry = HistoryEntry(sequence: number, time: 0, author: nil, changes: [])
                var operations: [(id: RecordID, put: Bool)] = []
                var notes: TransactionNotes?
                entry.time = try TransactionCoding.decode(payload, base: offset, notes: { notes = $0 }) { id, body in
                    operations.append((id, body != nil))
                }
                if let notes {
                    entry.author = notes.author
                    for (operation, change) in zip(operations, notes.changes) {
                        exists[operation.id.rawValue] = operation.put
                        guard wanted else { continue }
                        switch change {
                        case .insert: entry.changes.append(HistoryChange(id: operation.id, kind: .insert, slots: nil))
                        case .update(let slots): entry.changes.append(HistoryChange(id: operation.id, kind: .update, slots: slots))
                        case .delete: entry.changes.append(HistoryChange(id: operation.id, kind: .delete, slots: nil))
                        case .absent: break
                        }
                    }
                } else {
                    for operation in operations {
                        let existed = exists[operation.id.rawValue] ?? snapshot.contains(operation.id)
                        exists[operation.id.rawValue] = operation.put
                        guard wanted else { continue }
                        if operation.put {
                            entry.changes.append(HistoryChange(id: operation.id, kind: existed ? .update : .insert, slots: nil))
                        } else if existed {
                            entry.changes.append(HistoryChange(id: operation.id, kind: .delete, slots: nil))
                        }
                    }
                }
                if wanted { window.entries.append(entry) }
            }
            guard base == snapshot.footer.lastSequence else { continue }
            window.start = base
            if window.end < base { window.end = base }
            guard let sequence else { return window }
            guard sequence >= base else {
                throw CairnError(.historyExpired,
                                 "the history after transaction \(sequence) is no longer held: the store holds it from transaction \(base + 1)")
            }
            guard sequence <= window.end else {
                throw CairnError(.invalidArgument, "transaction \(sequence) is past the store's newest, \(window.end)")
            }
            return window
        }
        throw CairnError(.historyExpired, "the store compacted three times while its history was read; read it again")
    }
}
