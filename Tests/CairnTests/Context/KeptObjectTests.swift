import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A reading whose every value decodes in place: a fetch keeps its record undecoded.
final class KeptReading: ManagedObject {
    @Attribute(indexed: true) var key: Int64 = 0
    @Attribute var small: Int16 = 0
    @Attribute var count: Int32 = 0
    @Attribute var level: Double = 0
    @Attribute var ratio: Float = 0
    @Attribute var flag: Bool = false
    @Attribute var when: Date = Date(timeIntervalSinceReferenceDate: 0)
    @Attribute var tag: UUID? = nil
    @Attribute var optional: Int? = nil
    @ToOne(inverse: "gauges") var sensor: KeptSensor?
}

/// A sensor, whose list of readings is not kept (a list decodes into an array).
final class KeptSensor: ManagedObject {
    @Attribute var name: String = ""
    @ToMany(inverse: "sensor") var gauges: [KeptReading]
}

/// Objects whose fetched records are kept undecoded, and decoded on the first read that
/// needs them whole, behave as objects whose records were decoded up front. Two stacks
/// run the same random steps (fetches, reads, writes, saves, rollbacks, undo and redo,
/// refreshes, resets, deletes, inserts, saves from another context, relationship faults
/// firing together, compactions), one
/// keeping records and one decoding every record as before; after every step their
/// objects must show the same state, value for value.
@Suite struct KeptObjectTests {
    static let keys = ["key", "small", "count", "level", "ratio", "flag", "when", "tag", "optional", "sensor"]

    /// One stack: a store on an in-memory file system, a main context and another.
    struct World {
        let model: Model
        let coordinator: Coordinator
        let context: Context
        let other: Context
        var held: [KeptReading] = []
        var sensors: [KeptSensor] = []

        init(keeps: Bool, merges: Bool) throws {
            model = try Model(KeptReading.self, KeptSensor.self)
            coordinator = try Coordinator(path: "/db", schema: model.schema, options: memoryOptions(MemoryFileSystem()))
            context = Context(coordinator: coordinator, model: model)
            other = Context(coordinator: coordinator, model: model)
            for context in [context, other] { context.keptRecords.keeps = keeps }
            context.automaticallyMergesChangesFromParent = merges
        }
    }

    static func randomValue(for key: String, _ random: inout SplitMix64, sensors: [KeptSensor]) -> Value {
        let pick = random.next()
        switch key {
        case "key": return .int64(Int64(pick % 1_000))
        case "small": return .int16(Int16(truncatingIfNeeded: pick))
        case "count": return .int32(Int32(truncatingIfNeeded: pick))
        case "level": return .double([0, -0.0, 1.5, .infinity, Double(pick % 100)][Int(pick % 5)])
        case "ratio": return .float(Float(pick % 1000) / 8)
        case "flag": return .bool(pick % 2 == 0)
        case "when": return .date(Date(timeIntervalSinceReferenceDate: Double(pick % 10_000)))
        case "tag": return pick % 3 == 0 ? .null : .uuid(UUID(uuid: withUnsafeBytes(of: (pick, ~pick)) { $0.load(as: uuid_t.self) }))
        case "optional": return pick % 2 == 0 ? .null : .int64(Int64(pick % 50))
        default: return .null
        }
    }

    /// What a test can see of an object, in a fixed order (reading it fires a fault, in
    /// both stacks alike).
    static func state(_ object: ManagedObject) -> String {
        let before = "fault=\(object.isFault) deleted=\(object.isDeleted) inserted=\(object.isInserted) changes=\(object.hasChanges)"
        guard !object.isDeleted else { return before }
        let values = keys.map { key -> String in
            if key == "sensor" { return "\((object as? KeptReading)?.sensor.map { "\($0.name)" } ?? "-")" }
            return "\(object[key])"
        }
        let changed = object.changedKeys.sorted(), committed = object.committedValuesForChangedKeys
        return before + " \(values) changed=\(changed) committed=\(changed.map { "\(committed[$0] ?? .null)" })"
    }

