import CairnCollections
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

    let operations: [RecordOperation]
    let durable: Bool
    /// The versions the committer expects records to have (optimistic locking).
    let expected: [ExpectedVersion]
    let semaphore = DispatchSemaphore(value: 0)
    let outcome = Protected<Outcome?>(nil)
    /// Set before the ticket is queued, read by the leader after (the queue's lock orders them).
    nonisolated(unsafe) var checksUniqueness = true
    /// The sequence number at which the committer checked its unique values, if it did.
    nonisolated(unsafe) var uniquenessCheckedAt: UInt64?
    /// Who made the transaction, for history (``TransactionNotes/author``).
    nonisolated(unsafe) var author: String?
    /// The slots each operation's committer changed, where it knows them (see ``Store/notes(for:author:slots:kept:batch:later:)``).
    nonisolated(unsafe) var changedSlots: [UInt64?]?
    /// The slots a delete keeps, by entity (see ``Store/notes(for:author:slots:kept:batch:later:)``).
    nonisolated(unsafe) var keptOnDeletion: [UInt16: [Int]] = [:]
    /// The transaction's notes for history, made by the leader as it writes the frame
    /// (in a store that keeps history), read by it alone after.
    nonisolated(unsafe) var notes: TransactionNotes? {
        didSet { notesLength = notes?.encodedSize ?? 0 }
    }
    nonisolated(unsafe) private var notesLength = 0

    /// The size of the transaction's operations (``TransactionCoding/encodedSize(_:)``),
    /// computed once for the size limit, the batch's buffer and a streamed frame.
    let operationsLength: Int
    /// The exact size of the payload: the operations and the notes, once made.
    var payloadLength: Int { operationsLength + notesLength }

    init(operations: [RecordOperation], durable: Bool, expected: [ExpectedVersion]) {
        self.operations = operations
        self.durable = durable
        self.expected = expected
        operationsLength = TransactionCoding.encodedSize(operations)
    }

    func take() -> Outcome? { outcome.withLock { value in defer { value = nil }; return value } }
}

