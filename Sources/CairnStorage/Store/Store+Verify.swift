/// One problem a verification found (``Container/verify()``, `cairn verify`).
public struct StoreProblem: Sendable, Equatable, CustomStringConvertible {
    /// The record the problem is in, when it is in one.
    public var record: RecordID?
    /// What is wrong, in words.
    public var message: String
    /// The file, when the problem is damaged bytes.
    public var path: String?
    /// Where in ``path`` the damaged bytes start.
    public var offset: Int64?

    package init(record: RecordID? = nil, message: String, path: String? = nil, offset: Int64? = nil) {
        (self.record, self.message, self.path, self.offset) = (record, message, path, offset)
    }

    /// The record, the message, and the file and offset when there are any.
    public var description: String {
        var text = record.map { "\($0): " } ?? ""
        text += message
        if let path { text += " (\(path)\(offset.map { " at offset \($0)" } ?? ""))" }
        return text
    }
}

/// Consistency checks over every record: what `cairn verify` reports.
extension Store {
    package typealias Problem = StoreProblem

    /// Decodes every record (checking each checksum on the way), and checks values
    /// against the schema, that references point at existing records of the right
    /// entity, that inverse relationships agree, that uniqueness holds, and that the
    /// snapshot's stored attribute indexes list every record in order.
    ///
    /// Problems come in that order: damaged index blocks, records that do not decode or
    /// fit the schema, references (in record ID order), uniqueness. Records are checked
    /// as each scan hands them over; only what the later checks need is kept: the IDs of
    /// entities some relationship points at, the relationship values of entities that
    /// have relationships, and one key per record of a uniqueness group. (Keeping every
    /// record's values would take memory in proportion to the whole store.)
    package func verify() -> [Problem] {
        var problems: [Problem] = []
        let schema = self.schema
        let (snapshot, nextSerial) = state.withLock { ($0.snapshot, $0.nextSerial) }
        // A footer that claims too low a next serial would have new records take the IDs
        // of existing ones; the store does not trust it (it hands out from past the
        // highest serial it holds), but the file is wrong.
        if let highest = snapshot.highestID, snapshot.footer.nextSerial <= highest.serial {
            problems.append(Problem(record: nil,
                                    message: "snapshot footer claims next serial \(snapshot.footer.nextSerial), but the snapshot holds \(highest); new records take serials from \(nextSerial)",
                                    path: snapshot.path, offset: Int64(snapshot.fileSize - SnapshotFooter.size + 40)))
        }
        for block in snapshot.index.attributeIndexes {
            do {
                try snapshot.verifyAttributeIndex(block)
            } catch let error as CairnError {
                problems.append(Problem(record: nil, message: error.message, path: error.path, offset: error.offset))
            } catch {
                problems.append(Problem(record: nil, message: "\(error)"))
            }
        }
        // History (FORMAT.md §14): the kept file and the log's notes, read whole and checked.
        do { _ = try history(after: nil) } catch let error as CairnError {
            problems.append(Problem(record: nil, message: "history: \(error.message)", path: error.path, offset: error.offset))
        } catch {
            problems.append(Problem(record: nil, message: "history: \(error)"))
        }
        let destinations = Set(schema.entities.flatMap { $0.relationships.compactMap { schema.entity(named: $0.destination)?.number } })
        var kept: [UInt16: KeptRecords] = [:]
        var uniquenessProblems: [Problem] = []
        for entity in schema.entities {
            var records = KeptRecords()
            let keepsIDs = destinations.contains(entity.number)
            let relationSlots = entity.attributes.count..<(entity.attributes.count + entity.relationships.count)
            let groups = entity.uniqueness.map { group in
                (names: group, slots: group.compactMap { name in entity.attributes.firstIndex { $0.name == name } })
            }
            var seen = [[[Value]: RecordID]](repeating: [:], count: groups.count)
            do {
                try scanVersioned(entity: entity.number, recheckingFrames: true) { id, _, record in
                    let values: [Value]
                    do {
                        values = try record.values()
                        try Self.check(values, of: id, against: schema)
                    } catch let error as CairnError {
                        // A body from the log is reported by ``verifyLogBodies()``, with every
                        // other body there, at its offset (locating it here read the log again).
                        guard let start = snapshot.offset(of: record.bytes) else { return }
                        let located = error.path == nil ? error.located(in: snapshot.path, base: Int64(start)) : error
                        problems.append(Problem(record: id, message: error.message, path: located.path,
                                                offset: located.offset ?? Int64(start)))
                        return
                    }
                    if keepsIDs || !relationSlots.isEmpty { records.ids.append(id.rawValue) }
                    if !relationSlots.isEmpty { records.relations.append(Array(values[relationSlots])) }
                    for (index, group) in groups.enumerated() {
                        let key = group.slots.map { values[$0] }
                        // (nil never collides, as in SQL; a NaN equals nothing, as in a save's check)
                        if key.contains(where: { $0.isNull || ValueOrder.isNaN($0) }) { continue }
                        if let other = seen[index][key] {
                            uniquenessProblems.append(Problem(record: id, message: "\(entity.name) (\(group.names.joined(separator: ", "))) = \(key) is also used by \(other)"))
                        } else {
                            seen[index][key] = id
                        }
                    }
                }
            } catch let error as CairnError {
                problems.append(Problem(record: nil, message: "\(entity.name): \(error.message)", path: error.path, offset: error.offset))
            } catch {
                problems.append(Problem(record: nil, message: "\(entity.name): \(error)"))
            }
            kept[entity.number] = records
        }
        // References, in record ID order: entities by number, each one's records in ID order.
        for entity in schema.entities.sorted(by: { $0.number < $1.number }) where !entity.relationships.isEmpty {
            guard let records = kept[entity.number] else { continue }
            for (row, raw) in records.ids.enumerated() {
                let id = RecordID(rawValue: raw)
                for (offset, relationship) in entity.relationships.enumerated() {
                    let targets = records.relations[row][offset].referencedIDs
                    if !relationship.isToMany && !relationship.isOptional && targets.isEmpty {
                        problems.append(Problem(record: id, message: "\(entity.name).\(relationship.name) is required but empty"))
                    }
                    guard let destination = schema.entity(named: relationship.destination) else { continue }
                    for raw in targets {
                        let target = RecordID(rawValue: raw)
                        guard target.entity == destination.number, let targetRow = kept[destination.number]?.row(of: raw) else {
                            problems.append(Problem(record: id, message: "\(entity.name).\(relationship.name) points at \(target), which does not exist"))
                            continue
                        }
                        guard let inverseName = relationship.inverse,
                              let inverseIndex = destination.relationships.firstIndex(where: { $0.name == inverseName }),
                              let back = kept[destination.number].flatMap({ targetRow < $0.relations.count ? $0.relations[targetRow][inverseIndex] : nil })
                        else { continue }
                        let agrees: Bool
                        switch back {
                        case .reference(let raw): agrees = raw == id.rawValue
                        case .references(let raws): agrees = raws.contains(id.rawValue)
                        default: agrees = false
                        }
                        if !agrees {
                            problems.append(Problem(record: id, message: "\(entity.name).\(relationship.name) points at \(target), but its \(inverseName) does not point back"))
                        }
                    }
                }
            }
        }
        return problems + uniquenessProblems + verifyLogBodies() + verifyCheckpoint()
    }

