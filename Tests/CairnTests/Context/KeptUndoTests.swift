import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Undo across launches: a context that keeps undo under a name writes its stacks with
/// each save; a context of a later launch that keeps undo under that name undoes and
/// redoes exactly as the first would have, and refuses a group whose objects another
/// writer changed since.
@Suite struct KeptUndoTests {
    static func open(_ fs: MemoryFileSystem) throws -> (Coordinator, Model) {
        let model = try Model(types: [Person.self, DVD.self], entities: [Container.queueEntity])
        return (try Coordinator(path: "/db", schema: model.schema, options: memoryOptions(fs)), model)
    }

    /// What a context sees, as text.
    static func world(_ context: Context) throws -> String {
        let people = try context.fetch(Person.self).map { person in
            "\(person.username):\(person.name ?? "-"):\(person.age):[\(person.dvds.map(\.title).sorted().joined(separator: ","))]"
        }.sorted()
        let dvds = try context.fetch(DVD.self).map { "\($0.title)>\($0.owner?.username ?? "-")" }.sorted()
        return (people + dvds).joined(separator: " ")
    }

    /// Random named undo groups of inserts, changes, owners moved and deletes, saved every
    /// one to three groups; the last group is saved too.
    static func edit(_ context: Context, seed: UInt64, groups: Int) throws {
        var random = ResultsChangeApplyTests.Generator(state: seed)
        var serial = 0
        for index in 0..<groups {
            let people = try context.fetch(Person.self), dvds = try context.fetch(DVD.self)
            try context.undoGroup(named: "step \(index)") {
                serial += 1
                switch Int.random(in: 0..<8, using: &random) {
                case 0...1:
                    let person = Person(context: context)
                    person.username = "p\(serial)"
                    person.age = Int.random(in: 0..<90, using: &random)
                case 2...3 where !people.isEmpty:
                    let person = people.randomElement(using: &random)!
                    person.age = Int.random(in: 0..<90, using: &random)
                    person.name = "n\(serial)"
                case 4 where !people.isEmpty:
                    let dvd = DVD(context: context)
                    dvd.title = "d\(serial)"
                    dvd.owner = people.randomElement(using: &random)!
                case 5 where !dvds.isEmpty && !people.isEmpty:
                    dvds.randomElement(using: &random)!.owner = people.randomElement(using: &random)!
                case 6 where !people.isEmpty:
                    context.delete(people.randomElement(using: &random)!)
                default:
                    let person = Person(context: context)
                    person.username = "p\(serial)"
                }
            }
            if index == groups - 1 || Int.random(in: 0..<3, using: &random) == 0 { try context.save() }
        }
    }

    /// Undoes `undos` groups then redoes `redos`, saving after each, and says what the
    /// context sees after each step.
    static func steps(_ context: Context, undos: Int, redos: Int) throws -> [String] {
        var seen: [String] = []
        for _ in 0..<undos {
            context.undo()
            try context.save()
            seen.append(try world(context))
        }
        for _ in 0..<redos {
            context.redo()
            try context.save()
            seen.append(try world(context))
        }
        return seen
    }

    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func undoAfterARelaunchDoesWhatUndoWouldHaveDone(seed: UInt64) throws {
        // In one launch.
        let (one, model) = try Self.open(MemoryFileSystem())
        let first = Context(coordinator: one, model: model)
        try first.keepUndo(named: "editor")
        try Self.edit(first, seed: seed, groups: 12)
        let before = try Self.world(first)
        let inSession = try Self.steps(first, undos: 14, redos: 9)
        #expect(Set(inSession).count > 8, "the steps change what the context sees")
        try one.close()
        // The same edits, then a relaunch before undoing.
        let fs = MemoryFileSystem()
        var (two, _) = try Self.open(fs)
        let writer = Context(coordinator: two, model: model)
        try writer.keepUndo(named: "editor")
        try Self.edit(writer, seed: seed, groups: 12)
        try two.close()
        (two, _) = try Self.open(fs)
        let later = Context(coordinator: two, model: model)
        try later.keepUndo(named: "editor")
        #expect(try Self.world(later) == before)
        #expect(later.undoManager.undoActionName == "step 11")
        let acrossLaunches = try Self.steps(later, undos: 14, redos: 9)
        #expect(acrossLaunches == inSession)
        #expect(later.undoManager.refusal == nil)
        try two.close()
    }

