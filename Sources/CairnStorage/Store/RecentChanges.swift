import CairnCollections
/// The records of one entity that its latest transactions changed, oldest first: what
/// live results ask to take in a save by updating the rows it touched, not by fetching
/// every record again. Bounded: past ``capacity`` IDs the oldest transactions' are
/// dropped, and a question reaching back to them has no answer (the results then fetch
/// again). Kept in memory only.
struct RecentChanges: Sendable {
    static let capacity = 4_096

    /// Every record changed by a transaction after this sequence number is here.
    private(set) var floor: UInt64 = 0
    /// The transaction of each entry (ascending) and the record it changed.
    private var sequences: [UInt64] = []
    private var raws: [UInt64] = []

    /// Notes the records a run of transaction `sequence` changed (one entity's).
    mutating func note(_ run: ArraySlice<RecordID>, sequence: UInt64) {
        guard run.count <= Self.capacity else {
            // A bulk change: nothing before it (nor itself) is kept.
            sequences.removeAll(keepingCapacity: true)
            raws.removeAll(keepingCapacity: true)
            floor = sequence
            return
        }
        if raws.count + run.count > Self.capacity { dropOldest(toFit: run.count) }
        for id in run {
            sequences.append(sequence)
            raws.append(id.rawValue)
        }
    }

    /// Drops whole transactions, oldest first, at least half of the entries (so a full
    /// ring moves its entries once per half of its capacity, not once per transaction).
    private mutating func dropOldest(toFit incoming: Int) {
        var cut = min(sequences.count, max(raws.count + incoming - Self.capacity, raws.count / 2))
        guard cut > 0 else { return }
        let last = sequences[cut - 1]
        while cut < sequences.count, sequences[cut] == last { cut += 1 }
        floor = last
        sequences.removeSubrange(..<cut)
        raws.removeSubrange(..<cut)
    }

    /// The raw IDs changed by the transactions after `sequence` (a record may be named
    /// more than once), or nil if some of those transactions' were dropped.
    func changed(after sequence: UInt64) -> [UInt64]? {
        guard sequence >= floor else { return nil }
        let start = sequences.partitionPoint { $0 > sequence }
        return Array(raws[start...])
    }
}
