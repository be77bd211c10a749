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
    typealias BatchRecords = [UInt64: [UInt8]?]

    /// The notes of `operations` by `author`, committed after the store's state and the
    /// batch's earlier transactions (`batch`, to which they are added).
    func notes(for operations: [RecordOperation], author: String?, batch: inout BatchRecords) throws -> TransactionNotes {
        try withState({ ($0.overlay, $0.snapshot, $0.bodies) }) { taken in
            let (overlay, snapshot, bodies) = taken
            var changes: [TransactionNotes.Change] = []
            changes.reserveCapacity(operations.count)
            for operation in operations {
                let id = operation.id, raw = id.rawValue
                // The record as it was: from this batch, else from the store's state.
                let before: Before
                if let written = batch[raw] {
                    before = written.map { .body($0) } ?? .absent
                } else if let entry = overlay.lookup(id.entity, { $0[raw] }) {
                    before = entry.isLive ? .stored(try bodies.body(entry)) : .absent
                } else if let place = snapshot.place(of: id) {
                    before = .stored(try snapshot.body(at: place, id: id))
                } else {
                    before = .absent
                }
                switch operation {
                case .delete:
                    changes.append(before.exists ? .delete : .absent)
                    batch[raw] = .some(nil)
                case .put(_, let body):
                    batch[raw] = .some(body)
                    guard before.exists else {
                        changes.append(.insert)
                        continue
                    }
                    let now = try body.withUnsafeBytes { try ValueCoding.decode($0) }
                    let was = try before.values()
                    changes.append(.update(slots: now.indices.filter { $0 >= was.count || !Value.same(was[$0], now[$0]) }))
                }
            }
            return TransactionNotes(author: author, changes: changes)
        }
    }

    /// A record before an operation: absent, or its body (valid while the state taken is).
    private enum Before {
        case absent
        case body([UInt8])
        case stored(UnsafeRawBufferPointer)

        var exists: Bool {
            if case .absent = self { return false }
            return true
        }

        func values() throws -> [Value] {
            switch self {
            case .absent: return []
            case .body(let bytes): return try bytes.withUnsafeBytes { try ValueCoding.decode($0) }
            case .stored(let bytes): return try ValueCoding.decode(bytes)
            }
        }
    }
}