    /// Decodes and checks against the schema every record body in the log, those that
    /// later transactions replaced or deleted too (the scans above read only the latest).
    /// Problems name the log and the body's offset in it.
    package func verifyLogBodies() -> [Problem] {
        let schema = self.schema
        var problems: [Problem] = []
        let logPath = logPath(log.withLock { $0?.manifest.logNumber } ?? 0)
        do {
            try forEachLogTransaction { sequence, payload, base, file in
                _ = try TransactionCoding.decode(payload, base: base) { id, body in
                    guard let body else { return }
                    let offset = Int(bitPattern: body.baseAddress) - Int(bitPattern: file.baseAddress)
                    do {
                        try Self.check(try ValueCoding.decode(body, base: offset), of: id, against: schema)
                    } catch let error as CairnError {
                        problems.append(Problem(record: id, message: "in transaction \(sequence): \(error.message)",
                                                path: logPath, offset: error.offset ?? Int64(offset)))
                    }
                }
            }
        } catch let error as CairnError {
            problems.append(Problem(record: nil, message: error.message, path: error.path ?? logPath, offset: error.offset))
        } catch {
            problems.append(Problem(record: nil, message: "\(error)", path: logPath))
        }
        return problems
    }
}

/// What ``Store/verify()`` keeps of an entity's sound records for its reference checks:
/// their IDs in order (if a relationship points at the entity, or it has relationships),
/// and the values of their relationships (if it has any), row by row.
private struct KeptRecords {
    var ids: [UInt64] = []
    var relations: [[Value]] = []

    /// The row of a kept ID (a binary search: scans hand records over in ID order).
    func row(of raw: UInt64) -> Int? {
        var low = 0, high = ids.count
        while low < high {
            let middle = (low + high) / 2
            if ids[middle] < raw { low = middle + 1 } else { high = middle }
        }
        return low < ids.count && ids[low] == raw ? low : nil
    }
}

extension Store {
    /// The attribute indexes the open snapshot stores (for the fuzz target that looks up
    /// through each).
    package var snapshotAttributeIndexes: [SnapshotIndex.AttributeIndex] {
        state.withLock { $0.snapshot.index.attributeIndexes }
    }
}