/// A version a committer expects a record to still have (see ``Store/version(of:)``).
package struct ExpectedVersion: Sendable {
    package var id: RecordID
    package var version: UInt64

    package init(id: RecordID, version: UInt64) { (self.id, self.version) = (id, version) }
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
    ///
    /// - Parameter expected: optimistic locking: record ID → the version (see
    ///   ``version(of:)``) each must still have. If any differs when the transaction's
    ///   turn comes, nothing is written and `.conflict` is thrown naming the records.
    @discardableResult
    package func commit(_ changes: [Change], expecting expected: [RecordID: UInt64] = [:],
                       durability: Durability? = nil) throws -> UInt64 {
        try commit(changes, expecting: expected.map { ExpectedVersion(id: $0.key, version: $0.value) }, durability: durability)
    }

    /// ``commit(_:expecting:durability:)`` with the expected versions as a list (one
    /// entry per record).
    package func commit(_ changes: [Change], expecting expected: [ExpectedVersion], durability: Durability?) throws -> UInt64 {
        try checkCommit(count: changes.count)  // before any record is checked and encoded
        var preparer = Preparer(schema: schema)
        var operations: [RecordOperation] = []
        operations.reserveCapacity(changes.count)
        for change in changes {
            switch change {
            case .put(let id, let values): operations.append(try preparer.put(id, values))
            case .delete(let id): operations.append(try preparer.delete(id))
            }
        }
        return try commit(prepared: operations, for: preparer.schema, expecting: expected, durability: durability)
    }

    /// Commits operations that a ``Preparer`` of `schema` made (a context's save prepares
    /// each record in the pass that reads its values anyway, while they are in cache), as
    /// one transaction. Refused if `schema` is not the store's: the records were checked
    /// against it.
    ///
    /// - Parameter uniquenessCheckedAt: the last sequence number when the caller checked
    ///   the transaction's unique values against the store (a context's save does): if no
    ///   transaction has committed since, the commit need not check them again.
    package func commit(prepared operations: [RecordOperation], for schema: Schema, expecting expected: [ExpectedVersion],
                durability: Durability?, uniquenessCheckedAt: UInt64? = nil, author: String? = nil,
                changedSlots: [UInt64?]? = nil, keptOnDeletion: [UInt16: [Int]] = [:]) throws -> UInt64 {
        try checkCommit(count: operations.count)
        let current = self.schema
        // The same entity list in memory is the same schema (the usual case: the coordinator's
        // copy of the store's); only otherwise are the two compared.
        let shared = schema.entities.withUnsafeBufferPointer { a in
            current.entities.withUnsafeBufferPointer { b in a.baseAddress == b.baseAddress && a.count == b.count }
        }
        guard shared || schema == current else {
            throw CairnError(.schemaMismatch, "the store's schema changed after the records of this transaction were checked; save again")
        }
        return try commit(operations: operations, durable: (durability ?? options.durability) == .durable,
                          expected: expected, uniquenessCheckedAt: uniquenessCheckedAt, author: author, changedSlots: changedSlots,
                          keptOnDeletion: keptOnDeletion)
    }

    /// Throws unless the store takes writes and a transaction of `count` changes.
    package func checkCommit(count: Int) throws {
        try checkWritable()
        guard count <= FormatLimits.maxOperations else {
            throw CairnError(.tooLarge, "transaction of \(count) changes exceeds the \(FormatLimits.maxOperations)-change limit; split it")
        }
    }

    /// Turns changes into the operations a transaction writes: each record's values checked
    /// against its entity (entity, value count, types, reference kinds) and the size limits,
    /// then encoded. Every write to the store goes through one.
    package struct Preparer {
        package let schema: Schema
        /// Made on the first record (a child context's save makes a preparer it never uses).
        private var encoder: RecordEncoder?
        // Changes come in runs of one entity: each run's entity is looked up once.
        private var lastEntity: EntityDescription?
        /// The destination entity numbers of the last entity whose references were checked.
        private var destinations: (entity: UInt16, numbers: [UInt16])?

        package init(schema: Schema) { self.schema = schema }

        /// The entity of `id`, looked up once for each run of one entity's records and kept
        /// as `lastEntity`, where the kept put reads it in place.
        @discardableResult
        private mutating func entity(of id: RecordID) throws -> EntityDescription {
            if let last = lastEntity, last.number == id.entity { return last }
            guard let found = schema.entity(number: id.entity) else {
                throw CairnError(.invalidArgument, "cannot put \(id): entity number \(id.entity) is not in the schema")
            }
            lastEntity = found
            return found
        }

        package mutating func put(_ id: RecordID, _ values: [Value]) throws -> RecordOperation {
            let entity = try entity(of: id)
            // Only values of a kind with a size limit are measured, and references checked
            // only where there are some.
            let kinds = try Store.check(values, of: id, entity: entity)
            if kinds & Value.limitedKinds != 0 {
                for value in values { try value.checkLimits("a value of \(id)") }
            }
            if kinds & Value.referenceKinds != 0 { try checkReferences(values, of: id, entity: entity) }
            return .put(id, body: try recordEncoder().encode(values, of: "\(entity.name) \(id)"))
        }

        /// The encoder, made on the first record.
        private mutating func recordEncoder() -> RecordEncoder {
            if let encoder { return encoder }
            let made = RecordEncoder()
            encoder = made
            return made
        }

        /// ``put(_:_:)`` of the record `kept` holds (checked when kept, of `id`'s entity)
        /// with `written` values, in slot order, over the slots of `mask`: only the
        /// written values are checked, and the record's others copied as encoded. Written
        /// values of a kind with a size limit or that names records, or a record of
        /// another count, are checked and encoded whole instead, from `values()`.
        package mutating func put(_ id: RecordID, kept: KeptValues, written: [Value], mask: UInt64,
                                  values: () -> [Value]) throws -> RecordOperation {
            try entity(of: id)
            // (The kinds read in place, in the entity this preparer holds: a copy of the
            // entity and of its kinds retained and released two shared objects per record.)
            let plain = lastEntity?.kinds.stored.withUnsafeBufferPointer { kinds in
                // (Every written slot one of the record's: a mask past them is encoded whole.)
                var plain = kept.count == kinds.count && kept.count <= 64 && written.count == mask.nonzeroBitCount
                    && (kept.count == 64 || mask >> UInt64(kept.count) == 0)
                var rest = mask, index = 0
                while plain, rest != 0 {
                    let slot = rest.trailingZeroBitCount
                    let kind = written[index].kindBit
                    plain = kind & kinds[slot] != 0 && kind & (Value.limitedKinds | Value.referenceKinds) == 0
                    rest &= rest &- 1
                    index += 1
                }
                return plain
            } ?? false
            guard plain, let body = recordEncoder().encode(kept, written: written, mask: mask) else { return try put(id, values()) }
            return .put(id, body: body)
        }

        /// Each reference names a record of its relationship's destination entity, with a
        /// serial that is not 0 (FORMAT.md §2.3): a reference no record could ever have.
        private mutating func checkReferences(_ values: [Value], of id: RecordID, entity: EntityDescription) throws {
            if destinations?.entity != entity.number {
                destinations = (entity.number, entity.relationships.map { schema.entity(named: $0.destination)?.number ?? 0 })
            }
            let numbers = destinations?.numbers ?? []
            for (offset, relationship) in entity.relationships.enumerated() {
                let raws: [UInt64]
                switch values[entity.attributes.count + offset] {
                case .reference(let raw): raws = [raw]
                case .references(let list): raws = list
                default: continue
                }
                for raw in raws {
                    let target = RecordID(rawValue: raw)
                    guard target.entity == numbers[offset], target.serial != 0 else {
                        throw CairnError(.invalidArgument,
                                         "\(entity.name).\(relationship.name) of \(id) points at \(target), which is not a record ID of \(relationship.destination)")
                    }
                }
            }
        }

        package func delete(_ id: RecordID) throws -> RecordOperation {
            guard schema.entity(number: id.entity) != nil else {
                throw CairnError(.invalidArgument, "cannot delete \(id): entity number \(id.entity) is not in the schema")
            }
            return .delete(id)
        }
    }

    /// Checks one record's values against its entity.
    package static func check(_ values: [Value], of id: RecordID, against schema: Schema) throws {
        guard let entity = schema.entity(number: id.entity) else {
            throw CairnError(.invalidArgument, "cannot put \(id): entity number \(id.entity) is not in the schema")
        }
        try check(values, of: id, entity: entity)
    }

    /// Returns the union of the values' ``Value/kindBit``s.
    @discardableResult
    package static func check(_ values: [Value], of id: RecordID, entity: EntityDescription) throws -> UInt32 {
        // Kinds compared as bits, values and kinds borrowed in place: nothing is copied (nor
        // retained: every record of the entity shares its kinds).
        var seen: UInt32 = 0
        let mismatch = values.withUnsafeBufferPointer { buffer -> Int? in
            entity.kinds.stored.withUnsafeBufferPointer { kinds in
                guard buffer.count == kinds.count else { return -1 }
                for index in buffer.indices {
                    let kind = buffer[index].kindBit
                    if kind & kinds[index] == 0 { return index }
                    seen |= kind
                }
                return nil
            }
        }
        guard let index = mismatch else { return seen }
        guard index >= 0 else {
            throw CairnError(.invalidArgument,
                             "\(entity.name) \(id) has \(values.count) values; the schema has \(entity.attributes.count) attributes and \(entity.relationships.count) relationships")
        }
        let attributes = entity.attributes
        if index < attributes.count {
            throw CairnError(.invalidArgument, "\(entity.name).\(attributes[index].name) of \(id) is a \(attributes[index].type), not \(values[index])")
        }
        let relationship = entity.relationships[index - attributes.count]
        throw CairnError(.invalidArgument,
                         "\(entity.name).\(relationship.name) of \(id) must be \(relationship.isToMany ? "a list of references" : "a reference or nil"), not \(values[index])")
    }

    /// Decodes a stored record body and checks it has the shape its entity declares (value
    /// count, attribute types, reference kinds), so a file whose checksums hold but whose
    /// records do not fit the schema gives `.corrupt` rather than a trap in the layers above.
    package static func decodeRecord(_ record: borrowing StoredRecord, id: RecordID, entity: EntityDescription?) throws -> [Value] {
        try decodeRecord(record.bytes, id: id, entity: entity)
    }

    /// ``decodeRecord(_:id:entity:)`` of a body in memory.
    static func decodeRecord(_ body: UnsafeRawBufferPointer, id: RecordID, entity: EntityDescription?) throws -> [Value] {
        let values = try ValueCoding.decode(body)
        try checkRecord(values, id: id, entity: entity)
        return values
    }

    /// The check of ``decodeRecord(_:id:entity:)`` for values decoded already.
    package static func checkRecord(_ values: [Value], id: RecordID, entity: EntityDescription?) throws {
        guard let entity else { throw CairnError.corrupt("stored record \(id) belongs to no entity of the schema") }
        do { try check(values, of: id, entity: entity) } catch let error as CairnError {
            throw CairnError.corrupt("stored record does not fit the schema: \(error.message)")
        }
    }

    /// Group commit: the first committer to find no leader becomes leader, writes every
    /// waiting transaction with one write and at most one sync, publishes them, and hands
    /// leadership to the next waiter.
    ///
    /// - Parameter checkingUniqueness: false only for tests that must write what a file
    ///   could hold but no writer writes (``Store+Uniqueness``).
    package func commit(operations: [RecordOperation], durable: Bool, expected: [ExpectedVersion] = [],
                checkingUniqueness: Bool = true, uniquenessCheckedAt: UInt64? = nil, author: String? = nil,
                changedSlots: [UInt64?]? = nil, keptOnDeletion: [UInt16: [Int]] = [:]) throws -> UInt64 {
        let ticket = CommitTicket(operations: operations, durable: durable, expected: expected)
        ticket.checksUniqueness = checkingUniqueness
        ticket.uniquenessCheckedAt = uniquenessCheckedAt
        ticket.author = author
        ticket.changedSlots = changedSlots
        ticket.keptOnDeletion = keptOnDeletion
        guard ticket.payloadLength <= FormatLimits.maxFramePayload else {
            throw CairnError(.tooLarge, "transaction of \(ticket.payloadLength) bytes exceeds the \(FormatLimits.maxFramePayload)-byte limit; split it")
        }
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
        checkpointIfDue()
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
    /// publishes them. Tickets whose expected versions no longer hold are left out and
    /// fail with `.conflict`. Returns each ticket's outcome.
    private func writeBatch(_ batch: [CommitTicket]) -> [CommitTicket.Outcome] {
        var outcomes = [CommitTicket.Outcome?](repeating: nil, count: batch.count)
        do {
            try checkWritable()
            try log.withLock { writer in
                guard let writer else { throw closedError() }
                try checkWritable()
                // Versions change only under the log lock, which this thread holds, so the
                // store's are read in place; `batchVersions` holds what earlier tickets of
                // this batch will change (copying the store's table would make every commit O(records)).
                // (Frames built below record the recovered ones as synced-through.)
                try poisonOnFailure(discarding: writer) { try writer.syncRecovered() }
                var sequence = state.withLock { $0.lastSequence }
                var batchVersions: [UInt64: UInt64] = [:]
                // Unique values are decided here, where commits are serialised (see Store+Uniqueness.swift).
                let uniqueness = Self.uniquenessSlots(state.withLock { $0.snapshot.schema })
                var claims = BatchClaims()
                let now = nowMilliseconds()
                var accepted: [(ticket: CommitTicket, sequence: UInt64)] = []
                var assigned = [UInt64?](repeating: nil, count: batch.count)
                // What the batch's accepted transactions wrote, for the next one's notes.
                let keepsHistory = options.history != nil && writer.version >= 5
                var batchRecords = BatchRecords()
                writer.buffer.removeAll()
                // A large batch is written frame by frame in pieces; any other through one
                // buffer with room for every frame at once (grown by doubling, it would copy
                // a large transaction's bytes several times over, into new pages).
                let size = batch.reduce(0) { $0 + LogFrame.frameSize(payloadLength: $1.payloadLength) }
                let streamed = size > options.streamedFramesMinimum
                if !streamed { writer.buffer.reserve(size) }
                // A buffer grown for a large transaction is not kept for the next ones.
                defer { if writer.buffer.capacity > LogWriter.keptBufferCapacity { writer.buffer = ByteWriter() } }
                for (index, ticket) in batch.enumerated() {
                    let stale: [RecordID] = ticket.expected.isEmpty ? [] : state.withLock { state in
                        var stale: [RecordID] = []
                        for expected in ticket.expected {
                            let current = batchVersions.isEmpty ? state.version(of: expected.id)
                                : batchVersions[expected.id.rawValue] ?? state.version(of: expected.id)
                            if current != expected.version { stale.append(expected.id) }
                        }
                        return stale.sorted()
                    }
                    if !stale.isEmpty {
                        outcomes[index] = .failed(CairnError(.conflict,
                            "records changed since they were read: \(stale.map(\.description).joined(separator: ", "))"))
                        continue
                    }
                    // Checked by the committer against this very state (nothing committed
                    // since, before it or in this batch), and with no later ticket in the
                    // batch to claim against it, it is not checked again.
                    let last = index == batch.count - 1
                    let current = ticket.uniquenessCheckedAt == sequence && last
                    if !uniqueness.isEmpty, ticket.checksUniqueness, !current,
                       let conflict = try uniquenessConflict(ticket.operations, groups: uniqueness, batch: &claims, later: !last) {
                        outcomes[index] = .failed(conflict)
                        continue
                    }
                    guard sequence < FormatLimits.maxSequence else {
                        outcomes[index] = .failed(CairnError(.invalidArgument,
                            "store at \(path) has used every transaction sequence number (\(FormatLimits.maxSequence))"))
                        continue
                    }
                    if keepsHistory {
                        ticket.notes = try notes(for: ticket.operations, author: ticket.author, slots: ticket.changedSlots,
                                                 kept: ticket.keptOnDeletion, batch: &batchRecords, later: !last)
                        guard ticket.payloadLength <= FormatLimits.maxFramePayload else {
                            outcomes[index] = .failed(CairnError(.tooLarge,
                                "transaction of \(ticket.payloadLength) bytes with its history exceeds the \(FormatLimits.maxFramePayload)-byte limit; split it"))
                            // (Its notes went into the batch's records: the rest of the batch is refused too.)
                            throw CairnError(.tooLarge, "a transaction of the batch exceeds the frame size limit with its history")
                        }
                    }
                    sequence += 1
                    if index < batch.count - 1 {
                        for operation in ticket.operations { batchVersions[operation.id.rawValue] = sequence }
                    }
                    accepted.append((ticket, sequence))
                    assigned[index] = sequence
                    if !streamed {
                        LogFrame.append(to: &writer.buffer, sequence: sequence, syncedThrough: writer.syncedThrough) {
                            TransactionCoding.encode(ticket.operations, timestamp: now, notes: ticket.notes, into: &$0)
                        }
                    }
                }
                guard !accepted.isEmpty else { return }
                // Each frame's payload, where the overlay will find its bodies: the frames
                // go one after another from the log's end.
                var payloads: [Int] = []
                var frameStart = writer.appendOffset
                for (ticket, _) in accepted {
                    payloads.append(frameStart + LogFrame.headerSize)
                    frameStart += LogFrame.frameSize(payloadLength: ticket.payloadLength)
                }
                // Mapped through the new frames' end before they are written: a mapping
                // that fails leaves nothing written.
                let remapped = try state.withLock({ $0.bodies.covers(frameStart) }) ? nil
                    : writer.file.map(following: LogBodies.mappingLength(through: frameStart))
                // Each frame's stored checksum, which the log's frame groups record.
                var checksums: [UInt32] = []
                checksums.reserveCapacity(accepted.count)
                try poisonOnFailure(discarding: writer) {
                    if streamed {
                        let piece = max(1, options.framePieceBytes)
                        for (ticket, sequence) in accepted {
                            checksums.append(try writer.appendFrame(sequence: sequence, payloadLength: ticket.payloadLength,
                                                                    piece: piece) { payload, handOn in
                                try TransactionCoding.encode(ticket.operations, timestamp: now, notes: ticket.notes, into: &payload,
                                                             handingOnPast: piece, handOn)
                            })
                        }
                    } else {
                        let start = writer.appendOffset
                        writer.buffer.bytes.withUnsafeBytes { buffer in
                            for payload in payloads {
                                checksums.append(FrameGroups.storedChecksum(buffer, at: payload - LogFrame.headerSize - start))
                            }
                        }
                        try writer.appendBuffer()
                    }
                    writer.lastWritten = sequence
                    if accepted.contains(where: \.ticket.durable) { try writer.sync(through: sequence) }
                }
                state.withLock { state in
                    if let remapped { state.bodies.useLog(remapped) }
                    for (index, ((ticket, sequence), payload)) in zip(accepted, payloads).enumerated() {
                        state.apply(ticket.operations, sequence: sequence, payloadAt: payload)
                        state.frameGroups.note(frameAt: payload - LogFrame.headerSize, size: LogFrame.frameSize(payloadLength: ticket.payloadLength),
                                               stored: checksums[index], groupBytes: options.frameGroupBytes)
                    }
                    state.lastSequence = sequence
                    state.lastCommitMilliseconds = now
                }
                for (index, sequence) in assigned.enumerated() {
                    if let sequence { outcomes[index] = .committed(sequence) }
                }
            }
        } catch {
            let failure = error as? CairnError ?? CairnError(.io, "\(error)")
            return outcomes.map { $0 ?? .failed(failure) }
        }
        return outcomes.map { $0 ?? .failed(CairnError(.io, "internal error: no outcome")) }
    }
}
