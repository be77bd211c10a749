import Foundation
import Testing
import CairnCollections
@testable import Cairn
@testable import CairnStorage

/// An entity a batch operation can change without objects: no relationships, nothing
/// pointing at it, no uniqueness constraint.
final class Reading: ManagedObject {
    @Attribute(indexed: true) var sensor: Int = 0
    @Attribute var level: Int64 = 0
    @Attribute var note: String = ""
    @Attribute var checked: Bool = false

    override func validateForUpdate() throws {
        if note == "forbidden" { throw CairnError(.validation, "Reading \(objectID.recordID): note must not be 'forbidden'") }
    }
    override func validateForInsert() throws { try validateForUpdate() }
}

/// Batch updates and deletes (`Context.batchUpdate`, `Context.batchDelete`): each answer
/// is compared with the same change made through objects, record by record.
@Suite struct BatchTests {
    typealias Stored = (sensor: Int, level: Int64, note: String)

    /// A store of `count` readings, the last `count / 2` of them only in the log (the rest
    /// in a snapshot, so that scans are split over threads), and the expected readings.
    static func readings(count: Int = 400, seed: UInt64) throws -> (Stack, [RecordID: Stored]) {
        let stack = try Stack(model: try Model(Reading.self, Person.self, DVD.self, Shelf.self, Box.self))
        var random = SplitMix64(seed: seed)
        var expected: [RecordID: Stored] = [:]
        for half in 0..<2 {
            let context = stack.context()
            for _ in 0..<(count / 2) {
                let reading = Reading(context: context)
                reading.sensor = Int(random.next() % 12)
                reading.level = Int64(random.next() % 200) - 100
                reading.note = ["", "a", "ab", "b", "long note"][Int(random.next() % 5)]
                expected[reading.objectID.recordID] = (reading.sensor, reading.level, reading.note)
            }
            try context.save()
            if half == 0 { try stack.coordinator.store.compact() }
        }
        return (stack, expected)
    }

    /// The stored readings, by ID.
    static func stored(_ stack: Stack) throws -> [RecordID: Stored] {
        var result: [RecordID: Stored] = [:]
        let context = stack.context()  // (kept: a fault of a freed context cannot load)
        for reading in try context.fetch(FetchQuery(Reading.self)) {
            result[reading.objectID.recordID] = (reading.sensor, reading.level, reading.note)
        }
        return result
    }

    /// Predicate `which` as a string and as a test of a stored reading.
    static func predicate(_ which: Int) -> (String, (Stored) -> Bool) {
        switch which {
        case 0: return ("sensor == 3", { $0.sensor == 3 })  // by the index
        case 1: return ("level < 10 AND level >= -40", { $0.level < 10 && $0.level >= -40 })  // a filter on stored bodies
        case 2: return ("note BEGINSWITH 'a'", { $0.note.hasPrefix("a") })  // decoded and evaluated
        default: return ("TRUEPREDICATE", { _ in true })
        }
    }

    /// Predicate `which` (as a string and as a test), a store of readings, a context that
    /// splits scans over 4 threads, and a request with the predicate.
    static func `case`(_ which: Int, seed: UInt64) throws
        -> (String, (Stored) -> Bool, Stack, [RecordID: Stored], Context, FetchQuery<Reading>) {
        let (format, matches) = predicate(which)
        let (stack, before) = try readings(seed: seed)
        let context = stack.context()
        context.scanSplit = (threads: 4, minimumPerRun: 20)
        let request = format == "TRUEPREDICATE" ? FetchQuery(Reading.self) : try FetchQuery(Reading.self, format: format)
        return (format, matches, stack, before, context, request)
    }

    @Test(arguments: 0..<4)
    func batchUpdateChangesWhatALoopOverObjectsWould(_ which: Int) throws {
        let (format, matches, stack, before, context, request) = try Self.case(which, seed: UInt64(which + 1))
        var holders = Set<ObjectIdentifier>()
        let changed = try context.batchUpdate(request) { reading in
            holders.insert(ObjectIdentifier(reading))
            // Even levels only: a record left as it was is not rewritten, nor counted.
            if reading.level % 2 == 0 { reading.level += 1000 }
        }
        var expected = before
        for (id, reading) in before where matches(reading) && reading.level % 2 == 0 { expected[id]!.level += 1000 }
        let after = try Self.stored(stack)
        #expect(after.count == expected.count)
        for (id, reading) in expected {
            #expect(after[id]?.level == reading.level, "\(id) after '\(format)'")
            #expect(after[id]?.sensor == reading.sensor && after[id]?.note == reading.note)
        }
        #expect(changed == before.filter { matches($0.value) && $0.value.level % 2 == 0 }.count)
        #expect(changed > 0)
        // No object per record: one holds them all in turn.
        #expect(holders.count == 1)
        // And it lasts: the store reopens with the batch's values.
        let reopened = try stack.reopened()
        #expect(try Self.stored(reopened).mapValues(\.level) == expected.mapValues(\.level))
    }

