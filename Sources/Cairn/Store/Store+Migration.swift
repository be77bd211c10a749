import Foundation

/// One model version in a migration chain, with an optional custom step that reshapes
/// each record after the inferred (lightweight) mapping into this version.
public struct MigrationStage: Sendable {
    public var schema: Schema
    public var transform: (@Sendable (inout MigrationRecord) throws -> Void)?

    public init(_ schema: Schema, transform: (@Sendable (inout MigrationRecord) throws -> Void)? = nil) {
        self.schema = schema
        self.transform = transform
    }
}

/// A record during a custom migration step, read and written by key (the dynamic API).
public struct MigrationRecord: Sendable {
    public let entityName: String
    public let id: RecordID
    public let keys: [String]
    public var values: [Value]
    /// Set to drop the record.
    public var isDeleted = false

    public subscript(key: String) -> Value {
        get { keys.firstIndex(of: key).map { values[$0] } ?? .null }
        set { if let index = keys.firstIndex(of: key) { values[index] = newValue } }
    }
}

/// What a migration will do, said before anything changes.
public struct MigrationForecast: Sendable, Equatable {
    public struct Step: Sendable, Equatable {
        public var fromVersion: UInt32
        public var toVersion: UInt32
        public var changes: [String]
        public var hasCustomStep: Bool
        /// Records of each (old) entity that this step rewrites.
        public var recordsTouched: [String: Int]
    }

    public var steps: [Step]
    public var isNeeded: Bool { !steps.isEmpty }
}

/// What to do when the model differs from the store's schema.
public enum MigrationPolicy: Sendable {
    /// Migrate through inferred (lightweight) mapping — the default.
    case lightweight
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
    static func pending(_ stages: [MigrationStage], from stored: Schema) -> [MigrationStage] {
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
    public static func forecast(at path: String, to stages: [MigrationStage], options: StoreOptions = StoreOptions()) throws -> MigrationForecast {
        var options = options
        options.createIfMissing = false
        options.compaction = .manual
        let store = try Store.open(at: path, options: options)
        defer { try? store.close() }
        return try store.forecast(stages)
    }

    func forecast(_ stages: [MigrationStage]) throws -> MigrationForecast {
        var current = schema
        var steps: [MigrationForecast.Step] = []
        for stage in Self.pending(stages, from: current) {
            let mapping = try SchemaMapping(from: current, to: stage.schema)
            var touched: [String: Int] = [:]
            for entity in current.entities {
                let changed = mapping.entities[entity.number].map { !$0.isIdentity } ?? true
                if changed || stage.transform != nil { touched[entity.name] = count(entity: entity.number) }
            }
            if mapping.new.versionHash != current.versionHash || stage.transform != nil {
                steps.append(.init(fromVersion: current.version, toVersion: stage.schema.version, changes: mapping.changes,
                                   hasCustomStep: stage.transform != nil, recordsTouched: touched))
            }
            current = mapping.new
        }
        return MigrationForecast(steps: steps)
    }

    /// Migrates the store at `path` through `stages` (one stage: lightweight to that
    /// schema), atomically: the migrated snapshot is written beside the old files and the
    /// manifest switched only when it is complete, so a crash or an error at any point
    /// leaves the old store, openable with the old model, or the whole new one.
    @discardableResult
    public static func migrate(at path: String, to stages: [MigrationStage], options: StoreOptions = StoreOptions(),
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
    public static func recreate(at path: String, schema: Schema, options: StoreOptions = StoreOptions()) throws {
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

    func migrate(_ stages: [MigrationStage], progress: ((Int, Int) -> Void)?) throws -> MigrationForecast {
        let forecast = try forecast(stages)
        guard forecast.isNeeded else { return forecast }
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
        // Slots may have moved: keep only the new snapshot's stored indexes.
        state.withLock { $0.indexes = $0.storedIndexes() }
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
