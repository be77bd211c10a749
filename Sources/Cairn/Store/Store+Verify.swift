/// Consistency checks over every record: what `cairn verify` reports.
extension Store {
    /// One problem found by ``verify()``.
    public struct Problem: Sendable, Equatable, CustomStringConvertible {
        public var record: RecordID?
        public var message: String
        /// File and offset, when the problem is damaged bytes.
        public var path: String?
        public var offset: Int64?

        public var description: String {
            var text = record.map { "\($0): " } ?? ""
            text += message
            if let path { text += " (\(path)\(offset.map { " at offset \($0)" } ?? ""))" }
            return text
        }
    }

    /// Decodes every record (checking each checksum on the way), and checks values
    /// against the schema, that references point at existing records of the right
    /// entity, that inverse relationships agree, that uniqueness holds, and that the
    /// snapshot's stored attribute indexes list every record in order.
    public func verify() -> [Problem] {
        var problems: [Problem] = []
        let schema = self.schema
        let snapshot = state.withLock { $0.snapshot }
        for block in snapshot.index.attributeIndexes {
            do {
                try snapshot.verifyAttributeIndex(block)
            } catch let error as CairnError {
                problems.append(Problem(record: nil, message: error.message, path: error.path, offset: error.offset))
            } catch {
                problems.append(Problem(record: nil, message: "\(error)"))
            }
        }
        var records: [RecordID: [Value]] = [:]
        for entity in schema.entities {
            do {
                try scanVersioned(entity: entity.number, recheckingFrames: true) { id, _, body in
                    do {
                        let values = try ValueCoding.decode(body)
                        try Self.check(values, of: id, against: schema)
                        records[id] = values
                    } catch let error as CairnError {
                        problems.append(Problem(record: id, message: error.message, path: error.path, offset: error.offset))
                    }
                }
            } catch let error as CairnError {
                problems.append(Problem(record: nil, message: "\(entity.name): \(error.message)", path: error.path, offset: error.offset))
            } catch {
                problems.append(Problem(record: nil, message: "\(entity.name): \(error)"))
            }
        }
        for (id, values) in records.sorted(by: { $0.key < $1.key }) {
            guard let entity = schema.entity(number: id.entity) else { continue }
            for (offset, relationship) in entity.relationships.enumerated() {
                let value = values[entity.attributes.count + offset]
                let targets = value.referencedIDs
                if !relationship.isToMany && !relationship.isOptional && targets.isEmpty {
                    problems.append(Problem(record: id, message: "\(entity.name).\(relationship.name) is required but empty"))
                }
                guard let destination = schema.entity(named: relationship.destination) else { continue }
                for raw in targets {
                    let target = RecordID(rawValue: raw)
                    guard target.entity == destination.number, let targetValues = records[target] else {
                        problems.append(Problem(record: id, message: "\(entity.name).\(relationship.name) points at \(target), which does not exist"))
                        continue
                    }
                    guard let inverseName = relationship.inverse,
                          let inverseIndex = destination.relationships.firstIndex(where: { $0.name == inverseName }) else { continue }
                    let back = targetValues[destination.attributes.count + inverseIndex]
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
        for entity in schema.entities {
            for group in entity.uniqueness {
                let slots = group.compactMap { name in entity.attributes.firstIndex { $0.name == name } }
                var seen: [[Value]: RecordID] = [:]
                for (id, values) in records where id.entity == entity.number {
                    let key = slots.map { values[$0] }
                    if key.contains(where: \.isNull) { continue }
                    if let other = seen[key] {
                        problems.append(Problem(record: id, message: "\(entity.name) (\(group.joined(separator: ", "))) = \(key) is also used by \(other)"))
                    } else {
                        seen[key] = id
                    }
                }
            }
        }
        return problems
    }
}