    @Test(arguments: 0..<4)
    func batchDeleteDeletesWhatALoopOverObjectsWould(_ which: Int) throws {
        let (_, matches, stack, before, context, request) = try Self.case(which, seed: UInt64(which + 11))
        let deleted = try context.batchDelete(request)
        let expected = before.filter { !matches($0.value) }
        #expect(deleted == before.count - expected.count)
        #expect(deleted > 0)
        #expect(Set(try Self.stored(stack).keys) == Set(expected.keys))
        #expect(Set(try Self.stored(try stack.reopened()).keys) == Set(expected.keys))
    }

    @Test func theCallingContextAndOthersTakeInTheBatch() throws {
        let (stack, _) = try Self.readings(count: 60, seed: 3)
        let context = stack.context(), other = stack.context()
        var heard: [ChangeSet] = []
        other.onExternalChanges = { heard.append($0) }
        let readings = try context.fetch(FetchQuery(Reading.self, format: "sensor == 5"))
        try #require(readings.count >= 3)
        let (clean, edited, untouched) = (readings[0], readings[1], readings[2])
        let cleanLevel = clean.level, otherCopy = try #require(try other.existingObject(Reading.self, with: clean.objectID))
        // (`untouched` stays the fault the fetch made, holding the row it read.)
        let untouchedLevel = try #require(try other.existingObject(Reading.self, with: untouched.objectID)).level
        let editedLevel = edited.level
        edited.note = "mine"
        try context.batchUpdate(try FetchQuery(Reading.self, format: "sensor == 5")) { $0.level += 1 }
        // The calling context refreshed its unchanged object and kept its unsaved change;
        // a fault drops the row its fetch read, and reads the batch's.
        #expect(clean.level == cleanLevel + 1)
        #expect(untouched.isFault && untouched.level == untouchedLevel + 1)
        #expect(edited.note == "mine" && edited.hasChanges)
        // The edited object took the batch's level too (an attribute it did not change), and
        // stands on the batch's version: saving its change is no conflict.
        #expect(edited.level == editedLevel + 1)
        try context.save()
        // Another context hears of the batch as of any save, with the changed keys.
        _ = try other.fetch(FetchQuery(Reading.self, format: "sensor == 99"))
        #expect(otherCopy.level == cleanLevel + 1)
        #expect(heard.count == 2 && heard[0].updated[clean.objectID] == ["level"] && heard[1].updated[edited.objectID] == ["note"])

        // A batch delete: the calling context forgets its deleted objects.
        let doomed = try #require(try context.fetch(FetchQuery(Reading.self, format: "sensor == 7")).first)
        let count = try context.batchDelete(try FetchQuery(Reading.self, format: "sensor == 7"))
        #expect(count > 0)
        #expect(doomed.context == nil && !doomed.isDeleted && !doomed.isInserted)
        #expect(try context.count(for: try FetchQuery(Reading.self, format: "sensor == 7")) == 0)
        _ = try other.fetch(FetchQuery(Reading.self, format: "sensor == 99"))
        #expect(heard.count == 3 && heard[2].deleted.contains(doomed.objectID))
    }