    @Test func theRedoStackIsKeptToo() throws {
        let fs = MemoryFileSystem()
        var (coordinator, model) = try Self.open(fs)
        var context = Context(coordinator: coordinator, model: model)
        try context.keepUndo(named: "editor")
        let ann = Person(context: context)
        ann.username = "ann"
        try context.save()
        try context.undoGroup(named: "age") { ann.age = 30 }
        try context.save()
        context.undo()
        try context.save()
        #expect(ann.age == 0 && context.undoManager.canRedo)
        try coordinator.close()
        (coordinator, _) = try Self.open(fs)
        context = Context(coordinator: coordinator, model: model)
        try context.keepUndo(named: "editor")
        #expect(context.undoManager.redoActionName == "age")
        context.redo()
        try context.save()
        #expect(try context.fetch(Person.self).map(\.age) == [30])
        try coordinator.close()
    }

    @Test func anotherWritersChangeRefusesTheKeptGroupThatTouchesIt() throws {
        let fs = MemoryFileSystem()
        var (coordinator, model) = try Self.open(fs)
        var context = Context(coordinator: coordinator, model: model)
        try context.keepUndo(named: "editor")
        let ann = Person(context: context), bo = Person(context: context)
        ann.username = "ann"
        bo.username = "bo"
        try context.save()
        try context.undoGroup(named: "bo's age") { bo.age = 20 }
        try context.undoGroup(named: "ann's age") { ann.age = 40 }
        try context.save()
        try coordinator.close()

        (coordinator, _) = try Self.open(fs)
        context = Context(coordinator: coordinator, model: model)
        try context.keepUndo(named: "editor")
        // Another writer changes ann while the app is running again.
        let other = Context(coordinator: coordinator, model: model)
        try #require(try other.fetch(Person.self, where: #Predicate { $0.username == "ann" }).first).name = "Ann"
        try other.save()
        // A change made in this launch undoes as always.
        let bob = try #require(try context.fetch(Person.self, where: #Predicate { $0.username == "bo" }).first)
        try context.undoGroup(named: "rename") { bob.name = "Bob" }
        try context.save()
        context.undo()
        #expect(bob.name == nil && context.undoManager.refusal == nil)
        // The kept group touching ann is refused: nothing changes, the group stays.
        context.undo()
        let refusal = try #require(context.undoManager.refusal)
        #expect(refusal.code == .conflict && refusal.message.contains("ann's age") && refusal.message.contains("another writer"))
        #expect(context.undoManager.undoActionName == "ann's age")
        try context.save()
        #expect(try Self.world(context) == "ann:Ann:40:[] bo:-:20:[]")
        try coordinator.close()
    }

    @Test func aChangeMadeWhileClosedIsSeenAtTheNextLaunch() throws {
        let fs = MemoryFileSystem()
        var (coordinator, model) = try Self.open(fs)
        var context = Context(coordinator: coordinator, model: model)
        try context.keepUndo(named: "editor")
        let ann = Person(context: context)
        ann.username = "ann"
        try context.save()
        try context.undoGroup(named: "age") { ann.age = 40 }
        try context.save()
        // Another writer, with no kept undo, changes ann; then the app closes.
        let other = Context(coordinator: coordinator, model: model)
        try #require(try other.fetch(Person.self).first).age = 41
        try other.save()
        try coordinator.close()
        (coordinator, _) = try Self.open(fs)
        context = Context(coordinator: coordinator, model: model)
        try context.keepUndo(named: "editor")
        context.undo()
        #expect(context.undoManager.refusal?.code == .conflict)
        #expect(try context.fetch(Person.self).map(\.age) == [41])
        try coordinator.close()
    }

    /// A change made between launches stays seen after this launch saves the same object.
    @Test func aSaveHereDoesNotHideAnotherWritersChange() throws {
        let fs = MemoryFileSystem()
        var (coordinator, model) = try Self.open(fs)
        var context = Context(coordinator: coordinator, model: model)
        try context.keepUndo(named: "editor")
        let ann = Person(context: context)
        ann.username = "ann"
        try context.save()
        try context.undoGroup(named: "age") { ann.age = 40 }
        try context.save()
        try coordinator.close()
        (coordinator, _) = try Self.open(fs)
        let other = Context(coordinator: coordinator, model: model)
        try #require(try other.fetch(Person.self).first).name = "Ann"
        try other.save()
        context = Context(coordinator: coordinator, model: model)
        try context.keepUndo(named: "editor")
        let again = try #require(try context.fetch(Person.self).first)
        try context.undoGroup(named: "rename") { again.name = "Annie" }
        try context.save()
        context.undo()
        try context.save()
        #expect(again.name == "Ann" && context.undoManager.refusal == nil)
        context.undo()
        #expect(context.undoManager.refusal?.code == .conflict, "the writer between launches changed ann")
        #expect(again.age == 40)
        context.redo()
        #expect(context.undoManager.refusal == nil, "a refusal is cleared by the next undo or redo")
        try coordinator.close()
    }

