import Foundation

/// One model version in a migration chain, with an optional custom step that reshapes
/// each record after the inferred (lightweight) mapping into this version.
public struct MigrationStage: Sendable {
    /// The schema of the model at this version (its ``Model/schema``).
    public var schema: Schema
    /// The custom step, if any: called with every record once the inferred mapping has
    /// reshaped it into this version, to change its values by key or delete it. It may not
    /// change how many values the record has; an error it throws fails the migration.
    public var transform: (@Sendable (inout MigrationRecord) throws -> Void)?
    /// Whether the migration may drop attributes, relationships or entities that hold
    /// data (``MigrationForecast/Step/losses``). Without it such a migration is refused.
    /// A stage with a custom step decides for itself what its dropped data becomes, so
    /// what it drops is never counted as lost.
    public var allowsDataLoss: Bool

    /// A stage migrating into `schema`, dropping data only if `allowingDataLoss`, with
    /// `transform` as its custom step, if given.
    public init(_ schema: Schema, allowingDataLoss: Bool = false, transform: (@Sendable (inout MigrationRecord) throws -> Void)? = nil) {
        self.schema = schema
        self.allowsDataLoss = allowingDataLoss
        self.transform = transform
    }
}

/// Data a migration would drop: a property's values, or an entity's records.
public struct DataLoss: Sendable, Equatable, CustomStringConvertible {
    /// The entity, under its name in the store.
    public var entity: String
    /// The attribute or relationship, or nil for the whole entity.
    public var property: String?
    /// The records that hold data there (for an entity, all of its records).
    public var records: Int

    public var description: String {
        if let property { return "\(entity).\(property), which holds data in \(records) record\(records == 1 ? "" : "s")" }
        return "entity \(entity) and its \(records) record\(records == 1 ? "" : "s")"
    }
}

/// A record during a custom migration step, read and written by key (the dynamic API).
public struct MigrationRecord: Sendable {
    /// The name of the record's entity in the stage's model.
    public let entityName: String
    /// The record's ID before the stage (its serial stays; its entity number may change).
    public let id: RecordID
    /// The names of the record's values, attributes then relationships, in the stage's model.
    public let keys: [String]
    /// The record's values, in the order of ``keys``.
    public var values: [Value]
    /// Set to drop the record.
    public var isDeleted = false

    /// The value of the attribute or relationship named `key` (`.null` for an unknown key;
    /// setting one changes nothing).
    public subscript(key: String) -> Value {
        get { keys.firstIndex(of: key).map { values[$0] } ?? .null }
        set { if let index = keys.firstIndex(of: key) { values[index] = newValue } }
    }
}

/// What a migration will do, said before anything changes.
public struct MigrationForecast: Sendable, Equatable {
    /// One stage of the migration: from one model version to the next.
    public struct Step: Sendable, Equatable {
        /// The model version the step starts from.
        public var fromVersion: UInt32
        /// The model version it migrates to.
        public var toVersion: UInt32
        /// What the inferred mapping changes, one line each: `add entity Tag`,
        /// `rename Person.name to fullName`, `widen Item.count from int16 to int64`.
        public var changes: [String]
        /// Whether the stage has a custom step (``MigrationStage/transform``).
        public var hasCustomStep: Bool
        /// Records of each (old) entity that this step rewrites.
        public var recordsTouched: [String: Int]
        /// What this step would drop that holds data, counted on the store as it is.
        public var losses: [DataLoss] = []
    }

    /// Everything the migration would drop that holds data.
    public var losses: [DataLoss] { steps.flatMap(\.losses) }

    /// The steps, in order; empty when the store is at the model already.
    public var steps: [Step]
    /// Whether opening the store with the model would migrate it.
    public var isNeeded: Bool { !steps.isEmpty }
}

/// What to do when the model differs from the store's schema.
public enum MigrationPolicy: Sendable {
    /// Migrate through inferred (lightweight) mapping — the default. A mapping that would
    /// drop data (an attribute, relationship or entity that holds some) is refused with
    /// `.schemaMismatch`, saying what and how much.
    case lightweight
    /// Migrate through inferred mapping even if it drops data.
    case lightweightAllowingDataLoss
    /// Migrate through these model versions in order, with their custom steps.
    case stages([MigrationStage])
    /// Refuse to open (`.schemaMismatch`).
    case refuse
    /// Throw the store away and start empty (for caches).
    case recreate
}

extension Store {
    /// The stages still to run for a store at `stored`: those after the last stage whose
    /// layout equals the store's, or all of them.
    package static func pending(_ stages: [MigrationStage], from stored: Schema) -> [MigrationStage] {
        var current = stored
        var start = 0
        for (index, stage) in stages.enumerated() {
            let aligned = SchemaMapping.align(stage.schema, with: current)
            if aligned.versionHash == stored.versionHash { start = index + 1 }
            current = aligned
        }
        return Array(stages[start...])
    }

