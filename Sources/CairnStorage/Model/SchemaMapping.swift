import CairnCollections
/// How records of one schema become records of another, inferred with no code
/// (lightweight migration): entities, attributes and relationships are matched by name
/// or by the new side's renaming identifier; entity numbers (and so record IDs) are kept.
package struct SchemaMapping {
    package enum Source {
        /// The old value at `slot`, converted to `type` if the type widened.
        case copy(slot: Int, widenTo: AttributeType?)
        /// A value for a property the old schema lacks.
        case fill(Value)
    }

    package struct EntityMap {
        package var old: EntityDescription
        package var new: EntityDescription
        /// One source per new attribute, then one per new relationship.
        package var sources: [Source]
        /// Whether records come out exactly as they went in.
        package var isIdentity: Bool
    }

    package let old: Schema
    /// The new schema with entity numbers aligned to the old one.
    package let new: Schema
    /// Old entity number → map; entities without one are dropped.
    package let entities: [UInt16: EntityMap]
    /// A line per change, for forecasts.
    package let changes: [String]
    /// Old (entity number, slot) → new (entity number, slot), for every old value slot the
    /// mapping carries over; a slot absent here is dropped with its values.
    package let carried: [SlotKey: SlotKey]

    package struct SlotKey: Hashable {
        package let entity: UInt16
        package let slot: Int
    }

    /// Gives `schema`'s entities the numbers their matches in `stored` have (by name or
    /// renaming identifier); new entities get numbers above every stored one.
    package static func align(_ schema: Schema, with stored: Schema) -> Schema {
        var result = schema
        // Cairn's own entities stay as they are, whether the model names them or not.
        for entity in stored.entities where Schema.internalEntityNames.contains(entity.name) && schema.entity(named: entity.name) == nil {
            result.entities.append(entity)
        }
        var next = (stored.entities.map(\.number).max() ?? 0) + 1
        for index in result.entities.indices {
            let entity = result.entities[index]
            if let match = stored.entity(named: entity.name) ?? entity.renamingIdentifier.flatMap(stored.entity(named:)) {
                result.entities[index].number = match.number
            } else {
                result.entities[index].number = next
                next += 1
            }
        }
        return result
    }

    package static func widens(_ from: AttributeType, to: AttributeType) -> Bool {
        let integers: [AttributeType] = [.int8, .int16, .int32, .int64]
        if let a = integers.firstIndex(of: from), let b = integers.firstIndex(of: to) { return a <= b }
        if from == .float && to == .double { return true }
        if integers.contains(from) && to == .double { return true }
        return false
    }

    package init(from old: Schema, to requested: Schema) throws {
        self.old = old
        let new = Self.align(requested, with: old)
        self.new = new
        var maps: [UInt16: EntityMap] = [:]
        var changes: [String] = []
        func fail(_ message: String) -> CairnError {
            CairnError(.schemaMismatch, "cannot migrate without a custom step: \(message)")
        }
        for entity in new.entities {
            guard let source = old.entity(number: entity.number),
                  source.name == entity.name || source.name == entity.renamingIdentifier else {
                changes.append("add entity \(entity.name)")
                continue
            }
            if source.name != entity.name { changes.append("rename entity \(source.name) to \(entity.name)") }
            var sources: [Source] = []
            for attribute in entity.attributes {
                let match = source.attributes.firstIndex { $0.name == attribute.name }
                    ?? attribute.renamingIdentifier.flatMap { name in source.attributes.firstIndex { $0.name == name } }
                guard let slot = match else {
                    if let value = attribute.defaultValue {
                        sources.append(.fill(value))
                        changes.append("add \(entity.name).\(attribute.name) (default \(value))")
                    } else if attribute.isOptional {
                        sources.append(.fill(.null))
                        changes.append("add optional \(entity.name).\(attribute.name)")
                    } else {
                        throw fail("new required attribute \(entity.name).\(attribute.name) has no default")
                    }
                    continue
                }
                let before = source.attributes[slot]
                if before.name != attribute.name { changes.append("rename \(entity.name).\(before.name) to \(attribute.name)") }
                var widen: AttributeType?
                if before.type != attribute.type {
                    guard Self.widens(before.type, to: attribute.type) else {
                        throw fail("\(entity.name).\(attribute.name) changes from \(before.type) to \(attribute.type), which is not a widening")
                    }
                    widen = attribute.type
                    changes.append("widen \(entity.name).\(attribute.name) from \(before.type) to \(attribute.type)")
                }
                if before.isOptional && !attribute.isOptional {
                    changes.append("make \(entity.name).\(attribute.name) required" + (attribute.defaultValue.map { " (nil becomes \($0))" } ?? ""))
                } else if !before.isOptional && attribute.isOptional {
                    changes.append("make \(entity.name).\(attribute.name) optional")
                }
                if before.isIndexed != attribute.isIndexed {
                    changes.append("\(attribute.isIndexed ? "add" : "remove") index on \(entity.name).\(attribute.name)")
                }
                sources.append(.copy(slot: slot, widenTo: widen))
            }
            for attribute in source.attributes where !entity.attributes.contains(where: { $0.name == attribute.name || $0.renamingIdentifier == attribute.name }) {
                changes.append("remove \(entity.name).\(attribute.name)")
            }
            for relationship in entity.relationships {
                let match = source.relationships.firstIndex { $0.name == relationship.name }
                    ?? relationship.renamingIdentifier.flatMap { name in source.relationships.firstIndex { $0.name == name } }
                guard let offset = match else {
                    sources.append(.fill(relationship.isToMany ? .references([]) : .null))
                    changes.append("add relationship \(entity.name).\(relationship.name)")
                    continue
                }
                let before = source.relationships[offset]
                if before.name != relationship.name { changes.append("rename \(entity.name).\(before.name) to \(relationship.name)") }
                guard before.isToMany == relationship.isToMany else {
                    throw fail("\(entity.name).\(relationship.name) changes between to-one and to-many")
                }
                sources.append(.copy(slot: source.attributes.count + offset, widenTo: nil))
            }
            for relationship in source.relationships where !entity.relationships.contains(where: { $0.name == relationship.name || $0.renamingIdentifier == relationship.name }) {
                changes.append("remove relationship \(entity.name).\(relationship.name)")
            }
            if source.uniqueness != entity.uniqueness { changes.append("uniqueness of \(entity.name) becomes \(entity.uniqueness)") }
            let identity = sources.count == source.valueCount && sources.enumerated().allSatisfy { index, item in
                if case .copy(let slot, nil) = item { return slot == index }
                return false
            } && zip(source.attributes, entity.attributes).allSatisfy { $0.isOptional == $1.isOptional || $1.isOptional }
            maps[source.number] = EntityMap(old: source, new: entity, sources: sources, isIdentity: identity)
        }
        for entity in old.entities where maps[entity.number] == nil { changes.append("remove entity \(entity.name)") }
        entities = maps
        self.changes = changes
        var carried: [SlotKey: SlotKey] = [:]
        for map in maps.values {
            for (index, source) in map.sources.enumerated() {
                if case .copy(let slot, _) = source {
                    carried[SlotKey(entity: map.old.number, slot: slot)] = SlotKey(entity: map.new.number, slot: index)
                }
            }
        }
        self.carried = carried
    }

    /// The record's values under the new schema, or throws naming the record if a value
    /// cannot be carried over (nil in an attribute that became required with no default).
    package func transform(_ id: RecordID, _ values: [Value], existing: (RecordID) -> Bool) throws -> [Value] {
        guard let map = entities[id.entity] else { return values }
        var result: [Value] = []
        result.reserveCapacity(map.sources.count)
        for (index, source) in map.sources.enumerated() {
            var value: Value
            switch source {
            case .fill(let fill): value = fill
            case .copy(let slot, let widen):
                value = slot < values.count ? values[slot] : .null
                if let widen, !value.isNull { value = Self.widen(value, to: widen) }
            }
            if index < map.new.attributes.count {
                let attribute = map.new.attributes[index]
                if value.isNull && !attribute.isOptional {
                    guard let fallback = attribute.defaultValue else {
                        throw CairnError(.validation, "\(map.new.name) \(id): '\(attribute.name)' is nil but the new model requires it and gives no default")
                    }
                    value = fallback
                }
            } else {
                // References to records of entities that no longer exist are dropped.
                switch value {
                case .reference(let raw) where entities[RecordID(rawValue: raw).entity] == nil || !existing(RecordID(rawValue: raw)):
                    value = .null
                case .references(let raws):
                    value = .references(raws.filter { entities[RecordID(rawValue: $0).entity] != nil && existing(RecordID(rawValue: $0)) })
                default: break
                }
            }
            result.append(value)
        }
        return result
    }

    package static func widen(_ value: Value, to type: AttributeType) -> Value {
        let integer: Int64?
        switch value {
        case .int8(let v): integer = Int64(v)
        case .int16(let v): integer = Int64(v)
        case .int32(let v): integer = Int64(v)
        case .int64(let v): integer = v
        default: integer = nil
        }
        switch (type, value) {
        case (.int16, _): return integer.map { .int16(Int16($0)) } ?? value
        case (.int32, _): return integer.map { .int32(Int32($0)) } ?? value
        case (.int64, _): return integer.map { .int64($0) } ?? value
        case (.double, .float(let f)): return .double(Double(f))
        case (.double, _): return integer.map { .double(Double($0)) } ?? value
        default: return value
        }
    }
}
