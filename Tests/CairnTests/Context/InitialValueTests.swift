import Foundation
import Synchronization
import Testing
@testable import Cairn
@testable import CairnStorage

/// Initial values of every kind: ones that are new each time (`UUID()`, `Date()`, a
/// random number) and constant ones.
final class Stamped: ManagedObject {
    @Attribute var id: UUID = UUID()
    @Attribute var created: Date = Date()
    @Attribute var roll: Int = Int.random(in: 0..<1_000_000_000)
    @Attribute var count: Int = 5
    @Attribute var note: String? = nil
    @Attribute var fixed: UUID = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
    @Archived var badge: Badge = Badge(serial: UUID(), label: "new")
    @Archived var style: Badge = Badge(serial: nil, label: "plain")

    struct Badge: Codable, Equatable {
        var serial: UUID?
        var label: String
    }
}

/// An initial value that counts its evaluations: each new object should make one, and
/// nothing else should (a fetched object holds its stored value).
final class Counted: ManagedObject {
    static let evaluations = Atomic<Int>(0)
    static func nextSerial() -> Int { evaluations.add(1, ordering: .relaxed).newValue }
    @Attribute var serial: Int = Counted.nextSerial()
    @Attribute var label: String = ""
}

/// An archived initial value that counts its evaluations.
final class CountedArchive: ManagedObject {
    static let evaluations = Atomic<Int>(0)
    static func make() -> [String] {
        evaluations.add(1, ordering: .relaxed)
        return ["new"]
    }
    @Archived var tags: [String] = CountedArchive.make()
}

/// Counts its evaluations, for the test of prototypes built on another thread alone.
final class CountedElsewhere: ManagedObject {
    static let evaluations = Atomic<Int>(0)
    static func next() -> Int { evaluations.add(1, ordering: .relaxed).newValue }
    @Attribute var serial: Int = CountedElsewhere.next()
}

/// A class whose prototype takes a while to build (its init waits), so that another
/// thread makes objects meanwhile.
final class SlowlyBuilt: ManagedObject {
    static let building = Atomic<Bool>(false)
    static let release = Atomic<Bool>(false)
    @Attribute var name: String = ""
    required init() {
        super.init()
        SlowlyBuilt.building.store(true, ordering: .relaxed)
        var waited = 0
        while !SlowlyBuilt.release.load(ordering: .relaxed), waited < 2_000 {
            usleep(1_000)
            waited += 1
        }
    }
}

/// Initial values an object is given: constant ones are the schema's defaults; ones new
/// each time (`UUID()`, `Date()`) are made for each new object, and only for new ones.
@Suite struct InitialValueTests {
    /// An initial value that is new each time it is evaluated is made for each object, as
    /// the declaration reads, and is no default in the schema (a default drawn once per
    /// launch changed the schema's hash at every launch, so every open migrated the store);
    /// a constant one is the schema's default. Batch inserts and reopened stores agree.
    @Test func initialValuesNewEachTimeAreMadeForEachObject() throws {
        let stack = try Stack(model: try Model(Stamped.self))
        let context = stack.context()
        let objects = (0..<50).map { _ in Stamped(context: context) }
        #expect(Set(objects.map(\.id)).count == 50)
        #expect(Set(objects.map(\.roll)).count > 45)
        #expect(Set(objects.map(\.created)).count > 1)
        #expect(objects.allSatisfy { $0.count == 5 && $0.note == nil && $0.fixed.uuidString == "E621E1F8-C36C-495A-93FC-0C247A3E6E5F" })
        let detached = Stamped(), other = Stamped()
        #expect(detached.id != other.id && detached.id != objects[0].id)

        let entity = try #require(stack.model.schema.entity(named: "Stamped"))
        let defaults = Dictionary(uniqueKeysWithValues: entity.attributes.map { ($0.name, $0.defaultValue) })
        #expect(defaults["id"] == .some(nil) && defaults["created"] == .some(nil) && defaults["roll"] == .some(nil))
        #expect(defaults["count"] == .some(.int64(5)))
        #expect(defaults["fixed"] == .some(.uuid(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!)))
        // Archived values too: one holding a new UUID is made per object, a constant one is the default.
        #expect(Set(objects.map { $0.badge.serial }).count == 50 && objects.allSatisfy { $0.badge.label == "new" })
        #expect(defaults["badge"] == .some(nil))
        #expect(objects.allSatisfy { $0.style == Stamped.Badge(serial: nil, label: "plain") })
        if case .some(.some(.archived)) = defaults["style"] {} else { Issue.record("style has no archived default: \(String(describing: defaults["style"]))") }

        let batch = try context.batchInsert(Stamped.self, count: 20) { stamped, index in stamped.count = index }
        try context.save()
        let reopened = try stack.reopened()
        let reader = reopened.context()
        let all = try reader.fetch(FetchQuery(Stamped.self))
        #expect(all.count == 70 && Set(all.map(\.id)).count == 70 && Set(all.map { $0.badge.serial }).count == 70)
        #expect(Set(try batch.map { try (reader.existingObject(with: $0) as? Stamped)?.id }).count == 20)
        #expect(try reader.fetch(FetchQuery(Stamped.self)).map(\.id) == all.map(\.id), "a fetch reads stored values, not new ones")
    }