    /// What migrating the store at `path` through `stages` would do, without changing anything.
    package static func forecast(at path: String, to stages: [MigrationStage], options: StoreOptions = StoreOptions()) throws -> MigrationForecast {
        var options = options
        options.createIfMissing = false
        options.compaction = .manual
        options.readOnly = true  // a forecast changes nothing, not even a torn tail
        let store = try Store.open(at: path, options: options)
        defer { try? store.close() }
        return try store.forecast(stages)
    }

    package func forecast(_ stages: [MigrationStage]) throws -> MigrationForecast {
        // The store's version is the highest model version that wrote it (no migration
        // lowers it): an older model (an older app) must not migrate it back and drop what
        // the newer one added. The same layout under an older version opens as it is.
        if let last = Self.pending(stages, from: schema).last, last.schema.version < schema.version,
           SchemaMapping.align(last.schema, with: schema).versionHash != schema.versionHash {
            throw CairnError(.schemaMismatch,
                             "store at \(path) was written by model version \(schema.version), and this model is version \(last.schema.version), an older one with another layout: opening it would undo the newer version's changes. Open it with model version \(schema.version) or later")
        }
        var current = schema
        var steps: [MigrationForecast.Step] = []
        // Where each stored value slot is, stage by stage, until a stage drops it.
        var positions: [SchemaMapping.SlotKey: SchemaMapping.SlotKey] = [:]
        for entity in schema.entities {
            for slot in 0..<entity.valueCount { positions[.init(entity: entity.number, slot: slot)] = .init(entity: entity.number, slot: slot) }
        }
        for stage in Self.pending(stages, from: current) {
            let mapping = try SchemaMapping(from: current, to: stage.schema)
            var dropped: [SchemaMapping.SlotKey] = []
            for (stored, position) in positions {
                if let next = mapping.carried[position] {
                    positions[stored] = next
                } else {
                    positions[stored] = nil
                    if stage.transform == nil { dropped.append(stored) }
                }
            }
            var touched: [String: Int] = [:]
            for entity in current.entities {
                let changed = mapping.entities[entity.number].map { !$0.isIdentity } ?? true
                if changed || stage.transform != nil { touched[entity.name] = count(entity: entity.number) }
            }
            if mapping.new.versionHash != current.versionHash || stage.transform != nil {
                steps.append(.init(fromVersion: current.version, toVersion: stage.schema.version, changes: mapping.changes,
                                   hasCustomStep: stage.transform != nil, recordsTouched: touched,
                                   losses: try losses(dropping: dropped, next: mapping)))
            }
            current = mapping.new
        }
        return MigrationForecast(steps: steps)
    }

    /// The data lost with the stored value slots `dropped`: an entity whose every slot is
    /// dropped and which `next` does not map is lost whole; otherwise the records that hold
    /// a value (not nil, not an empty list) in a dropped slot are counted, in one scan of
    /// each entity concerned.
    private func losses(dropping dropped: [SchemaMapping.SlotKey], next: SchemaMapping) throws -> [DataLoss] {
        var losses: [DataLoss] = []
        for entity in schema.entities.sorted(by: { $0.number < $1.number }) {
            let slots = dropped.filter { $0.entity == entity.number }.map(\.slot).sorted()
            guard !slots.isEmpty || (entity.valueCount == 0 && next.entities[entity.number] == nil) else { continue }
            let records = count(entity: entity.number)
            guard records > 0 else { continue }
            if next.entities[entity.number] == nil, slots.count == entity.valueCount {
                losses.append(DataLoss(entity: entity.name, property: nil, records: records))
                continue
            }
            var holding = [Int](repeating: 0, count: slots.count)
            try scanVersioned(entity: entity.number) { _, _, record in
                let values = try record.values()
                for (index, slot) in slots.enumerated() where slot < values.count {
                    switch values[slot] {
                    case .null, .references([]): break
                    default: holding[index] += 1
                    }
                }
            }
            let names = entity.attributes.map(\.name) + entity.relationships.map(\.name)
            for (index, slot) in slots.enumerated() where holding[index] > 0 {
                losses.append(DataLoss(entity: entity.name, property: names[slot], records: holding[index]))
            }
        }
        return losses
    }

    /// Migrates the store at `path` through `stages` (one stage: lightweight to that
    /// schema), atomically: the migrated snapshot is written beside the old files and the
    /// manifest switched only when it is complete, so a crash or an error at any point
    /// leaves the old store, openable with the old model, or the whole new one.
    @discardableResult
    package static func migrate(at path: String, to stages: [MigrationStage], options: StoreOptions = StoreOptions(),
                               progress: ((Int, Int) -> Void)? = nil) throws -> MigrationForecast {
        var options = options
        options.createIfMissing = false
        options.compaction = .manual
        let store = try Store.open(at: path, options: options)
        defer { try? store.close() }
        return try store.migrate(stages, progress: progress)
    }

