/// A reader moving to the writer's newest committed state (FORMAT.md §13): the frames the
/// writer appended since, read and applied as its own commits are; after a compaction,
/// the new files, opened as a reader's open opens them.
extension Store {
    /// One record a transaction a reader took in changed.
    package struct AdvancedChange: Sendable, Equatable {
        package enum Kind: Sendable { case insert, update, delete }
        package var id: RecordID
        package var kind: Kind
        /// For an update, the slots (attributes, then relationships) whose values differ
        /// from the record's before the transaction.
        package var changedSlots: [Int]
    }

    /// A transaction a reader took in, with its changes.
    package struct AdvancedTransaction: Sendable {
        package var sequence: UInt64
        /// When it was committed, in milliseconds since 1970.
        package var time: UInt64
        package var changes: [AdvancedChange]
    }

    /// For a reader: moves to the newest state the writer has committed, and says what
    /// changed. The frames past the reader's end that follow in sequence are checked
    /// (length, sequence, CRC) and applied as the writer's commits are, up to the first
    /// that is not whole yet: one ``AdvancedTransaction`` each. If the manifest names
    /// other files (the writer compacted), they are opened as a reader opens a store, and
    /// the records of the two states are compared: one entry for the whole step, at the
    /// new state's last sequence. The reader's state moves under the store's lock, so a
    /// read sees a committed state, before or after each step. Throws for a writer's
    /// store (it is always at its newest).
    package func advance() throws -> [AdvancedTransaction] {
        guard options.openMode == .readOnly else {
            throw CairnError(.invalidArgument, "store at \(path) is open for writing: it is at its newest state already")
        }
        let manifest = try Self.readManifest(in: path, fileSystem: fileSystem)
        return try log.withLock { slot -> [AdvancedTransaction] in
            guard let writer = slot else { throw closedError() }
            guard manifest.snapshotNumber == writer.manifest.snapshotNumber, manifest.logNumber == writer.manifest.logNumber else {
                let fresh = try Store.open(at: path, options: options)
                let changes = try differences(from: self, to: fresh)
                let (freshWriter, freshState) = (fresh.log.withLock { taken in defer { taken = nil }; return taken },
                                                 fresh.state.withLock { $0 })
                guard let freshWriter else { throw closedError() }
                state.withLock { $0 = freshState }
                writer.file.close()
                slot = freshWriter
                return changes.isEmpty ? [] : [AdvancedTransaction(sequence: freshState.lastSequence,
                                                                    time: freshState.lastCommitMilliseconds ?? 0, changes: changes)]
            }
            return try readAppended(by: writer)
        }
    }

    /// The records that differ between two states of one store, entity by entity in ID
    /// order: inserted, deleted, or updated with the slots that changed.
    private func differences(from old: Store, to new: Store) throws -> [AdvancedChange] {
        var changes: [AdvancedChange] = []
        for entity in new.schema.entities {
            let before = old.ids(entity: entity.number), after = new.ids(entity: entity.number)
            var (i, j) = (0, 0)
            while i < before.count || j < after.count {
                if j == after.count || (i < before.count && before[i] < after[j]) {
                    changes.append(AdvancedChange(id: before[i], kind: .delete, changedSlots: []))
                    i += 1
                } else if i == before.count || after[j] < before[i] {
                    changes.append(AdvancedChange(id: after[j], kind: .insert, changedSlots: []))
                    j += 1
                } else {
                    let id = after[j]
                    // The bodies compared in place (most records are unchanged); only a
                    // changed one is decoded.
                    let same = try old.withBody(of: id) { was in try new.withBody(of: id) { $0.elementsEqual(was) } } ?? nil
                    if same != true, let was = try old.get(id)?.values, let now = try new.get(id)?.values {
                        let slots = now.indices.filter { $0 >= was.count || !Value.same(was[$0], now[$0]) }
                        changes.append(AdvancedChange(id: id, kind: .update, changedSlots: slots))
                    }
                    (i, j) = (i + 1, j + 1)
                }
            }
        }
        return changes
    }

