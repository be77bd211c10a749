import Foundation
import Testing
@testable import Cairn
import CairnTesting
@testable import CairnStorage

/// Schemas for migration tests: v1 of a Person/Note model.
enum MigrationSchemas {
    static let v1 = Schema(version: 1, entities: [
        EntityDescription(name: "Person", number: 1,
                          attributes: [AttributeDescription(name: "name", type: .string),
                                       AttributeDescription(name: "age", type: .int32),
                                       AttributeDescription(name: "nick", type: .string, isOptional: true)],
                          relationships: [RelationshipDescription(name: "notes", destination: "Note", isToMany: true, inverse: "author")]),
        EntityDescription(name: "Note", number: 2,
                          attributes: [AttributeDescription(name: "text", type: .string)],
                          relationships: [RelationshipDescription(name: "author", destination: "Person", inverse: "notes")]),
    ])

    /// A populated v1 store: 3 people (one without a nick), 2 notes by the first.
    static func populated(_ fs: MemoryFileSystem = MemoryFileSystem()) throws -> MemoryFileSystem {
        let store = try Store.open(at: "/m", schema: v1, options: memoryOptions(fs))
        let p = (1...3).map { RecordID(entity: 1, serial: UInt64($0)) }
        let n = [RecordID(entity: 2, serial: 4), RecordID(entity: 2, serial: 5)]
        try store.commit([
            .put(p[0], [.string("Ann Lee"), .int32(30), .string("annie"), .references(n.map(\.rawValue))]),
            .put(p[1], [.string("Bob Ray"), .int32(40), .null, .references([])]),
            .put(p[2], [.string("Cy Dee"), .int32(50), .string("cy"), .references([])]),
            .put(n[0], [.string("hello"), .reference(p[0].rawValue)]),
            .put(n[1], [.string("world"), .reference(p[0].rawValue)]),
        ])
        try store.close()
        return fs
    }

    static func with(_ change: (inout Schema) -> Void) -> Schema {
        var schema = v1
        schema.version = 2
        change(&schema)
        return schema
    }
}

func openMigrated(_ fs: MemoryFileSystem) throws -> Store { try Store.open(at: "/m", options: memoryOptions(fs)) }

@Suite struct LightweightMigrationTests {
    let ann = RecordID(entity: 1, serial: 1), bob = RecordID(entity: 1, serial: 2)

    func migrate(_ schema: Schema, allowingDataLoss: Bool = false) throws -> Store {
        let fs = try MigrationSchemas.populated()
        try Store.migrate(at: "/m", to: [MigrationStage(schema, allowingDataLoss: allowingDataLoss)], options: memoryOptions(fs))
        let store = try openMigrated(fs)
        #expect(store.schema.versionHash == SchemaMapping.align(schema, with: MigrationSchemas.v1).versionHash)
        #expect(store.verify().isEmpty, "\(store.verify())")
        return store
    }

