import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// An older app version never destroys a newer one's data, and no migration drops data
/// unless asked to.
@Suite struct MigrationTrustTests {
    /// Version 2 of MigrationSchemas.v1: `name` renamed `fullName`, a new `score`.
    static let v2 = MigrationSchemas.with {
        $0.entities[0].attributes[0] = AttributeDescription(name: "fullName", type: .string, renamingIdentifier: "name")
        $0.entities[0].attributes.append(AttributeDescription(name: "score", type: .int64, defaultValue: .int64(0)))
    }
    let ann = RecordID(entity: 1, serial: 1)

    @Test func anOlderModelIsRefusedAndTheNewerDataStays() throws {
        let fs = try MigrationSchemas.populated()
        do {
            let coordinator = try Coordinator(path: "/m", schema: Self.v2, options: memoryOptions(fs))
            var values = try #require(try coordinator.store.get(ann)).values
            values[3] = .int64(42)
            try coordinator.store.commit([.put(ann, values)])
            try coordinator.close()
        }
        #expect { try Coordinator(path: "/m", schema: MigrationSchemas.v1, options: memoryOptions(fs)) } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .schemaMismatch && error.message.contains("model version 2") && error.message.contains("version 1")
        }
        // Not even when data loss is allowed: an older model does not migrate back.
        #expect(throws: CairnError.self) {
            try Coordinator(path: "/m", schema: MigrationSchemas.v1, options: memoryOptions(fs), migration: .lightweightAllowingDataLoss)
        }
        let reopened = try Coordinator(path: "/m", schema: Self.v2, options: memoryOptions(fs))
        defer { try? reopened.close() }
        let values = try #require(try reopened.store.get(ann)).values
        #expect(values[0] == .string("Ann Lee") && values[3] == .int64(42))
        #expect(reopened.schema.version == 2)
    }

    @Test func aMigrationThatDropsDataIsRefusedUnlessAllowed() throws {
        let fs = try MigrationSchemas.populated()
        let dropsNick = MigrationSchemas.with { $0.entities[0].attributes.remove(at: 2) }
        let forecast = try Store.forecast(at: "/m", to: [MigrationStage(dropsNick)], options: memoryOptions(fs))
        #expect(forecast.losses == [DataLoss(entity: "Person", property: "nick", records: 2)])
        #expect { try Store.migrate(at: "/m", to: [MigrationStage(dropsNick)], options: memoryOptions(fs)) } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .schemaMismatch && error.message.contains("Person.nick, which holds data in 2 records")
        }
        #expect(try openMigrated(fs).schema.version == 1, "nothing changed")
        // Through the coordinator: refused by default, done under the named policy.
        #expect(throws: CairnError.self) { try Coordinator(path: "/m", schema: dropsNick, options: memoryOptions(fs)) }
        let migrated = try Coordinator(path: "/m", schema: dropsNick, options: memoryOptions(fs), migration: .lightweightAllowingDataLoss)
        #expect(migrated.schema.version == 2)
        try migrated.close()
    }

    @Test func droppingAnEntityWithRecordsIsALossAndAnEmptyPropertyIsNot() throws {
        let fs = try MigrationSchemas.populated()
        let dropsNotes = MigrationSchemas.with {
            $0.entities[0].relationships = []
            $0.entities.remove(at: 1)
        }
        let forecast = try Store.forecast(at: "/m", to: [MigrationStage(dropsNotes)], options: memoryOptions(fs))
        #expect(forecast.losses.contains(DataLoss(entity: "Note", property: nil, records: 2)), "\(forecast.losses)")
        #expect(forecast.losses.contains(DataLoss(entity: "Person", property: "notes", records: 1)), "\(forecast.losses)")
        // An optional attribute nobody set drops nothing.
        let addsTag = MigrationSchemas.with { $0.entities[1].attributes.append(AttributeDescription(name: "tag", type: .string, isOptional: true)) }
        try Store.migrate(at: "/m", to: [MigrationStage(addsTag)], options: memoryOptions(fs))
        var dropsTag = addsTag
        dropsTag.version = 3
        dropsTag.entities[1].attributes.removeLast()
        #expect(try Store.forecast(at: "/m", to: [MigrationStage(dropsTag)], options: memoryOptions(fs)).losses.isEmpty)
        try Store.migrate(at: "/m", to: [MigrationStage(dropsTag)], options: memoryOptions(fs))
        #expect(try openMigrated(fs).schema.version == 3)
    }

    /// The object queue's entity is Cairn's own: a model that does not name it neither
    /// lists nor drops it.
    @Test func theQueueEntityIsKeptByAModelThatDoesNotNameIt() throws {
        let fs = MemoryFileSystem()
        let queue = EntityDescription(name: "CairnQueueElement", number: 2,
                                      attributes: [AttributeDescription(name: "queue", type: .string, isIndexed: true),
                                                   AttributeDescription(name: "position", type: .int64),
                                                   AttributeDescription(name: "payload", type: .archived)])
        let person = EntityDescription(name: "Person", number: 1, attributes: [AttributeDescription(name: "name", type: .string)])
        let store = try Store.open(at: "/q", schema: Schema(version: 1, entities: [person, queue]), options: memoryOptions(fs))
        try store.commit([.put(RecordID(entity: 2, serial: 1), [.string("jobs"), .int64(0), .archived(Data([1]))])])
        try store.close()
        var next = Schema(version: 2, entities: [person])
        next.entities[0].attributes.append(AttributeDescription(name: "age", type: .int64, defaultValue: .int64(0)))
        let forecast = try Store.forecast(at: "/q", to: [MigrationStage(next)], options: memoryOptions(fs))
        #expect(!forecast.steps.flatMap(\.changes).contains { $0.contains("CairnQueueElement") }, "\(forecast.steps)")
        let coordinator = try Coordinator(path: "/q", schema: next, options: memoryOptions(fs))
        defer { try? coordinator.close() }
        #expect(coordinator.store.count(entity: 2) == 1)
        #expect(coordinator.schema.entity(named: "Person")?.attributes.count == 2)
    }
}
