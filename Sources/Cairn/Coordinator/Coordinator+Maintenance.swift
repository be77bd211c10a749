import CairnStorage
import Foundation

/// One transaction the store's log still holds (``Coordinator/history()``): when it was
/// committed and how many records of each entity it inserted, updated and deleted.
public struct CommittedTransaction: Sendable, Equatable {
    /// How many records of one entity a transaction changed.
    public struct Counts: Sendable, Equatable {
        /// Records inserted: put where no record of the ID existed before.
        public var inserted: Int
        /// Records updated: put over an existing record.
        public var updated: Int
        /// Records deleted.
        public var deleted: Int

        /// Counts of inserted, updated and deleted records.
        public init(inserted: Int, updated: Int, deleted: Int) {
            (self.inserted, self.updated, self.deleted) = (inserted, updated, deleted)
        }
    }

    /// The transaction's number: each commit's is one more than the one before.
    public var sequence: UInt64
    /// When it was committed.
    public var date: Date
    /// Per entity name, the records it changed.
    public var changes: [String: Counts]
}

extension Coordinator {
    /// What opening the store found and did: transactions replayed, a torn log tail cut
    /// (and why), a checkpoint used or set aside, files of an interrupted compaction removed.
    public var recoveryReport: RecoveryReport { store.recovery }

    /// Record counts per entity, the sizes of the snapshot and the log, and the last
    /// transaction committed, as they are now.
    public var statistics: StoreStatistics { store.statistics }

    /// Reads every record back, checking each checksum, and checks values against the
    /// model, references and inverses, uniqueness and the stored indexes. Returns what
    /// it found wrong, in that order; empty for a sound store. Changes nothing. Its cost
    /// is a read of the whole store; `cairn verify` runs the same check from the command
    /// line.
    public func verify() -> [StoreProblem] { store.verify() }

    /// Folds the log into a new snapshot now, whatever ``CompactionPolicy`` says: the store
    /// holds the same records in fewer bytes and opens without replaying a log. Saves wait
    /// while it runs; fetches do not. Atomic: a crash part way leaves the old files in force.
    @discardableResult
    public func compact() throws -> CompactionResult { try store.compact() }

    /// The transactions the log holds (those since the last compaction), oldest first.
    /// A put counts as an insert when the record did not exist before it, else as an
    /// update. Reads the whole log.
    public func history() throws -> [CommittedTransaction] {
        try store.history().map { transaction in
            var changes: [String: CommittedTransaction.Counts] = [:]
            for (number, counts) in transaction.changes {
                let name = entity(number: number)?.name ?? "entity \(number)"
                changes[name] = CommittedTransaction.Counts(inserted: counts.inserts, updated: counts.updates, deleted: counts.deletes)
            }
            return CommittedTransaction(sequence: transaction.sequence,
                                        date: Date(timeIntervalSince1970: Double(transaction.time) / 1000),
                                        changes: changes)
        }
    }
}