    @Test func addAttributesOptionalAndWithDefault() throws {
        let store = try migrate(MigrationSchemas.with {
            $0.entities[0].attributes.append(AttributeDescription(name: "email", type: .string, isOptional: true))
            $0.entities[0].attributes.append(AttributeDescription(name: "score", type: .double, defaultValue: .double(1.5)))
        })
        #expect(try store.get(ann)?.values == [.string("Ann Lee"), .int32(30), .string("annie"), .null, .double(1.5),
                                              .references([RecordID(entity: 2, serial: 4).rawValue, RecordID(entity: 2, serial: 5).rawValue])])
    }

    /// A required attribute with no default (as one whose initial value is made for each
    /// object, such as `UUID()`, has none in the schema) cannot be added to records that
    /// exist: the migration is refused, naming it, and the store is left as it was.
    @Test func addingARequiredAttributeWithoutADefaultIsRefused() throws {
        let fs = try MigrationSchemas.populated()
        let schema = MigrationSchemas.with {
            $0.entities[0].attributes.append(AttributeDescription(name: "id", type: .uuid))
        }
        #expect { try Store.migrate(at: "/m", to: [MigrationStage(schema)], options: memoryOptions(fs)) } throws: {
            ($0 as? CairnError)?.message.contains("new required attribute Person.id has no default") == true
        }
        let store = try openMigrated(fs)
        #expect(store.schema.versionHash == MigrationSchemas.v1.versionHash && store.verify().isEmpty)
    }

    @Test func removeAttributeAndRelationship() throws {
        let store = try migrate(MigrationSchemas.with {
            $0.entities[0].attributes.remove(at: 2)
            $0.entities[0].relationships = []
            $0.entities[1].relationships = []
        }, allowingDataLoss: true)
        #expect(try store.get(ann)?.values == [.string("Ann Lee"), .int32(30)])
        #expect(try store.get(RecordID(entity: 2, serial: 4))?.values == [.string("hello")])
    }

    @Test func addAndRemoveEntities() throws {
        let store = try migrate(MigrationSchemas.with {
            $0.entities[0].relationships = []
            $0.entities.remove(at: 1)
            $0.entities.append(EntityDescription(name: "Tag", number: 9, attributes: [AttributeDescription(name: "label", type: .string)]))
        }, allowingDataLoss: true)
        #expect(store.schema.entity(named: "Note") == nil)
        #expect(store.schema.entity(named: "Tag")?.number == 3, "a new entity gets a fresh number")
        #expect(store.count(entity: 1) == 3 && store.count(entity: 2) == 0)
    }

    @Test func optionalToRequiredWithADefaultAndBack() throws {
        let store = try migrate(MigrationSchemas.with {
            $0.entities[0].attributes[2].isOptional = false
            $0.entities[0].attributes[2].defaultValue = .string("none")
            $0.entities[0].attributes[0].isOptional = true
        })
        #expect(try store.get(bob)?.values[2] == .string("none"))
        #expect(try store.get(ann)?.values[2] == .string("annie"))
    }

    @Test func renamesThroughRenamingIdentifiers() throws {
        let store = try migrate(MigrationSchemas.with {
            $0.entities[0].name = "Member"
            $0.entities[0].renamingIdentifier = "Person"
            $0.entities[0].attributes[0].name = "fullName"
            $0.entities[0].attributes[0].renamingIdentifier = "name"
            $0.entities[0].relationships[0].name = "posts"
            $0.entities[0].relationships[0].renamingIdentifier = "notes"
            $0.entities[1].relationships[0].destination = "Member"
            $0.entities[1].relationships[0].inverse = "posts"
        })
        #expect(store.schema.entity(named: "Member")?.number == 1)
        #expect(try store.get(ann)?.values.first == .string("Ann Lee"))
    }

    @Test func widensNumbersAndChangesIndexes() throws {
        let store = try migrate(MigrationSchemas.with {
            $0.entities[0].attributes[1].type = .int64
            $0.entities[0].attributes[1].isIndexed = true
            $0.entities[0].uniqueness = [["name"]]
        })
        #expect(try store.get(ann)?.values[1] == .int64(30))
        #expect(try store.indexedIDs(entity: 1, slot: 1, matching: .equal([.int64(40)])) == [bob])
    }

    @Test func refusalsSayWhy() throws {
        let fs = try MigrationSchemas.populated()
        let required = MigrationSchemas.with {
            $0.entities[0].attributes.append(AttributeDescription(name: "email", type: .string))
        }
        #expect { try Store.migrate(at: "/m", to: [MigrationStage(required)], options: memoryOptions(fs)) } throws: { error in
            (error as? CairnError)?.message.contains("new required attribute Person.email has no default") == true
        }
        let narrowing = MigrationSchemas.with { $0.entities[0].attributes[1].type = .string }
        #expect { try Store.migrate(at: "/m", to: [MigrationStage(narrowing)], options: memoryOptions(fs)) } throws: { error in
            (error as? CairnError)?.message.contains("from int32 to string, which is not a widening") == true
        }
        let nilRequired = MigrationSchemas.with { $0.entities[0].attributes[2].isOptional = false }
        #expect { try Store.migrate(at: "/m", to: [MigrationStage(nilRequired)], options: memoryOptions(fs)) } throws: { error in
            (error as? CairnError)?.message.contains("'nick' is nil but the new model requires it") == true
        }
        let unique = MigrationSchemas.with { $0.entities[1].uniqueness = [["author"].isEmpty ? [] : ["text"]]; $0.entities[0].uniqueness = [["age"]] }
        _ = unique
        // Existing data that violates a new uniqueness constraint: refused with the list.
        let store = try Store.open(at: "/m", options: memoryOptions(fs))
        try store.commit([.put(bob, [.string("Ann Lee"), .int32(41), .null, .references([])])])
        try store.close()
        let uniqueNames = MigrationSchemas.with { $0.entities[0].uniqueness = [["name"]] }
        #expect { try Store.migrate(at: "/m", to: [MigrationStage(uniqueNames)], options: memoryOptions(fs)) } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .validation && error.message.contains("uniqueness violated") && error.message.contains("\(bob)")
        }
        // Every refusal left the old store as it was.
        let old = try Store.open(at: "/m", schema: MigrationSchemas.v1, options: memoryOptions(fs))
        #expect(old.count(entity: 1) == 3 && old.verify().isEmpty)
    }
}