    /// An initial value made for each object is made once for each new object, when it is
    /// first read, written or inserted, and never for an object that holds a stored record
    /// (a fetched fault, or the parent's copy of a child's insert): `UUID()` made for every
    /// fetched object had made a fetch five times slower, and its value was thrown away.
    /// While another thread builds a prototype, objects made here evaluate no initial
    /// value: the builder's flag is process-wide, and a wrapper had evaluated its value for
    /// a note only the building thread keeps (so `UUID()` ran, and counters counted).
    @Test func aPrototypeBuiltElsewhereMakesNoInitialValuesHere() throws {
        _ = try Model(CountedElsewhere.self)
        let builder = Thread { _ = try? Model(SlowlyBuilt.self) }
        builder.start()
        for _ in 0..<5_000 where !SlowlyBuilt.building.load(ordering: .relaxed) { usleep(1_000) }
        #expect(PrototypeBuilder.isActive)
        let before = CountedElsewhere.evaluations.load(ordering: .relaxed)
        let objects = (0..<10).map { _ in CountedElsewhere() }
        #expect(CountedElsewhere.evaluations.load(ordering: .relaxed) == before, "no value made while another thread builds")
        SlowlyBuilt.release.store(true, ordering: .relaxed)
        #expect(Set(objects.map(\.serial)).count == 10, "each made when read")
    }

    @Test func initialValuesAreMadeOnlyForNewObjects() throws {
        let stack = try Stack(model: try Model(Counted.self))
        let context = stack.context()
        func evaluations() -> Int { Counted.evaluations.load(ordering: .relaxed) }
        let start = evaluations()
        let inserted = (0..<10).map { _ in Counted(context: context) }
        #expect(evaluations() == start + 10)
        #expect(Set(inserted.map(\.serial)).count == 10)

        // A detached object: made when first read, and kept by its insert.
        let detached = Counted()
        let serial = detached.serial
        #expect(evaluations() == start + 11 && detached.serial == serial)
        context.insert(detached)
        #expect(detached.serial == serial && evaluations() == start + 11)
        // Written before its insert: made once, then overwritten; the insert keeps the write.
        let written = Counted()
        written.label = "w"
        context.insert(written)
        #expect(written.label == "w" && evaluations() == start + 12)
        try context.save()

        // A child's insert saved into its parent: the parent's object takes the child's value.
        let child = Context(parent: context)
        let fromChild = Counted(context: child)
        #expect(evaluations() == start + 13)
        try child.save()
        let inParent = try #require(try context.existingObject(Counted.self, with: fromChild.objectID))
        #expect(inParent.serial == fromChild.serial && evaluations() == start + 13)
        try context.save()

        let reopened = try stack.reopened()
        let reader = reopened.context()
        let fetched = try reader.fetch(FetchQuery(Counted.self))
        #expect(fetched.count == 13)
        #expect(Set(fetched.map(\.serial)) == Set((inserted + [detached, written, inParent]).map(\.serial)))
        #expect(evaluations() == start + 13, "fetched objects made initial values they then threw away")
        // A batch insert makes one per record, kept when the closure writes nothing or keeps
        // the object it is given.
        var kept: [Counted] = []
        let batch = try reader.batchInsert(Counted.self, count: 5) { counted, index in
            if index % 2 == 0 { kept.append(counted) }
        }
        #expect(evaluations() == start + 18)
        #expect(Set(try batch.map { try #require(try reader.existingObject(Counted.self, with: $0)).serial }).count == 5)
        // A batch update reads what is stored and makes nothing, even reading first (a made
        // value written over the stored one had changed the record behind the closure's back).
        let before = Dictionary(uniqueKeysWithValues: try reader.fetch(FetchQuery(Counted.self)).map { ($0.objectID, $0.serial) })
        let updated = try reader.batchUpdate(FetchQuery(Counted.self)) { counted in
            if counted.serial >= 0 { counted.label = "u" }
        }
        #expect(updated == 18 && evaluations() == start + 18)
        let checker = reopened.context()
        let after = try checker.fetch(FetchQuery(Counted.self))
        #expect(Dictionary(uniqueKeysWithValues: after.map { ($0.objectID, $0.serial) }) == before)
        #expect(after.allSatisfy { $0.label == "u" })
    }

    /// An archived initial value is evaluated for new objects, never for fetched ones,
    /// which read their stored values.
    @Test func archivedInitialValuesAreNotMadeForFetchedObjects() throws {
        let stack = try Stack(model: try Model(CountedArchive.self))
        let context = stack.context()
        func evaluations() -> Int { CountedArchive.evaluations.load(ordering: .relaxed) }
        for index in 0..<20 { CountedArchive(context: context).tags = ["t\(index)"] }
        try context.save()
        let start = evaluations()
        let reader = stack.context()
        let fetched = try reader.fetch(FetchQuery(CountedArchive.self))
        #expect(Set(fetched.map(\.tags)) == Set((0..<20).map { ["t\($0)"] }))
        #expect(evaluations() == start, "fetched objects evaluated the initial value")
        #expect(CountedArchive().tags == ["new"])
    }
}
