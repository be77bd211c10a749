import CairnCollections
import CairnStorage
import Foundation

/// A point in a store's history: the state after one committed transaction. Codable, so
/// a consumer keeps it across launches (in its own defaults, file or server) and asks
/// for what changed since (``Coordinator/changes(since:)``); tokens of one store order
/// by their transactions.
public struct HistoryToken: Codable, Hashable, Comparable, Sendable, CustomStringConvertible, LosslessStringConvertible {
    /// The store the token is of (``Coordinator/storeID``).
    public let storeID: String
    /// The last transaction the state includes (0: the empty store).
    public let sequence: UInt64

    public init(storeID: String, sequence: UInt64) {
        self.storeID = storeID
        self.sequence = sequence
    }

    /// The text form, `STOREID:SEQUENCE` (as `cairn history --since` takes it).
    public var description: String { "\(storeID):\(sequence)" }

    /// Parses ``description``; nil for any other text.
    public init?(_ description: String) {
        guard let colon = description.lastIndex(of: ":"), let sequence = UInt64(description[description.index(after: colon)...]),
              colon > description.startIndex else { return nil }
        self.init(storeID: String(description[..<colon]), sequence: sequence)
    }

    /// Orders tokens of one store by their transactions (tokens of different stores by
    /// store, which means nothing but keeps the order total).
    public static func < (lhs: HistoryToken, rhs: HistoryToken) -> Bool {
        lhs.storeID == rhs.storeID ? lhs.sequence < rhs.sequence : lhs.storeID < rhs.storeID
    }
}

/// One committed transaction, as history reports it: when, by whom, and which objects it
/// inserted, updated (with the properties it changed) and deleted.
public struct HistoryTransaction: Sendable, Equatable {
    /// The state after it: pass it to ``Coordinator/changes(since:)`` to continue after it.
    public var token: HistoryToken
    /// When it was committed.
    public var date: Date
    /// The ``Context/transactionAuthor`` of the context that saved it, if it had one.
    public var author: String?
    /// Objects it inserted, in the order it wrote them.
    public var inserted: [ObjectID]
    /// Objects it updated, and the names of the properties whose values changed. Empty
    /// names for a transaction written without history (they were not recorded).
    public var updated: [ObjectID: Set<String>]
    /// Objects it deleted.
    public var deleted: [ObjectID]
    /// For deleted objects whose class keeps values on deletion
    /// (``ManagedObject/preservedInHistoryOnDeletion``): those values, by property name,
    /// as the delete found them.
    public var tombstones: [ObjectID: [String: Value]] = [:]
}

/// What changed since a token: the transactions after it, and the current values of the
/// objects they inserted or updated that still exist, all read in one committed state.
public struct HistoryChanges: Sendable {
    /// The transactions after the token, oldest first.
    public var transactions: [HistoryTransaction]
    /// The state these changes bring the consumer to: keep it, and ask again from it.
    public var token: HistoryToken
    /// For each object inserted or updated since the token that exists now: its current
    /// values by property name (attributes as their values, to-one relationships as the
    /// target's `.reference`, to-many ones as `.references`). An object deleted since is
    /// in a transaction's `deleted` and not here.
    public var current: [ObjectID: [String: Value]]
}

extension Coordinator {
    /// The store's identity, fixed at creation (a ``HistoryToken`` names it).
    public var storeID: String { store.storeID }

    /// The token of the newest committed state.
    public var historyToken: HistoryToken { HistoryToken(storeID: store.storeID, sequence: store.lastSequence) }

    /// The transactions after `token` (nil: every one the store holds), oldest first.
    /// A store keeps the history of the transactions in its log, and with
    /// ``StoreOptions/history`` set, what that retention allows across compactions.
    /// Throws `.historyExpired` when transactions after `token` are no longer held (a
    /// consumer that fell behind the retention starts again from a full read; it never
    /// gets a silent gap), `.invalidArgument` for a token of another store or past the
    /// newest state.
    public func history(after token: HistoryToken?) throws -> [HistoryTransaction] {
        try historyWindow(after: token).transactions
    }

    /// What changed since `token`: ``history(after:)`` with the current values of the
    /// objects those transactions inserted or updated, read in the state the history
    /// ends at, and the token of that state.
    public func changes(since token: HistoryToken) throws -> HistoryChanges {
        let generation = store.pinGeneration(by: "changes(since:)")
        let window = try historyWindow(after: token, through: generation.sequence)
        var current: [ObjectID: [String: Value]] = [:]
        for transaction in window.transactions {
            for id in transaction.inserted + Array(transaction.updated.keys) where current[id] == nil {
                guard let entity = entitiesByNumber[id.recordID.entity],
                      let record = try store.get(id.recordID, at: generation) else { continue }
                current[id] = Self.named(record.values, entity: entity)
            }
        }
        return HistoryChanges(transactions: window.transactions, token: HistoryToken(storeID: token.storeID, sequence: generation.sequence),
                              current: current)
    }