extension LightweightMigrationTests {
    /// A NaN equals nothing in a uniqueness check, as a save checks it: records whose
    /// unique date, real or decimal is NaN pass `verify` and a migration (which compared
    /// their encoded bytes, and refused two NaN dates a save had accepted).
    @Test func uniqueValuesThatAreNaNCollideWithNone() throws {
        let v1 = Schema(version: 1, entities: [
            EntityDescription(name: "Reading", number: 1,
                              attributes: [AttributeDescription(name: "when", type: .date, isOptional: true),
                                           AttributeDescription(name: "value", type: .double, isOptional: true),
                                           AttributeDescription(name: "amount", type: .decimal, isOptional: true)],
                              uniqueness: [["when"], ["value"], ["amount"]]),
        ])
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/m", schema: v1, options: memoryOptions(fs))
        let nan: [Value] = [.date(Date(timeIntervalSinceReferenceDate: .nan)), .double(.nan), .decimal(.nan)]
        try store.commit([.put(try store.allocateID(entity: 1), nan), .put(try store.allocateID(entity: 1), nan)])
        #expect(store.verify().isEmpty)
        try store.close()
        var v2 = v1
        v2.version = 2
        v2.entities[0].attributes.append(AttributeDescription(name: "note", type: .string, defaultValue: .string("")))
        _ = try Store.migrate(at: "/m", to: [MigrationStage(v2)], options: memoryOptions(fs))
        let migrated = try Store.open(at: "/m", schema: v2, options: memoryOptions(fs))
        #expect(migrated.count(entity: 1) == 2 && migrated.verify().isEmpty)
        try migrated.close()
    }

    /// A migration that adds a uniqueness constraint refuses values equal as a save and
    /// `verify` compare them though their bytes differ: 0.0 and -0.0, and two spellings of
    /// one string (it compared encoded bytes, let them through, and `verify` then reported
    /// them).
    @Test func aNewUniquenessRefusesValuesEqualButUnlike() throws {
        let v1 = Schema(version: 1, entities: [
            EntityDescription(name: "Tag", number: 1,
                              attributes: [AttributeDescription(name: "name", type: .string),
                                           AttributeDescription(name: "score", type: .double)]),
        ])
        for (first, second) in [([Value.string("caf\u{E9}"), .double(1)], [Value.string("cafe\u{301}"), .double(2)]),
                                ([.string("a"), .double(0)], [.string("b"), .double(-0.0)])] {
            let fs = MemoryFileSystem()
            let store = try Store.open(at: "/m", schema: v1, options: memoryOptions(fs))
            try store.commit([.put(try store.allocateID(entity: 1), first), .put(try store.allocateID(entity: 1), second)])
            try store.close()
            var v2 = v1
            v2.version = 2
            v2.entities[0].uniqueness = [["name"], ["score"]]
            #expect { try Store.migrate(at: "/m", to: [MigrationStage(v2)], options: memoryOptions(fs)) } throws: { error in
                (error as? CairnError)?.message.contains("uniqueness violated by existing data") == true
            }
        }
    }
}