    @Test func aBatchThatFailsChangesNothing() throws {
        let (stack, before) = try Self.readings(count: 80, seed: 4)
        let context = stack.context()
        // validateForUpdate refuses one record: no record is changed.
        var seen = 0
        #expect(throws: CairnError.self) {
            try context.batchUpdate(FetchQuery(Reading.self)) { reading in
                seen += 1
                reading.level = 7
                if seen == 50 { reading.note = "forbidden" }
            }
        }
        #expect(try Self.stored(stack).mapValues(\.level) == before.mapValues(\.level))
        // The object handed out may not be inserted into a context: it stands for a stored
        // record, and the insert is refused.
        let thief = stack.context()
        var offered = 0
        try context.batchUpdate(FetchQuery(Reading.self)) { reading in
            if reading.note == "ab" { thief.insert(reading); offered += 1 }
        }
        #expect(offered > 0)
        let error = #expect(throws: CairnError.self) { try thief.save() }
        #expect(error?.code == .invalidArgument)
        #expect(try Self.stored(stack).mapValues(\.level) == before.mapValues(\.level))
        // Refused requests: a window, and a child context.
        var limited = FetchQuery(Reading.self)
        limited.fetchLimit = 3
        #expect(throws: CairnError.self) { try context.batchDelete(limited) }
        #expect(throws: CairnError.self) { try Context(parent: context).batchDelete(FetchQuery(Reading.self)) }
        #expect(try Self.stored(stack).count == before.count)
    }

    @Test func aKeptObjectIsReplacedForTheNextRecord() throws {
        let (stack, before) = try Self.readings(count: 30, seed: 5)
        var kept: [Reading] = []
        let changed = try stack.context().batchUpdate(FetchQuery(Reading.self)) { reading in
            reading.checked = true
            kept.append(reading)
        }
        #expect(changed == before.count)
        #expect(Set(kept.map(ObjectIdentifier.init)).count == before.count)
        // Kept also when the closure leaves its record as it was (nothing written for it).
        var keptUnchanged: [Reading] = []
        let again = try stack.context().batchUpdate(FetchQuery(Reading.self)) { reading in
            if reading.sensor % 2 == 0 { reading.checked = false }
            keptUnchanged.append(reading)
        }
        #expect(again == before.values.filter { $0.sensor % 2 == 0 }.count)
        #expect(Set(keptUnchanged.map(ObjectIdentifier.init)).count == before.count)
        for reading in keptUnchanged { #expect(reading.sensor == before[reading.objectID.recordID]?.sensor) }
        #expect(Set(kept.map(\.objectID.recordID)) == Set(before.keys))
        for reading in kept { #expect(reading.level == before[reading.objectID.recordID]?.level && reading.checked) }
    }

    @Test func aConcurrentSaveMakesTheBatchStartOver() throws {
        let (stack, before) = try Self.readings(count: 40, seed: 6)
        let context = stack.context()
        var calls = 0, interfered = false
        let target = try #require(before.keys.min())
        try context.batchUpdate(FetchQuery(Reading.self)) { reading in
            calls += 1
            if !interfered {
                // Another context changes this very record after the batch read it.
                interfered = true
                let rival = stack.context()
                let copy = try #require(try rival.existingObject(Reading.self, with: reading.objectID))
                copy.level = 5000
                try rival.save()
            }
            reading.level += 1
        }
        #expect(calls == before.count * 2)
        let after = try Self.stored(stack)
        #expect(after[target]?.level == 5001)
        for (id, reading) in before where id != target { #expect(after[id]?.level == reading.level + 1) }
    }

    @Test func theDynamicAPIWorksToo() throws {
        let (stack, before) = try Self.readings(count: 30, seed: 7)
        let changed = try stack.context().batchUpdate(FetchQuery<ManagedObject>(entityName: "Reading")) { object in
            try object.setValue(.int64(-1), forKey: "level")
        }
        #expect(changed == before.count)
        #expect(try Self.stored(stack).values.allSatisfy { $0.level == -1 })
    }

    /// Entities with relationships go through objects: delete rules apply, as in a save.
    @Test func relationshipsGoThroughObjectsWithTheirDeleteRules() throws {
        let stack = try Stack(model: try Model(Reading.self, Person.self, DVD.self, Shelf.self, Box.self))
        let setup = stack.context()
        for index in 0..<6 {
            let person = Person(context: setup)
            person.username = "p\(index)"
            person.age = index * 10
            for title in 0..<3 {
                let dvd = DVD(context: setup)
                dvd.title = "\(index)-\(title)"
                dvd.owner = person
            }
        }
        let shelf = Shelf(context: setup)
        shelf.label = "full"
        Box(context: setup).shelf = shelf
        try setup.save()

        let context = stack.context()
        // Cascade: the old people's DVDs go with them.
        let deleted = try context.batchDelete(try FetchQuery(Person.self, format: "age >= 30"))
        #expect(deleted == 3)
        let check = stack.context()
        #expect(try check.fetch(FetchQuery(Person.self)).map(\.age).sorted() == [0, 10, 20])
        #expect(try check.fetch(FetchQuery(DVD.self)).count == 9)
        #expect(try check.fetch(FetchQuery(DVD.self)).allSatisfy { ($0.owner?.age ?? 99) < 30 })
        // Nullify, through objects: an update of the to-one side.
        let moved = try context.batchUpdate(try FetchQuery(DVD.self, format: "title BEGINSWITH '0-'")) { $0.owner = nil }
        #expect(moved == 3)
        #expect(try stack.context().fetch(FetchQuery(Person.self, format: "age == 0")).first?.dvds.isEmpty == true)
        // Deny: the shelf that holds a box is not deleted, and nothing is.
        #expect(throws: CairnError.self) { try context.batchDelete(FetchQuery(Shelf.self)) }
        #expect(try stack.context().fetch(FetchQuery(Shelf.self)).count == 1)
    }
}

/// An entity whose records a fetch keeps undecoded (numbers and a flag only).
final class BatchGauge: ManagedObject {
    @Attribute(indexed: true) var sensor: Int = 0
    @Attribute var level: Int64 = 0
    @Attribute var ratio: Double = 0
    @Attribute var checked: Bool = false
}

@Suite struct BatchUpdateSlotTests {
    /// Consecutive records get changes to different slots (and some none): what one
    /// record's change wrote must not reach the next, which the one holder holds in turn
    /// (decoded into it: a holder that kept each record, with the change written over it,
    /// measured slower).
    @Test(arguments: 0..<3) func aBatchUpdateOverKeptRecordsChangesWhatObjectsWould(seed: UInt64) throws {
        let stack = try Stack(model: try Model(BatchGauge.self))
        var random = SplitMix64(seed: seed)
        var expected: [RecordID: (Int, Int64, Double, Bool)] = [:]
        for half in 0..<2 {
            let context = stack.context()
            for _ in 0..<150 {
                let gauge = BatchGauge(context: context)
                gauge.sensor = Int(random.next() % 6)
                gauge.level = Int64(random.next() % 100)
                gauge.ratio = Double(random.next() % 8) / 4
                expected[gauge.objectID.recordID] = (gauge.sensor, gauge.level, gauge.ratio, false)
            }
            try context.save()
            if half == 0 { _ = try stack.coordinator.compact() }
        }
        func change(_ level: Int64, _ ratio: Double, _ checked: Bool) -> (Int64, Double, Bool) {
            switch level % 3 {
            case 0: return (level + 1000, ratio, checked)
            case 1: return (level, ratio + 0.5, !checked)
            default: return (level, ratio, checked)  // left as it was: not written
            }
        }
        let context = stack.context()
        let request = seed == 0 ? FetchQuery(BatchGauge.self) : try FetchQuery(BatchGauge.self, format: "sensor == %@", Int(seed))
        var holders = Set<ObjectIdentifier>()
        let changed = try context.batchUpdate(request) { gauge in
            holders.insert(ObjectIdentifier(gauge))
            (gauge.level, gauge.ratio, gauge.checked) = change(gauge.level, gauge.ratio, gauge.checked)
        }
        #expect(holders.count == 1, "one object holds each record in turn")
        var count = 0
        for (id, old) in expected where seed == 0 || old.0 == Int(seed) {
            let new = change(old.1, old.2, old.3)
            if old.1 % 3 != 2 { count += 1 }
            expected[id] = (old.0, new.0, new.1, new.2)
        }
        #expect(changed == count && count > 0)
        for reader in [stack.context(), try stack.reopened().context()] {
            let stored = try reader.fetch(FetchQuery(BatchGauge.self))
            #expect(stored.count == expected.count)
            for gauge in stored {
                let want = try #require(expected[gauge.objectID.recordID])
                #expect(gauge.sensor == want.0 && gauge.level == want.1 && gauge.ratio == want.2 && gauge.checked == want.3,
                        "\(gauge.objectID)")
            }
        }
    }
}

/// Copies its level into `seen` when validated for an update: a hook that writes.
final class Audited: ManagedObject {
    @Attribute var level: Int64 = 0
    @Attribute var seen: Int64 = 0

    override func validateForUpdate() throws { if seen != level { seen = level } }
}

extension BatchTests {
    /// A batch update whose validation hook writes another property stores that write too,
    /// and names both keys; a record whose change the hook undoes is not written.
    @Test func aBatchUpdateStoresAndNamesWhatAValidationHookWrote() throws {
        let stack = try Stack(model: try Model(Audited.self))
        let context = stack.context()
        for level in 0..<6 {
            let audited = Audited(context: context)
            audited.level = Int64(level)
            audited.seen = Int64(level)
        }
        try context.save()
        let heard = Protected<[ChangeSet]>([])
        stack.coordinator.addObserver { changeSet in heard.withLock { $0.append(changeSet) } }
        // Even levels go up by one (the hook then copies them); odd ones get `seen` changed,
        // which the hook puts back: nothing is left to write.
        let changed = try stack.context().batchUpdate(FetchQuery(Audited.self)) { audited in
            if audited.level % 2 == 0 { audited.level += 1 } else { audited.seen = 100 }
        }
        #expect(changed == 3)
        let stored = try stack.context().fetch(FetchQuery(Audited.self))
        #expect(stored.map(\.level) == [1, 1, 3, 3, 5, 5] && stored.map(\.seen) == stored.map(\.level))
        let updated = try #require(heard.withLock { $0 }.last).updated
        #expect(Set(updated.keys) == Set(stored.filter { $0.objectID.recordID.serial % 2 == 1 }.map(\.objectID)))
        #expect(updated.values.allSatisfy { $0 == ["level", "seen"] }, "\(updated)")
    }
}