    @Test(arguments: Seeds.list([1, 2, 3, 4, 5, 6, 7, 8]))
    func keptObjectsBehaveAsDecodedOnes(seed: UInt64) throws {
        var worlds = [try World(keeps: true, merges: seed % 2 == 0), try World(keeps: false, merges: seed % 2 == 0)]
        var random = SplitMix64(seed: seed)
        var nextKey: Int64 = 0
        // Some readings to start with, each on one of three sensors.
        for index in worlds.indices {
            let world = worlds[index]
            let sensors = (0..<3).map { i -> KeptSensor in
                let sensor = KeptSensor(context: world.other)
                sensor.name = "s\(i)"
                return sensor
            }
            for key in 0..<40 {
                let reading = KeptReading(context: world.other)
                reading.key = Int64(key)
                reading.level = Double(key) / 4
                reading.tag = key % 2 == 0 ? UUID(uuid: (UInt8(key), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)) : nil
                reading.sensor = sensors[key % 3]
            }
            try world.other.save()
        }
        nextKey = 40
        // Objects seen holding a kept record after a step, read in place by the comparison.
        var keptObjects = 0
        var log: [String] = []
        for step in 0..<400 {
            let choice = random.next() % 17, pick = random.next(), key = Self.keys[Int(random.next() % UInt64(Self.keys.count))]
            var value = Self.randomValue(for: key, &random, sensors: [])
            let sensorPick = Int(random.next() % 4)
            var outcomes: [String] = []
            for index in worlds.indices {
                var world = worlds[index]
                let context = world.context
                var outcome = ""
                func target() -> KeptReading? { world.held.isEmpty ? nil : world.held[Int(pick % UInt64(world.held.count))] }
                switch choice {
                case 0, 1:
                    // In ID order or sorted by key; every reading, or those an index finds.
                    var request = FetchQuery(KeptReading.self, fetchPredicate: nil, sortKeys: choice == 0 ? [] : [SortKey("key")])
                    if pick % 4 == 1 { request.fetchPredicate = try FetchQuery(KeptReading.self, format: "key >= 10").fetchPredicate }
                    if pick % 3 == 0 { request.fetchBatchSize = 7 }
                    world.held = try context.fetch(request)
                    world.sensors = try context.fetch(FetchQuery(KeptSensor.self, fetchPredicate: nil, sortKeys: [SortKey("name")]))
                    outcome = "\(world.held.count)"
                case 2, 3:
                    if let object = target() { outcome = "\(object[key])" }
                case 4, 5:
                    guard let object = target(), !object.isDeleted else { break }
                    if key == "sensor" {
                        object.sensor = sensorPick < world.sensors.count ? world.sensors[sensorPick] : nil
                    } else {
                        if key == "key" { value = .int64(nextKey) }
                        object[key] = value
                    }
                case 6:
                    do { try context.save(); outcome = "saved" } catch { outcome = "\((error as? CairnError)?.code ?? .io)" }
                case 7: context.rollback()
                case 8: context.undo()
                case 9: context.redo()
                case 10: if let object = target() { context.refresh(object, mergeChanges: pick % 2 == 0) }
                case 11:
                    context.reset()
                    world.held = []
                    world.sensors = []
                case 12: if let object = target() { context.delete(object) }
                case 13:
                    let reading = KeptReading(context: context)
                    reading.key = nextKey
                    reading.level = Double(pick % 7)
                    world.held.append(reading)
                case 14:
                    // Another context changes a reading and saves.
                    let gauges = try world.other.fetch(FetchQuery(KeptReading.self, format: "key == %@", Int(pick % UInt64(nextKey))))
                    if let reading = gauges.first, key != "sensor", key != "key" { reading[key] = value }
                    do { try world.other.save(); outcome = "other saved" } catch {
                        outcome = "other \((error as? CairnError)?.code ?? .io)"
                        world.other.rollback()
                    }
                case 15:
                    // A sensor's readings, faults that fire together (read in one look at the store).
                    if sensorPick < world.sensors.count {
                        outcome = world.sensors[sensorPick].gauges.map { "\($0.key):\($0.count)" }.joined(separator: ",")
                    }
                default:
                    _ = try world.coordinator.compact()
                }
                outcomes.append(outcome + " | " + world.held.map(Self.state).joined(separator: "; "))
                if index == 0 { keptObjects += world.held.count { $0.holdsKeptRecord } }
                worlds[index] = world
            }
            if choice == 4 || choice == 5 || choice == 13 { if key == "key" || choice == 13 { nextKey += 1 } }
            log.append("\(step): \(choice) \(key)")
            guard outcomes[0] == outcomes[1] else {
                Issue.record("seed \(seed), step \(step) (\(choice), \(key)):\nkept:    \(outcomes[0])\ndecoded: \(outcomes[1])\n\(log.suffix(12))")
                return
            }
        }
        // The two stores hold the same records.
        let stored = try worlds.map { world -> [String] in
            let fresh = Context(coordinator: world.coordinator, model: world.model)
            return try fresh.fetch(FetchQuery(KeptReading.self, fetchPredicate: nil, sortKeys: [SortKey("key")])).map(Self.state)
        }
        #expect(stored[0] == stored[1])
        #expect(keptObjects >= 1_000, "\(keptObjects) objects held a kept record")
    }