@Suite struct CustomMigrationTests {
    /// v1 → v2 splits `name` into first and last (custom), v2 → v3 adds `active` (lightweight).
    static let v2 = Schema(version: 2, entities: [
        EntityDescription(name: "Person", number: 1,
                          attributes: [AttributeDescription(name: "name", type: .string),
                                       AttributeDescription(name: "last", type: .string, defaultValue: .string("")),
                                       AttributeDescription(name: "age", type: .int32),
                                       AttributeDescription(name: "nick", type: .string, isOptional: true)],
                          relationships: [RelationshipDescription(name: "notes", destination: "Note", isToMany: true, inverse: "author")]),
        MigrationSchemas.v1.entities[1],
    ])
    static var v3: Schema {
        var schema = v2
        schema.version = 3
        schema.entities[0].attributes.append(AttributeDescription(name: "active", type: .bool, defaultValue: .bool(true)))
        return schema
    }

    static let stages = [
        MigrationStage(MigrationSchemas.v1),
        MigrationStage(v2) { record in
            guard record.entityName == "Person", case .string(let full) = record["name"] else { return }
            let parts = full.split(separator: " ", maxSplits: 1).map(String.init)
            record["name"] = .string(parts.first ?? "")
            record["last"] = .string(parts.count > 1 ? parts[1] : "")
        },
        MigrationStage(v3),
    ]

    @Test func aStoreSeveralVersionsBehindMigratesStepByStep() throws {
        let fs = try MigrationSchemas.populated()
        let forecast = try Store.forecast(at: "/m", to: Self.stages, options: memoryOptions(fs))
        #expect(forecast.steps.map(\.toVersion) == [2, 3])
        #expect(forecast.steps[0].hasCustomStep && forecast.steps[0].recordsTouched["Person"] == 3)
        #expect(forecast.steps[1].changes.contains("add Person.active (default true)"))
        var reported: [(Int, Int)] = []
        try Store.migrate(at: "/m", to: Self.stages, options: memoryOptions(fs)) { reported.append(($0, $1)) }
        #expect(reported.last.map { $0 == (5, 5) } == true)
        let store = try openMigrated(fs)
        #expect(store.schema.version == 3)
        #expect(try store.get(RecordID(entity: 1, serial: 1))?.values.prefix(5) == [.string("Ann"), .string("Lee"), .int32(30), .string("annie"), .bool(true)])
        try store.close()
        // A store already at v2 runs only the last step.
        #expect(try Store.forecast(at: "/m", to: Self.stages, options: memoryOptions(fs)).isNeeded == false)
    }

    @Test func theForecastChangesNothing() throws {
        let fs = try MigrationSchemas.populated()
        let before = fs.crashImage(.keepAll)
        _ = try Store.forecast(at: "/m", to: Self.stages, options: memoryOptions(fs))
        for name in ["MANIFEST", "000001.snapshot", "000002.log"] {
            #expect(fs.contents(of: "/m/" + name) == before.contents(of: "/m/" + name))
        }
    }

    @Test func coordinatorPolicies() throws {
        let fs = try MigrationSchemas.populated()
        #expect { try Coordinator(path: "/m", schema: Self.v3, options: memoryOptions(fs), migration: .refuse) } throws: {
            ($0 as? CairnError)?.code == .schemaMismatch
        }
        let migrated = try Coordinator(path: "/m", schema: Self.v3, options: memoryOptions(fs), migration: .stages(Self.stages))
        #expect(migrated.schema.version == 3 && migrated.store.count(entity: 1) == 3)
        try migrated.close()
        let recreated = try Coordinator(path: "/m", schema: MigrationSchemas.v1, options: memoryOptions(fs), migration: .recreate)
        #expect(recreated.store.count(entity: 1) == 0 && recreated.schema.version == 1)
        try recreated.close()
    }
}