    @Test func eachNameKeepsItsOwnStacks() throws {
        let fs = MemoryFileSystem()
        var (coordinator, model) = try Self.open(fs)
        let a = Context(coordinator: coordinator, model: model), b = Context(coordinator: coordinator, model: model)
        try a.keepUndo(named: "a")
        try b.keepUndo(named: "b")
        try a.undoGroup(named: "ann") { Person(context: a).username = "ann" }
        try a.save()
        try b.undoGroup(named: "bo") { Person(context: b).username = "bo" }
        try b.save()
        try coordinator.close()
        (coordinator, _) = try Self.open(fs)
        let again = Context(coordinator: coordinator, model: model)
        try again.keepUndo(named: "a")
        #expect(again.undoManager.undoActionName == "ann")
        let fresh = Context(coordinator: coordinator, model: model)
        try fresh.keepUndo(named: "c")
        #expect(!fresh.undoManager.canUndo)
        try coordinator.close()
    }

    @Test func refusals() throws {
        let (coordinator, model) = try Self.open(MemoryFileSystem())
        let context = Context(coordinator: coordinator, model: model)
        Person(context: context).username = "pending"
        #expect(throws: CairnError.self) { try context.keepUndo(named: "x") }
        let child = Context(parent: context)
        #expect(throws: CairnError.self) { try child.keepUndo(named: "x") }
        let plain = try Stack()
        #expect(throws: CairnError.self) { try plain.context().keepUndo(named: "x") }
        // Damaged kept stacks are reported, not used.
        let entity = try #require(coordinator.entity(named: Container.queueEntity.name))
        let id = try coordinator.allocateID(entity: entity.number)
        try coordinator.commitQueue([.put(id, [.string(KeptUndoCoding.queuePrefix + "bad"), .int64(0), .archived(Data([1, 9, 9]))])],
                                    durability: .durable)
        let fresh = Context(coordinator: coordinator, model: model)
        let error = #expect(throws: CairnError.self) { try fresh.keepUndo(named: "bad") }
        #expect(error?.code == .corrupt && error?.message.contains("'bad'") == true)
        // Stacks that decode but do not fit the entity (a whole state of one value).
        let ann = Person(context: fresh)
        ann.username = "ann"
        try fresh.save()
        let misfit = KeptUndoCoding.Stacks(expected: [:], undo: [KeptUndoCoding.Group(name: "x", records: [
            (ann.objectID.recordID, .whole(values: [.string("ann")], exists: true, isRegistered: true)),
        ])], redo: [])
        let other = try coordinator.allocateID(entity: entity.number)
        try coordinator.commitQueue([.put(other, [.string(KeptUndoCoding.queuePrefix + "misfit"), .int64(0),
                                                  .archived(Data(KeptUndoCoding.encode(misfit)))])], durability: .durable)
        let misfitError = #expect(throws: CairnError.self) { try Self.stack(coordinator, model).keepUndo(named: "misfit") }
        #expect(misfitError?.code == .corrupt, "\(String(describing: misfitError))")
        let container = try Container(entities: [Person.self], storage: .inMemory)
        #expect(throws: CairnError.self) { _ = try container.queue(named: "\u{0}undo:x", of: String.self) }
        try coordinator.close()
    }

    static func stack(_ coordinator: Coordinator, _ model: Model) -> Context { Context(coordinator: coordinator, model: model) }

    @Test func theStacksRoundTrip() throws {
        let stacks = KeptUndoCoding.Stacks(
            expected: [RecordID(entity: 1, serial: 2): 77, RecordID(entity: 1, serial: 3): 0],
            undo: [KeptUndoCoding.Group(name: "a", records: [
                (RecordID(entity: 1, serial: 2), .value(slot: 1, .string("x"))),
                (RecordID(entity: 1, serial: 3), .whole(values: [.int64(1), .null], exists: true, isRegistered: false)),
            ])],
            redo: [KeptUndoCoding.Group(name: nil, records: [
                (RecordID(entity: 1, serial: 2), .inserted(slot: 3, raw: 9, index: 0)),
                (RecordID(entity: 1, serial: 2), .removed(slot: 3, raw: 8, index: 2)),
            ])])
        let bytes = KeptUndoCoding.encode(stacks)
        #expect(try KeptUndoCoding.decode(bytes) == stacks)
        if ProcessInfo.processInfo.environment["CAIRN_WRITE_SEEDS"] == "1" {
            try Data(bytes).write(to: URL(fileURLWithPath: FuzzReplayTests.fuzzDirectory + "/corpus/value/seed-kept-undo"))
        }
        for cut in [1, bytes.count / 2, bytes.count - 1] {
            #expect(throws: CairnError.self) { _ = try KeptUndoCoding.decode(Array(bytes.prefix(cut))) }
        }
        #expect(throws: CairnError.self) { _ = try KeptUndoCoding.decode(bytes + [0]) }
    }
}