    /// A fetched object keeps its record undecoded until a value is read that needs it
    /// whole (a write, here); its reads before then, and after its context is gone, read
    /// the record.
    @Test func aFetchedObjectReadsItsKeptRecordUntilWritten() throws {
        let model = try Model(KeptReading.self, KeptSensor.self)
        let coordinator = try Coordinator(path: "/db", schema: model.schema, options: memoryOptions(MemoryFileSystem()))
        do {
            let context = Context(coordinator: coordinator, model: model)
            for key in 0..<3 {
                let reading = KeptReading(context: context)
                reading.key = Int64(key)
                reading.count = Int32(key * 100)
            }
            try context.save()
        }
        func fetched() throws -> [KeptReading] {
            // A context of its own, gone when this returns.
            try Context(coordinator: coordinator, model: model).fetch(FetchQuery(KeptReading.self))
        }
        let readings = try fetched()
        #expect(readings.map(\.isFault) == [true, true, true])
        #expect(readings.map(\.count) == [0, 100, 200])
        #expect(readings.map(\.isFault) == [false, false, false])
        #expect(readings.map(\.holdsKeptRecord) == [true, true, true])

        let context = Context(coordinator: coordinator, model: model)
        // (A predicate on an attribute with no index: tested on each record in place.)
        let reading = try #require(try context.fetch(FetchQuery(KeptReading.self, format: "count == 100")).first)
        #expect(reading.count == 100 && reading.holdsKeptRecord)
        // A write goes over the kept record, which stays undecoded; so does a save.
        reading.count = 7
        reading.ratio = 0.5
        #expect(reading.holdsKeptRecord)
        #expect(reading.count == 7 && reading.key == 1 && reading.ratio == 0.5)
        #expect(reading.changedKeys == ["count", "ratio"] && reading.committedValuesForChangedKeys["count"] == .int32(100))
        context.undo()
        #expect(reading.count == 100 && reading.ratio == 0 && !reading.hasChanges && reading.holdsKeptRecord)
        reading.count = 8
        try context.save()
        #expect(reading.holdsKeptRecord && !reading.hasChanges && reading.count == 8)
        #expect(try fetched().first { $0.key == 1 }?.count == 8)
        // Any use of the values whole decodes the record, with what was written over it.
        reading.small = 3
        #expect(reading.values[1] == .int16(3) && reading.values[2] == .int32(8))
        #expect(!reading.holdsKeptRecord)
        #expect(reading.changedKeys == ["small"])
    }