@Suite struct MigrationCrashTests {
    /// Crashed at every sync point of a migration (kept, dropped, garbled writes): the
    /// store opens either as the whole old one or as the whole new one.
    @Test func everySyncPointLeavesTheOldOrTheNewStore() throws {
        let fs = try MigrationSchemas.populated()
        let oldContents = try contents(of: try Store.open(at: "/m", options: memoryOptions(fs.crashImage(.keepAll))))
        let target = CustomMigrationTests.stages
        var images: [MemoryFileSystem] = []
        let box = Locked<[MemoryFileSystem]>([])
        fs.onSync = { fs, _ in
            box.withLock { list in
                for seed in 0..<3 { list.append(fs.crashImage(.random(seed: UInt64(list.count * 7 + seed)))) }
                list.append(fs.crashImage(.dropAll))
                list.append(fs.crashImage(.keepAll))
            }
        }
        try Store.migrate(at: "/m", to: target, options: memoryOptions(fs))
        fs.onSync = nil
        images = box.value
        let newContents = try contents(of: try Store.open(at: "/m", options: memoryOptions(fs.crashImage(.keepAll))))
        var old = 0, new = 0
        for (index, image) in images.enumerated() {
            let store = try Store.open(at: "/m", options: memoryOptions(image))
            let found = try contents(of: store)
            if store.schema.version == 1 {
                #expect(found == oldContents, "image \(index)"); old += 1
            } else {
                #expect(store.schema.version == 3 && found == newContents, "image \(index)"); new += 1
            }
            try store.close()
        }
        #expect(old > 0 && new > 0 && images.count >= 20, "old \(old), new \(new) of \(images.count)")
    }

    /// `.recreate` goes through the same protocol: at every sync point the store is the
    /// whole old one or the new, empty one with the new schema — never a missing store.
    @Test func recreateAtEverySyncPointLeavesTheOldOrAnEmptyStore() throws {
        let fs = try MigrationSchemas.populated()
        let oldContents = try contents(of: try Store.open(at: "/m", options: memoryOptions(fs.crashImage(.keepAll))))
        let box = Locked<[MemoryFileSystem]>([])
        fs.onSync = { fs, _ in
            box.withLock { list in
                for seed in 0..<3 { list.append(fs.crashImage(.random(seed: UInt64(list.count * 5 + seed)))) }
                list.append(fs.crashImage(.dropAll))
                list.append(fs.crashImage(.keepAll))
            }
        }
        try Store.recreate(at: "/m", schema: CustomMigrationTests.v3, options: memoryOptions(fs))
        fs.onSync = nil
        var old = 0, new = 0
        for (index, image) in box.value.enumerated() {
            let store = try Store.open(at: "/m", options: memoryOptions(image))
            if store.schema.version == 1 {
                #expect(try contents(of: store) == oldContents, "image \(index)"); old += 1
            } else {
                #expect(store.schema.version == 3 && store.count(entity: 1) == 0, "image \(index)"); new += 1
            }
            #expect(store.verify().isEmpty, "image \(index)")
            try store.close()
        }
        #expect(old > 0 && new > 0, "old \(old), new \(new)")
        // A recreated store does not reuse the serials of the records it dropped.
        let store = try Store.open(at: "/m", options: memoryOptions(fs))
        #expect(try store.allocateID(entity: 1).serial > oldContents.keys.map(\.serial).max() ?? 0)
        try store.close()
    }

    @Test func aFailingCallLeavesTheOldOrTheNewStore() throws {
        var n = 1
        var injected = 0
        while n < 500 {
            let base = try MigrationSchemas.populated()
            let faulty = FaultInjectingFileSystem(base: base, failingCalls: [n])
            var threw = false
            do { try Store.migrate(at: "/m", to: CustomMigrationTests.stages, options: memoryOptions(faulty)) } catch { threw = true }
            if !threw && faulty.callCount < n { break }
            if threw { injected += 1 }
            for image in [base.crashImage(.keepAll), base.crashImage(.dropAll)] {
                let store = try Store.open(at: "/m", options: memoryOptions(image))
                #expect([1, 3].contains(store.schema.version), "N=\(n)")
                #expect(store.count(entity: 1) == 3 && store.verify().isEmpty, "N=\(n)")
                try store.close()
            }
            n += 1
        }
        #expect(injected > 10)
    }
}
