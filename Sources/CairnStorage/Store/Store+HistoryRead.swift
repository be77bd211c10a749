/// Reading history: the transactions after a sequence number, each with what it did to
/// each record: from the log's frames and their notes (FORMAT.md §5.1), and before the
/// log, from the history file a compaction kept (§14).
extension Store {
    /// The history the store holds after a sequence number.
    package struct HistoryWindow: Sendable {
        /// The transactions after the sequence asked for, oldest first.
        package var entries: [HistoryEntry]
        /// Transactions after this one are held; one at or before it is not.
        package var start: UInt64
        /// The last transaction held.
        package var end: UInt64
    }

    /// The transactions after `sequence` (nil: every one held), up to the newest. Throws
    /// `.historyExpired` if transactions after `sequence` are no longer held (a
    /// compaction let them go), and `.invalidArgument` for a sequence past the newest.
    package func history(after sequence: UInt64?) throws -> HistoryWindow {
        // (Read again if a compaction swapped the files between taking them and reading.)
        for _ in 0..<3 {
            // The snapshot, log and kept history of one state: a compaction switches them
            // while it holds the log.
            guard let (snapshot, file, end, snapshotNumber, mapped) = log.withLock({ writer in
                writer.map { writer in
                    state.withLock { ($0.snapshot, writer.file, writer.appendOffset, writer.manifest.snapshotNumber, $0.keptHistory) }
                }
            }) else { throw closedError() }
            let logged = try Self.logHistory(file: file, end: end, snapshot: snapshot, after: sequence)
            guard logged.base == snapshot.footer.lastSequence else { continue }
            var window = HistoryWindow(entries: logged.entries, start: logged.base, end: max(logged.end, logged.base))
            if sequence.map({ $0 < logged.base }) ?? true, let mapped,
               let kept = try keptHistory(mapped, snapshotNumber: snapshotNumber) {
                if let last = kept.entries.last?.sequence, last != logged.base {
                    throw CairnError(.corrupt, "the kept history ends at transaction \(last), not at its snapshot's \(logged.base)",
                                     path: joinPath(path, StoreFileName.history(snapshotNumber)))
                }
                window.entries = kept.entries.filter { $0.sequence > (sequence ?? 0) } + window.entries
                window.start = kept.header.baseSequence
            }
            if let sequence {
                guard sequence >= window.start else {
                    throw CairnError(.historyExpired,
                                     "the history after transaction \(sequence) is no longer held: the store holds it from transaction \(window.start + 1)")
                }
                guard sequence <= window.end else {
                    throw CairnError(.invalidArgument, "transaction \(sequence) is past the store's newest, \(window.end)")
                }
            }
            return window
        }
        throw CairnError(.historyExpired, "the store compacted three times while its history was read; read it again")
    }

    /// The history file kept with snapshot `number` (`mapped`, or read now if nil), read
    /// and checked, or nil if there is none; with records' values before each change when
    /// `pastValues` asks for them.
    func keptHistory(_ mapped: FileMapping? = nil, snapshotNumber number: UInt64,
                     pastValues: Bool = false, after: UInt64 = 0) throws -> (header: FileHeader, entries: [HistoryEntry])? {
        let filePath = joinPath(path, StoreFileName.history(number))
        guard let mapping = try mapped ?? Self.mapHistory(in: path, snapshotNumber: number, options: options) else { return nil }
        do {
            let kept = try withExtendedLifetime(mapping) { try HistoryFileCoding.decode(mapping.bytes, pastValues: pastValues, after: after) }
            guard kept.header.storeID.uuidString == storeID, kept.header.fileNumber == number else {
                throw CairnError.corrupt("the history file is of another store or snapshot", offset: 16)
            }
            return kept
        } catch let error as CairnError {
            throw error.located(in: filePath)
        }
    }

