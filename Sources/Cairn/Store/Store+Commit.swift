import Dispatch
import Synchronization

/// A committer waiting in the group-commit queue.
final class CommitTicket: Sendable {
    enum Outcome: Sendable {
        case committed(UInt64)
        case failed(CairnError)
        /// The previous leader handed leadership to this ticket's thread.
        case lead
    }

    let operations: [Operation]
    let durable: Bool
    let semaphore = DispatchSemaphore(value: 0)
    let outcome = Protected<Outcome?>(nil)

    init(operations: [Operation], durable: Bool) {
        self.operations = operations
        self.durable = durable
    }

    func take() -> Outcome? { outcome.withLock { value in defer { value = nil }; return value } }
}

struct CommitQueue {
    var pending: [CommitTicket] = []
    var leading = false
}

extension Store {
    /// Commits `changes` as one transaction: all of them or, if it throws, none.
    ///
    /// Values are checked against the schema first (entity, value count, types).
    /// With `.durable` (the store's default unless given), the transaction is on disk
    /// when this returns. Concurrent callers share one write and one sync.
    ///
    /// - Returns: the transaction's sequence number.
    @discardableResult
    public func commit(_ changes: [Change], durability: Durability? = nil) throws -> UInt64 {
        try checkWritable()
        let schema = self.schema
        var operations: [Operation] = []
        operations.reserveCapacity(changes.count)
        var payloadEstimate = 16
        for change in changes {
            switch change {
            case .put(let id, let values):
                try Self.check(values, of: id, against: schema)
                let body = ValueCoding.encode(values)
                payloadEstimate += 20 + body.count
                operations.append(.put(id, body: body))
            case .delete(let id):
                guard schema.entity(number: id.entity) != nil else {
                    throw CairnError(.invalidArgument, "cannot delete \(id): entity number \(id.entity) is not in the schema")
                }
                payloadEstimate += 9
                operations.append(.delete(id))
            }
        }
        guard payloadEstimate <= FormatLimits.maxFramePayload else {
            throw CairnError(.tooLarge, "transaction of about \(payloadEstimate) bytes exceeds the \(FormatLimits.maxFramePayload)-byte limit; split it")
        }
        return try commit(operations: operations, durable: (durability ?? options.durability) == .durable)
    }

    /// Checks one record's values against its entity.
    static func check(_ values: [Value], of id: RecordID, against schema: Schema) throws {
        guard let entity = schema.entity(number: id.entity) else {
            throw CairnError(.invalidArgument, "cannot put \(id): entity number \(id.entity) is not in the schema")
        }
        guard values.count == entity.valueCount else {
            throw CairnError(.invalidArgument,
                             "\(entity.name) \(id) has \(values.count) values; the schema has \(entity.attributes.count) attributes and \(entity.relationships.count) relationships")
        }
        for (attribute, value) in zip(entity.attributes, values) where !value.isNull && !attribute.type.accepts(value) {
            throw CairnError(.invalidArgument, "\(entity.name).\(attribute.name) of \(id) is a \(attribute.type), not \(value)")
        }
        for (relationship, value) in zip(entity.relationships, values[entity.attributes.count...]) {
            switch (relationship.isToMany, value) {
            case (false, .reference), (false, .null), (true, .references): continue
            default:
                throw CairnError(.invalidArgument,
                                 "\(entity.name).\(relationship.name) of \(id) must be \(relationship.isToMany ? "a list of references" : "a reference or nil"), not \(value)")
            }
        }
    }

    /// Group commit: the first committer to find no leader becomes leader, writes every
    /// waiting transaction with one write and at most one sync, publishes them, and hands
    /// leadership to the next waiter.
    func commit(operations: [Operation], durable: Bool) throws -> UInt64 {
        let ticket = CommitTicket(operations: operations, durable: durable)
        let leads = queue.withLock { queue -> Bool in
            queue.pending.append(ticket)
            if queue.leading { return false }
            queue.leading = true
            return true
        }
        if !leads {
            ticket.semaphore.wait()
            switch ticket.take() {
            case .committed(let sequence)?: return sequence
            case .failed(let error)?: throw error
            case .lead?, nil: break
            }
        }
        leadBatch(own: ticket)
        switch ticket.take() {
        case .committed(let sequence)?: return sequence
        case .failed(let error)?: throw error
        case .lead?, nil: throw CairnError(.io, "internal error: commit finished without an outcome")
        }
    }

    private func leadBatch(own: CommitTicket) {
        let batch = queue.withLock { queue in
            defer { queue.pending = [] }
            return queue.pending
        }
        let outcomes = writeBatch(batch)
        for (ticket, outcome) in zip(batch, outcomes) {
            ticket.outcome.withLock { $0 = outcome }
            if ticket !== own { ticket.semaphore.signal() }
        }
        compactIfNeeded()
        queue.withLock { queue in
            if let next = queue.pending.first {
                next.outcome.withLock { $0 = .lead }
                next.semaphore.signal()
            } else {
                queue.leading = false
            }
        }
    }

    /// Writes a batch as consecutive frames in one buffer, syncs if any is durable, and
    /// publishes them. Returns each ticket's outcome.
    private func writeBatch(_ batch: [CommitTicket]) -> [CommitTicket.Outcome] {
        do {
            try checkWritable()
            return try log.withLock { writer in
                guard let writer else { throw closedError() }
                try checkWritable()
                var sequence = state.withLock { $0.lastSequence }
                let first = sequence + 1
                let now = nowMilliseconds()
                writer.buffer.removeAll()
                for ticket in batch {
                    sequence += 1
                    LogFrame.append(to: &writer.buffer, sequence: sequence, syncedThrough: writer.syncedThrough) {
                        TransactionCoding.encode(ticket.operations, timestamp: now, into: &$0)
                    }
                }
                try poisonOnFailure {
                    try writer.appendBuffer()
                    writer.lastWritten = sequence
                    if batch.contains(where: \.durable) { try writer.sync(through: sequence) }
                }
                state.withLock { state in
                    for ticket in batch {
                        for operation in ticket.operations {
                            switch operation {
                            case .put(let id, let body): state.apply(id, body: body)
                            case .delete(let id): state.apply(id, body: nil)
                            }
                        }
                    }
                    state.lastSequence = sequence
                    state.lastCommitMilliseconds = now
                }
                return (first...sequence).map { .committed($0) }
            }
        } catch {
            let failure = error as? CairnError ?? CairnError(.io, "\(error)")
            return batch.map { _ in .failed(failure) }
        }
    }
}