    /// The transactions after `token` (nil: from now) as they commit, in this process and,
    /// for a read-only coordinator, in the writing process (which it advances to, every
    /// `interval`, as ``advance()`` does). Ends with `.historyExpired` if the consumer falls
    /// behind what the store holds, and when the task iterating it is cancelled.
    public func transactions(after token: HistoryToken? = nil,
                             every interval: Duration = .milliseconds(50)) -> AsyncThrowingStream<HistoryTransaction, any Error> {
        let last = Protected(token ?? historyToken)
        return Self.polling(every: interval) { [self] in
            if store.options.readOnly { _ = try advance() }
            let after = last.withLock { $0 }
            guard store.lastSequence > after.sequence else { return [] }
            let found = try history(after: after)
            if let newest = found.last { last.withLock { $0 = newest.token } }
            return found
        }
    }

    /// A stream of what `step` finds, called every `interval` on a task of its own until
    /// the task iterating the stream is cancelled or `step` throws (the stream then ends
    /// with the error).
    static func polling<Element: Sendable>(every interval: Duration,
                                           _ step: @escaping @Sendable () throws -> [Element]) -> AsyncThrowingStream<Element, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task.detached {
                do {
                    while !Task.isCancelled {
                        for element in try step() { continuation.yield(element) }
                        try await Task.sleep(for: interval)
                    }
                    continuation.finish()
                } catch is CancellationError {
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The transactions after `token`, up to `through` if given.
    private func historyWindow(after token: HistoryToken?, through last: UInt64? = nil) throws -> (transactions: [HistoryTransaction], end: UInt64) {
        let storeID = store.storeID
        if let token, token.storeID != storeID {
            throw CairnError(.invalidArgument, "the history token is of store \(token.storeID), not of this one (\(storeID))")
        }
        let window = try store.history(after: token?.sequence)
        var transactions: [HistoryTransaction] = []
        for entry in window.entries where last.map({ entry.sequence <= $0 }) ?? true {
            transactions.append(transaction(entry, storeID: storeID))
        }
        return (transactions, last ?? window.end)
    }

    /// A store history entry as the objects' history.
    private func transaction(_ entry: HistoryEntry, storeID: String) -> HistoryTransaction {
        var result = HistoryTransaction(token: HistoryToken(storeID: storeID, sequence: entry.sequence),
                                        date: Date(timeIntervalSince1970: Double(entry.time) / 1000), author: entry.author,
                                        inserted: [], updated: [:], deleted: [])
        for change in entry.changes {
            guard let entity = entitiesByNumber[change.id.entity] else { continue }
            let id = ObjectID(recordID: change.id, entityName: entity.name)
            switch change.kind {
            case .insert: result.inserted.append(id)
            case .update: result.updated[id] = Set((change.slots ?? []).compactMap(entity.propertyName(slot:)))
            case .delete:
                result.deleted.append(id)
                if !change.keptSlots.isEmpty {
                    var kept: [String: Value] = [:]
                    for (slot, value) in zip(change.keptSlots, change.keptValues) {
                        if let name = entity.propertyName(slot: slot) { kept[name] = value }
                    }
                    result.tombstones[id] = kept
                }
            }
        }
        return result
    }

    /// `values` of a record of `entity`, by property name.
    static func named(_ values: [Value], entity: EntityDescription) -> [String: Value] {
        var result: [String: Value] = [:]
        for (slot, value) in values.enumerated() {
            if let name = entity.propertyName(slot: slot) { result[name] = value }
        }
        return result
    }
}

extension Context {
    /// For history: the slots whose values a delete of each of `entities` keeps (its
    /// class's ``ManagedObject/preservedInHistoryOnDeletion``); empty in a store that
    /// keeps no history.
    func keptOnDeletion(of entities: some Sequence<UInt16>) -> [UInt16: [Int]] {
        guard coordinator.store.options.history != nil else { return [:] }
        var kept: [UInt16: [Int]] = [:], seen = Set<UInt16>()
        for number in entities where seen.insert(number).inserted {
            guard let entity = coordinator.entity(number: number), let type = model.objectClass(for: entity.name) else { continue }
            let names = type.preservedInHistoryOnDeletion
            guard !names.isEmpty else { continue }
            kept[number] = (0..<(entity.attributes.count + entity.relationships.count)).filter {
                entity.propertyName(slot: $0).map(names.contains) ?? false
            }
        }
        return kept
    }
}