    /// The transactions of the log `file` (up to `end`) after `sequence` (nil: all), with
    /// the log's base sequence and its last transaction. Frames with notes are reported
    /// by them; others by replaying which records exist (from `snapshot`, the log's).
    /// With `pastValues`, each update and delete carries the record's body before it: from
    /// the log's earlier put of the record, or else from `snapshot`.
    static func logHistory(file: any StorageFile, end: Int, snapshot: SnapshotReader,
                           after sequence: UInt64?, pastValues: Bool = false) throws -> (entries: [HistoryEntry], base: UInt64, end: UInt64) {
        var entries: [HistoryEntry] = []
        var last: UInt64 = 0
        // Whether each record the log touched exists after it, for frames without notes.
        var exists: [UInt64: Bool] = [:]
        // With `pastValues`: each record's last body in the log so far (nil: deleted),
        // valid while the walk's mapping is.
        var latest: [UInt64: UnsafeRawBufferPointer?] = [:]
        // (A snapshot body that does not read back is kept as no past value: the states
        // before its change expire, and nothing else is lost, since the log replaced it.)
        func before(_ id: RecordID) -> [UInt8]? {
            if let body = latest[id.rawValue] { return body.map { [UInt8]($0) } }
            guard let place = snapshot.place(of: id) else { return nil }
            return withExtendedLifetime(snapshot) { (try? snapshot.body(at: place, id: id)).map { [UInt8]($0) } }
        }
        let base = try forEachTransaction(in: file, end: end) { number, payload, offset, _ in
            last = number
            let wanted = number > (sequence ?? 0)
            var entry = HistoryEntry(sequence: number, time: 0, author: nil, changes: [])
            var operations: [(id: RecordID, body: UnsafeRawBufferPointer?)] = []
            var notes: TransactionNotes?
            entry.time = try TransactionCoding.decode(payload, base: offset, notes: { notes = $0 }) { id, body in
                operations.append((id, body))
            }
            func note(_ change: HistoryChange, of operation: (id: RecordID, body: UnsafeRawBufferPointer?)) throws {
                guard wanted else { return }
                var change = change
                if pastValues, change.kind != .insert { change.before = before(operation.id) }
                entry.changes.append(change)
            }
            if let notes {
                entry.author = notes.author
                for (operation, change) in zip(operations, notes.changes) {
                    exists[operation.id.rawValue] = operation.body != nil
                    switch change {
                    case .insert: try note(HistoryChange(id: operation.id, kind: .insert, slots: nil), of: operation)
                    case .update(let slots): try note(HistoryChange(id: operation.id, kind: .update, slots: slots), of: operation)
                    case .delete: try note(HistoryChange(id: operation.id, kind: .delete, slots: nil), of: operation)
                    case .deleteKeeping(let slots, let values):
                        try note(HistoryChange(id: operation.id, kind: .delete, slots: nil, keptSlots: slots, keptValues: values), of: operation)
                    case .absent: break
                    }
                    if pastValues { latest[operation.id.rawValue] = .some(operation.body) }
                }
            } else {
                for operation in operations {
                    let existed = exists[operation.id.rawValue] ?? snapshot.contains(operation.id)
                    exists[operation.id.rawValue] = operation.body != nil
                    if operation.body != nil {
                        try note(HistoryChange(id: operation.id, kind: existed ? .update : .insert, slots: nil), of: operation)
                    } else if existed {
                        try note(HistoryChange(id: operation.id, kind: .delete, slots: nil), of: operation)
                    }
                    if pastValues { latest[operation.id.rawValue] = .some(operation.body) }
                }
            }
            if wanted { entries.append(pastValues ? HistoryFileCoding.fitted(entry) : entry) }
        }
        return (entries, base, last)
    }

    /// The newest of `entries` that `retention` keeps, at `now` (milliseconds since 1970):
    /// always a run that ends with the newest, so what is kept has no gap.
    static func retained(_ entries: [HistoryEntry], by retention: HistoryRetention, now: UInt64) -> ArraySlice<HistoryEntry> {
        entries[firstRetained(count: entries.count, time: { entries[$0].time }, frameSize: { HistoryFileCoding.frameSize(of: entries[$0]) },
                              by: retention, now: now)...]
    }

    /// The first of `count` transactions, oldest first, each committed at `time(i)` and
    /// taking `frameSize(i)` bytes in a history file, that `retention` keeps at `now`.
    static func firstRetained(count: Int, time: (Int) -> UInt64, frameSize: (Int) -> Int,
                              by retention: HistoryRetention, now: UInt64) -> Int {
        switch retention {
        case .unlimited:
            return 0
        case .transactions(let kept):
            return count - min(count, max(0, kept))
        case .age(let seconds):
            // (A negative or NaN age keeps none; one past 30,000 years, all.)
            let span = seconds >= 0 ? UInt64(min(seconds, 1e12) * 1000) : nil
            let oldest = span.map { now > $0 ? now - $0 : 0 } ?? .max
            var first = count
            while first > 0, time(first - 1) >= oldest { first -= 1 }
            return first
        case .bytes(let limit):
            var total = 0, first = count
            while first > 0 {
                total += frameSize(first - 1)
                guard total <= limit else { break }
                first -= 1
            }
            return first
        }
    }
}
