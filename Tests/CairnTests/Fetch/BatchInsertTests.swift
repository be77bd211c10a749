import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Batch inserts (`Context.batchInsert`): each is compared with the same objects inserted
/// one by one and saved.
@Suite struct BatchInsertTests {
    static func stack() throws -> Stack {
        try Stack(model: try Model(Reading.self, Person.self, DVD.self, Shelf.self, Box.self))
    }

    /// The reading `index` of a seeded run.
    static func reading(_ index: Int, seed: UInt64) -> BatchTests.Stored {
        var random = SplitMix64(seed: seed &+ UInt64(index) &* 0x9E37_79B9)
        return (Int(random.next() % 12), Int64(random.next() % 200) - 100, ["", "a", "ab", "b", "long note"][Int(random.next() % 5)])
    }

    @Test func aBatchInsertStoresWhatInsertingObjectsWould() throws {
        let stack = try Self.stack()
        // Some readings already stored, in a snapshot and in the log.
        let setup = stack.context()
        for index in 0..<10 { Reading(context: setup).level = Int64(1000 + index) }
        try setup.save()
        try stack.coordinator.store.compact()

        let context = stack.context()
        var holders = Set<ObjectIdentifier>()
        let count = 300
        let ids = try context.batchInsert(Reading.self, count: count) { reading, index in
            holders.insert(ObjectIdentifier(reading))
            // Each record starts from the defaults, not from the last record's values.
            #expect(reading.level == 0 && reading.note == "" && !reading.checked && reading.sensor == 0)
            #expect(reading.isInserted == false && reading.context == nil)
            let (sensor, level, note) = Self.reading(index, seed: 1)
            reading.sensor = sensor
            reading.level = level
            if !note.isEmpty { reading.note = note }
            if index % 3 == 0 { reading.checked = true }
        }
        #expect(holders.count == 1)
        #expect(ids.count == count && Set(ids).count == count)
        #expect(ids.allSatisfy { $0.entityName == "Reading" })

        // The same readings through objects, in a second store: the same values, ID for ID.
        let check = try Self.stack()
        let loop = check.context()
        for _ in 0..<10 { _ = Reading(context: loop) }
        for index in 0..<count {
            let reading = Reading(context: loop)
            (reading.sensor, reading.level, reading.note) = Self.reading(index, seed: 1)
            reading.checked = index % 3 == 0
        }
        try loop.save()
        for stack in [stack, try stack.reopened()] {
            let context = stack.context()
            let stored = try context.fetch(FetchQuery(Reading.self)).filter { $0.level < 1000 }
            #expect(stored.map(\.objectID) == ids)
            let checkContext = check.context()  // (kept: a fault of a freed context cannot load)
            let expected = try checkContext.fetch(FetchQuery(Reading.self)).dropFirst(10)
            #expect(stored.map(\.sensor) == expected.map(\.sensor))
            #expect(stored.map(\.level) == expected.map(\.level))
            #expect(stored.map(\.note) == expected.map(\.note))
            #expect(stored.map(\.checked) == expected.map(\.checked))
            // The index on `sensor` knows the new records.
            #expect(try context.count(for: try FetchQuery(Reading.self, format: "sensor == 4"))
                    == expected.filter { $0.sensor == 4 }.count)
        }
    }

    @Test func theCallingContextAndOthersTakeInTheInserts() throws {
        let stack = try Self.stack()
        let context = stack.context(), other = stack.context()
        var heard: [ChangeSet] = []
        other.onExternalChanges = { heard.append($0) }
        var heardHere = 0  // (its own batch is not an external change, as its own save is not)
        context.onExternalChanges = { _ in heardHere += 1 }
        let results = try LiveResults(request: try FetchQuery(Reading.self, format: "sensor == 2"), context: context)
        var changes: [ResultsChange] = []
        results.onChange = { changes.append($0) }
        #expect(results.objects.isEmpty)
        let ids = try context.batchInsert(Reading.self, from: [1, 2, 2, 3]) { reading, sensor in reading.sensor = sensor }
        // The calling context's live results take in the new records.
        #expect(results.objects.map(\.sensor) == [2, 2] && changes.count == 1 && changes[0].inserted.count == 2)
        #expect(try context.count(for: FetchQuery(Reading.self)) == 4)
        _ = try other.fetch(FetchQuery(Reading.self, format: "sensor == 99"))
        #expect(heard.count == 1 && heard[0].inserted == Set(ids) && heard[0].updated.isEmpty)
        #expect(heardHere == 0)
        // Nothing to insert: nothing committed, nobody told.
        let sequence = stack.coordinator.store.statistics.lastSequence
        #expect(try context.batchInsert(Reading.self, from: [Int]()) { _, _ in }.isEmpty)
        #expect(stack.coordinator.store.statistics.lastSequence == sequence)
    }

    @Test func aBatchInsertThatFailsInsertsNothing() throws {
        let stack = try Self.stack()
        let context = stack.context()
        // validateForInsert refuses the 50th reading: none is stored.
        let refused = #expect(throws: CairnError.self) {
            try context.batchInsert(Reading.self, count: 80) { reading, index in
                reading.level = Int64(index)
                if index == 49 { reading.note = "forbidden" }
            }
        }
        #expect(refused?.code == .validation)
        #expect(try context.count(for: FetchQuery(Reading.self)) == 0)
        // A value of the wrong type, through the dynamic API.
        #expect(throws: CairnError.self) {
            try context.batchInsert(entityName: "Reading", from: 0..<5) { object, index in
                try object.setValue(index == 3 ? .string("high") : .int64(1), forKey: "level")
            }
        }
        // The object handed out may not be inserted into a context.
        let thief = stack.context()
        let stolen = #expect(throws: CairnError.self) {
            try context.batchInsert(Reading.self, count: 10) { reading, index in
                if index == 4 { thief.insert(reading) }
            }
        }
        #expect(stolen?.code == .invalidArgument)
        // Refused: a child context, a negative count, an entity not in the model.
        #expect(throws: CairnError.self) { try Context(parent: context).batchInsert(Reading.self, count: 1) { _, _ in } }
        #expect(throws: CairnError.self) { try context.batchInsert(Reading.self, count: -1) { _, _ in } }
        #expect(throws: CairnError.self) { try context.batchInsert(entityName: "Nope", from: [1]) { _, _ in } }
        #expect(try stack.context().count(for: FetchQuery(Reading.self)) == 0)
    }

    @Test func aKeptObjectIsReplacedForTheNextRecord() throws {
        let stack = try Self.stack()
        var kept: [Reading] = []
        let ids = try stack.context().batchInsert(Reading.self, count: 20) { reading, index in
            reading.level = Int64(index)
            if index % 2 == 0 { kept.append(reading) }
        }
        #expect(Set(kept.map(ObjectIdentifier.init)).count == 10)
        #expect(kept.map(\.level) == stride(from: 0, to: 20, by: 2).map(Int64.init))
        #expect(kept.map(\.objectID) == stride(from: 0, to: 20, by: 2).map { ids[$0] })
        let reader = stack.context()
        let stored = try reader.fetch(FetchQuery(Reading.self))
        #expect(stored.map(\.level) == (0..<20).map(Int64.init))
    }

    @Test func theDynamicAPIWorksToo() throws {
        let stack = try Self.stack()
        let ids = try stack.context().batchInsert(entityName: "Reading", from: ["x", "y", "z"]) { object, note in
            try object.setValue(.string(note), forKey: "note")
        }
        let reader = stack.context()
        let stored = try reader.fetch(FetchQuery(Reading.self))
        #expect(stored.map(\.objectID) == ids && stored.map(\.note) == ["x", "y", "z"])
    }

    /// Entities with relationships or uniqueness go through objects: the closure may link
    /// objects, and uniqueness is enforced with the caller's merge policy.
    @Test func relationshipsAndUniquenessGoThroughObjects() throws {
        let stack = try Self.stack()
        let context = stack.context()
        let people = try context.batchInsert(Person.self, from: ["ann", "bob"]) { person, name in
            person.username = name
            for title in 0..<2 {
                let dvd = DVD(context: try #require(person.context))
                dvd.title = "\(name)-\(title)"
                dvd.owner = person
            }
        }
        let check = stack.context()
        let stored = try check.fetch(FetchQuery(Person.self))
        #expect(stored.map(\.objectID) == people && stored.map(\.username) == ["ann", "bob"])
        #expect(stored.map { $0.dvds.map(\.title).sorted() } == [["ann-0", "ann-1"], ["bob-0", "bob-1"]])

        // A duplicate username fails the whole batch under the default merge policy ...
        #expect(throws: CairnError.self) {
            try context.batchInsert(Person.self, from: ["cy", "ann"]) { person, name in person.username = name }
        }
        #expect(try check.count(for: FetchQuery(Person.self)) == 2)
        // ... validateForInsert applies (an empty username) ...
        #expect(throws: CairnError.self) { try context.batchInsert(Person.self, count: 1) { _, _ in } }
        // ... and is an upsert under .objectTrumps: the existing record's ID, the new values.
        context.mergePolicy = .objectTrumps
        let upserted = try context.batchInsert(Person.self, from: [("cy", 30), ("ann", 41)]) { person, row in
            person.username = row.0
            person.age = row.1
        }
        #expect(upserted[1] == people[0])
        let reader = stack.context()
        let after = try reader.fetch(FetchQuery(Person.self))
        #expect(after.map(\.username) == ["ann", "bob", "cy"] && after.map(\.age) == [41, 0, 30])
    }
}
