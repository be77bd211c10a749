import CairnCollections

/// How long a store keeps its history: which transaction inserted, updated (and which
/// properties) and deleted which records, when, and by whom (``StoreOptions/history``).
/// The log holds the history of its transactions; a compaction keeps what the retention
/// allows in the store's history file (FORMAT.md §14).
public enum HistoryRetention: Sendable, Hashable {
    /// Every transaction, for as long as the store exists.
    case unlimited
    /// The last `count` transactions.
    case transactions(Int)
    /// The transactions of the last `seconds` seconds.
    case age(seconds: Double)
    /// The newest transactions whose history fits in `bytes` bytes of the history file.
    case bytes(Int)
}

/// Notes for history, made as a commit writes its frame (FORMAT.md §5.1): what each
/// operation did to the state before it.
extension Store {
    /// What the records a batch's earlier transactions wrote now hold (nil: deleted), by
    /// raw ID: the state a later transaction of the batch is noted against.
    typealias BatchRecords = IDMap<UInt64, RecordBody?>

    /// The notes of `operations` by `author`, committed after the store's state and the
    /// batch's earlier transactions (`batch`, to which they are added if `later`
    /// transactions of the batch are to be noted after them). `slots[i]`, when
    /// given, is a mask of the slots operation `i`'s committer changed in a record it read
    /// at the version the commit expects (a context's save): used for an update as it
    /// is, rather than found by decoding the record before and after.
    ///
    /// `kept[entity]` are the slots whose values a delete of a record of `entity` keeps
    /// (its tombstone), read from the record as the delete finds it.
    func notes(for operations: [RecordOperation], author: String?, slots hints: [UInt64?]?,
               kept: [UInt16: [Int]], batch: inout BatchRecords, later: Bool) throws -> TransactionNotes {
        try withState({ ($0.overlay, $0.snapshot, $0.bodies) }) { taken in
            let (overlay, snapshot, bodies) = taken
            var changes: [TransactionNotes.Change] = []
            changes.reserveCapacity(operations.count)
            // (Room first: a large transaction would grow the table by doubling, rehashing it each time.)
            if later { batch.reserveCapacity(batch.count + operations.count) }
            for (index, operation) in operations.enumerated() {
                let id = operation.id, raw = id.rawValue
                // Where the record was: in this batch, else in the store's state (its body
                // is read only if an update's slots are to be found by comparing).
                let before: Before
                if let written = batch[raw] {
                    before = written.map { .body($0) } ?? .absent
                } else if let entry = overlay.lookup(id.entity, { $0[raw] }) {
                    before = entry.isLive ? .logged(entry) : .absent
                } else if let place = snapshot.place(of: id) {
                    before = .snapshot(place)
                } else {
                    before = .absent
                }
                switch operation {
                case .delete:
                    if later { batch[raw] = .some(nil) }
                    guard before.exists else {
                        changes.append(.absent)
                        continue
                    }
                    guard let slots = kept[id.entity], !slots.isEmpty else {
                        changes.append(.delete)
                        continue
                    }
                    let was = try before.values(id: id, snapshot: snapshot, bodies: bodies)
                    let present = slots.filter { $0 < was.count }
                    changes.append(present.isEmpty ? .delete : .deleteKeeping(slots: present, values: present.map { was[$0] }))
                case .put(_, let body):
                    if later { batch[raw] = .some(body) }
                    guard before.exists else {
                        changes.append(.insert)
                        continue
                    }
                    if let hints, index < hints.count, var mask = hints[index] {
                        var slots: [Int] = []
                        slots.reserveCapacity(mask.nonzeroBitCount)
                        while mask != 0 {
                            slots.append(mask.trailingZeroBitCount)
                            mask &= mask - 1
                        }
                        changes.append(.update(slots: slots))
                        continue
                    }
                    let now = try body.withUnsafeBytes { try ValueCoding.decode($0) }
                    let was = try before.values(id: id, snapshot: snapshot, bodies: bodies)
                    changes.append(.update(slots: now.indices.filter { $0 >= was.count || !Value.same(was[$0], now[$0]) }))
                }
            }
            return TransactionNotes(author: author, changes: changes)
        }
    }

    /// Where a record was before an operation: absent, written earlier in the batch, in
    /// the log (an overlay entry) or in the snapshot.
    private enum Before {
        case absent
        case body(RecordBody)
        case logged(OverlayEntry)
        case snapshot(SnapshotReader.Place)

        var exists: Bool {
            if case .absent = self { return false }
            return true
        }

        /// Its values, its body read (and checked) from where it is.
        func values(id: RecordID, snapshot: SnapshotReader, bodies: LogBodies) throws -> [Value] {
            switch self {
            case .absent: return []
            case .body(let bytes): return try bytes.withUnsafeBytes { try ValueCoding.decode($0) }
            case .logged(let entry): return try ValueCoding.decode(try bodies.body(entry))
            case .snapshot(let place): return try ValueCoding.decode(try snapshot.body(at: place, id: id))
            }
        }
    }
}