    /// Empties the store at `path` and gives it `schema`, atomically and under the store's
    /// lock: an empty snapshot with the new schema is written beside the old files and the
    /// manifest switched to it (the compaction protocol), so a crash leaves the old store
    /// or the new empty one, never a directory without a store. Serial numbers go on from
    /// where the old store left off.
    package static func recreate(at path: String, schema: Schema, options: StoreOptions = StoreOptions()) throws {
        var options = options
        options.createIfMissing = false
        options.compaction = .manual
        try schema.validate()
        let store = try Store.open(at: path, options: options)
        defer { try? store.close() }
        try store.checkWritable()
        _ = try store.log.withLock { writer in
            guard let current = writer else { throw store.closedError() }
            return try store.rewriting {
                try store.compact(replacing: &writer, current: current, schema: schema, transform: { _, _ in nil })
            }
        }
    }

    package func migrate(_ stages: [MigrationStage], progress: ((Int, Int) -> Void)?) throws -> MigrationForecast {
        let forecast = try forecast(stages)
        guard forecast.isNeeded else { return forecast }
        let losses = forecast.losses
        if !losses.isEmpty, !Self.pending(stages, from: schema).contains(where: \.allowsDataLoss) {
            throw CairnError(.schemaMismatch,
                             "migration refused: it would drop data: \(losses.map(\.description).joined(separator: "; ")). Keep the properties (or rename them with a renaming identifier), migrate with a custom step, or allow it explicitly (MigrationPolicy.lightweightAllowingDataLoss, MigrationStage(allowingDataLoss: true), cairn migrate --allow-data-loss)")
        }
        var current = schema
        var plan: [(SchemaMapping, MigrationStage)] = []
        for stage in Self.pending(stages, from: current) {
            let mapping = try SchemaMapping(from: current, to: stage.schema)
            plan.append((mapping, stage))
            current = mapping.new
        }
        let target = current
        try target.validate()
        let total = schema.entities.reduce(0) { $0 + count(entity: $1.number) }
        var done = 0
        // Uniqueness of the new schema, checked over the migrated records.
        // Unique keys by entity, group and values, equal as `verify` and a save compare
        // them (0.0 and -0.0, two spellings of one string); a comparison of their encoded
        // bytes had let such pairs through, and `verify` then reported them.
        var seen: [UniqueKey: RecordID] = [:]
        var violations: [String] = []
        try checkWritable()
        _ = try log.withLock { writer in
            guard let current = writer else { throw closedError() }
            return try rewriting {
                try compact(replacing: &writer, current: current, schema: target, transform: { id, body in
                    done += 1
                    if done % 1000 == 0 { progress?(done, total) }
                    var values = try ValueCoding.decode(body)
                    var recordID = id
                    for (mapping, stage) in plan {
                        guard let map = mapping.entities[recordID.entity] else { return nil }
                        values = try mapping.transform(recordID, values, existing: { self.contains($0) })
                        if let transform = stage.transform {
                            var record = MigrationRecord(entityName: map.new.name, id: recordID,
                                                         keys: map.new.attributes.map(\.name) + map.new.relationships.map(\.name),
                                                         values: values)
                            try transform(&record)
                            if record.isDeleted { return nil }
                            guard record.values.count == values.count else {
                                throw CairnError(.validation, "custom step changed the number of values of \(recordID)")
                            }
                            values = record.values
                        }
                        recordID = RecordID(entity: map.new.number, serial: recordID.serial)
                    }
                    guard let entity = target.entity(number: recordID.entity) else { return nil }
                    try Self.check(values, of: recordID, against: target)
                    for (index, group) in entity.uniqueness.enumerated() {
                        let slots = group.compactMap { name in entity.attributes.firstIndex { $0.name == name } }
                        let key = slots.map { values[$0] }
                        // (nil never collides, as in SQL; a NaN equals nothing, as in a save's check)
                        guard !key.contains(where: { $0.isNull || ValueOrder.isNaN($0) }) else { continue }
                        let unique = UniqueKey(entity: entity.number, group: index, values: key)
                        if let other = seen[unique] {
                            violations.append("\(entity.name) (\(group.joined(separator: ", "))) = \(key) in \(other) and \(recordID)")
                        } else {
                            seen[unique] = recordID
                        }
                    }
                    return ValueCoding.encode(values)
                }, finish: {
                    if !violations.isEmpty {
                        throw CairnError(.validation, "migration refused: uniqueness violated by existing data: "
                                         + violations.prefix(20).joined(separator: "; ") + (violations.count > 20 ? " (and \(violations.count - 20) more)" : ""))
                    }
                })
            }
        }
        // Slots may have moved: drop every index (the new snapshot's stored ones are
        // attached on first use).
        state.withLock { $0.indexes = [:] }
        progress?(total, total)
        return forecast
    }
}

/// A uniqueness group's values in one record, for a migration's check: equal when the
/// values are (`Value`'s `==`, as `verify` compares them).
private struct UniqueKey: Hashable {
    let entity: UInt16
    let group: Int
    let values: [Value]
}