    /// The frames appended to the reader's log past `writer`'s offset, applied one by one.
    private func readAppended(by writer: LogWriter) throws -> [AdvancedTransaction] {
        let size = Int(try writer.file.size())
        guard size >= writer.appendOffset + LogFrame.headerSize else { return [] }
        let current = state.withLock { $0.bodies.covers(size) ? $0.bodies.log : nil }
        let mapping = try current ?? writer.file.map(following: LogBodies.mappingLength(through: size))
        let schema = self.schema
        var taken: [AdvancedTransaction] = []
        try withExtendedLifetime(mapping) {
            let buffer = UnsafeRawBufferPointer(rebasing: mapping.bytes[..<min(size, mapping.bytes.count)])
            let start = Int(bitPattern: buffer.baseAddress)
            var offset = writer.appendOffset
            var expected = state.withLock { $0.lastSequence } + 1
            while case .frame(let sequence, _, let payload, let next) = LogFrame.parse(buffer, at: offset), sequence == expected {
                var puts: [(id: RecordID, body: UnsafeRawBufferPointer?)] = []
                // Room for the operations the payload says it holds (a count the payload could
                // not hold reserves nothing, and the decode below names what is wrong).
                if let count = TransactionCoding.operationCount(in: UnsafeRawBufferPointer(rebasing: buffer[payload])) {
                    puts.reserveCapacity(count)
                }
                var notes: TransactionNotes?
                let timestamp: UInt64
                do {
                    timestamp = try TransactionCoding.decode(UnsafeRawBufferPointer(rebasing: buffer[payload]),
                                                             base: payload.lowerBound, notes: { notes = $0 }) { id, body in
                        try Self.checkLogged(id, sequence: sequence, schema: schema, at: payload.lowerBound)
                        puts.append((id, body))
                    }
                } catch let error as CairnError {
                    throw error.located(in: writer.file.path)
                }
                var changes: [AdvancedChange] = []
                changes.reserveCapacity(puts.count)
                // A frame with notes says what each change did (FORMAT.md §5.1); for one
                // without, which records existed, in one look at the state: only an
                // update's record is read.
                let existed = notes != nil ? [] : state.withLock { state in puts.map { state.contains($0.id) } }
                for (put, change) in zip(puts, notes?.changes ?? []) {
                    switch change {
                    case .insert: changes.append(AdvancedChange(id: put.id, kind: .insert, changedSlots: []))
                    case .update(let slots): changes.append(AdvancedChange(id: put.id, kind: .update, changedSlots: slots))
                    case .delete, .deleteKeeping: changes.append(AdvancedChange(id: put.id, kind: .delete, changedSlots: []))
                    case .absent: break
                    }
                }
                for ((id, body), existed) in zip(puts, existed) {
                    guard let body else {
                        if existed { changes.append(AdvancedChange(id: id, kind: .delete, changedSlots: [])) }
                        continue
                    }
                    guard existed else {
                        changes.append(AdvancedChange(id: id, kind: .insert, changedSlots: []))
                        continue
                    }
                    guard let before = try get(id)?.values else {
                        changes.append(AdvancedChange(id: id, kind: .insert, changedSlots: []))
                        continue
                    }
                    let after = try ValueCoding.decode(body)
                    let slots = after.indices.filter { $0 >= before.count || !Value.same(before[$0], after[$0]) }
                    changes.append(AdvancedChange(id: id, kind: .update, changedSlots: slots))
                }
                state.withLock { state in
                    if current == nil { state.bodies.useLog(mapping) }
                    let entries = puts.map { put in
                        put.body.map { state.bodies.entry(offset: Int(bitPattern: $0.baseAddress) - start, body: $0) } ?? .deleted
                    }
                    state.apply(puts.map(\.id), entries, sequence: sequence, versioned: true)
                    state.lastSequence = sequence
                    state.lastCommitMilliseconds = timestamp
                }
                writer.readerMoved(to: next, lastSequence: sequence)
                taken.append(AdvancedTransaction(sequence: sequence, time: timestamp, changes: changes))
                expected += 1
                offset = next
            }
        }
        return taken
    }
}