    /// A stored record with nil for a property that must have a value (written past the
    /// object layer): a kept object that is saved with another value written over it fails
    /// validation as a decoded one does, naming that property; once the value is set, it saves.
    @Test(arguments: [true, false]) func aStoredNilForARequiredPropertyFailsTheSaveKeptOrNot(keeps: Bool) throws {
        let model = try Model(KeptReading.self, KeptSensor.self)
        let coordinator = try Coordinator(path: "/db", schema: model.schema, options: memoryOptions(MemoryFileSystem()))
        let entity = try #require(coordinator.entity(named: "KeptReading"))
        let id = RecordID(entity: entity.number, serial: 1)
        var values = try #require(PropertyLayout.of(KeptReading.self).defaults as [Value]?)
        values[0] = .null  // `key`: an Int64 that must have a value
        var preparer = coordinator.makePreparer()
        _ = try coordinator.store.commit(operations: [try preparer.put(id, values)], durable: true)

        let context = Context(coordinator: coordinator, model: model)
        context.keptRecords.keeps = keeps
        let reading = try #require(try context.fetch(FetchQuery(KeptReading.self)).first)
        reading.count = 5
        #expect(reading.holdsKeptRecord == keeps)
        let error = #expect(throws: CairnError.self) { try context.save() }
        #expect(error?.code == .validation && error?.details.first?.key == "key", "\(String(describing: error))")
        reading.key = 9
        try context.save()
        let stored = try #require(try Context(coordinator: coordinator, model: model).fetch(FetchQuery(KeptReading.self)).first)
        #expect(stored.key == 9 && stored.count == 5)
    }

    /// A sorted fetch of many objects, whose records it copies in their sorted order, finds
    /// the same objects in the same order with the same values as one that decodes every
    /// record; their values are then read, written over and saved as any kept object's.
    @Test func aLongSortedFetchReadsAsADecodedOne() throws {
        let model = try Model(KeptReading.self, KeptSensor.self)
        let coordinator = try Coordinator(path: "/db", schema: model.schema, options: memoryOptions(MemoryFileSystem()))
        var random = SplitMix64(seed: 60)
        do {
            let context = Context(coordinator: coordinator, model: model)
            let sensor = KeptSensor(context: context)
            for key in 0..<3_000 {
                let reading = KeptReading(context: context)
                reading.key = Int64(key)
                reading.count = Int32(random.next() % 500)  // ties, broken by ID
                reading.level = Double(random.next() % 10_000) / 7
                reading.ratio = Float(key % 13)
                reading.flag = key % 3 == 0
                reading.when = Date(timeIntervalSinceReferenceDate: Double(random.next() % 1_000_000))
                reading.tag = key % 4 == 0 ? nil : UUID()
                reading.optional = key % 5 == 0 ? nil : key * 7
                if key % 2 == 0 { reading.sensor = sensor }
            }
            try context.save()
        }
        let query = FetchQuery(KeptReading.self, fetchPredicate: nil, sortKeys: [SortKey("count", ascending: false)])
        func state(_ reading: KeptReading) -> [Value] { Self.keys.map { reading.value(forKey: $0) } }
        let decoding = Context(coordinator: coordinator, model: model)
        decoding.keptRecords.keeps = false
        let expected = try decoding.fetch(query)
        let context = Context(coordinator: coordinator, model: model)
        let readings = try context.fetch(query)
        #expect(readings.count == expected.count && expected.count == 3_000)
        #expect(readings.map(\.objectID) == expected.map(\.objectID))
        #expect(zip(readings.dropFirst(), readings).allSatisfy { later, earlier in
            later.count < earlier.count || (later.count == earlier.count && later.key > earlier.key)
        })
        #expect(readings.allSatisfy { $0.holdsKeptRecord })
        for (reading, other) in zip(readings, expected) where state(reading) != state(other) {
            Issue.record("\(reading.objectID): \(state(reading)) != \(state(other))")
        }
        for reading in readings where reading.key % 10 == 0 { reading.level = -1 }
        try context.save()
        let saved = try Context(coordinator: coordinator, model: model).fetch(query)
        #expect(saved.map { $0.key % 10 == 0 ? $0.level == -1 : $0.level >= 0 }.allSatisfy { $0 })
        #expect(saved.map(\.when) == expected.map(\.when) && saved.map(\.tag) == expected.map(\.tag))
    }
}
