import Dispatch
import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Every option a wrapper takes, to check that the layout sees each one.
final class Annotated: ManagedObject {
    @Attribute(indexed: true, renamingIdentifier: "oldCode") var code: Int64 = 3
    @Attribute var plain: String = "p"
    @ToOne(inverse: "annotated", deleteRule: .deny, optional: false, renamingIdentifier: "oldOwner") var owner: AnnotatedOwner?
    @ToMany(deleteRule: .cascade, renamingIdentifier: "oldParts") var parts: [AnnotatedOwner]
}

/// Properties whose declaration sites differ in one part only.
final class Sited: ManagedObject {
    @Attribute var a: Int64 = 1; @Attribute var b: Int64 = 2
    @Attribute(file: "One.swift", line: 7, column: 5) var c: Int64 = 3
    @Attribute(file: "Two.swift", line: 7, column: 5) var d: Int64 = 4
    @Attribute(file: "Two.swift", line: 8, column: 5) var e: Int64 = 5
    // The last column and line a site keeps apart from the one before.
    @Attribute(file: "Two.swift", line: 8, column: 4_094) var f: Int64 = 6
    @Attribute(file: "Two.swift", line: 8, column: 4_095) var g: Int64 = 7
    @Attribute(file: "Two.swift", line: 1_048_574, column: 5) var h: Int64 = 8
    @Attribute(file: "Two.swift", line: 1_048_575, column: 5) var i: Int64 = 9
}

/// Two properties whose sites Cairn keeps as one: columns past 4,095 are held at 4,095.
final class Clashing: ManagedObject {
    @Attribute(file: "Far.swift", line: 3, column: 4_096) var first: Int64 = 0
    @Attribute(file: "Far.swift", line: 3, column: 5_000) var second: Int64 = 0
}

/// Reads its own attributes in `init`: while it is the prototype its layout is built
/// from, it has no slots yet, and must read the defaults its wrappers declared.
final class SelfReading: ManagedObject {
    static let seenInInit = Locked<[String]>([])
    @Attribute var start: Int64 = 42
    @Attribute var label: String = "seed"

    required init() {
        super.init()
        let seen = "\(start) \(label)"
        Self.seenInInit.withLock { $0.append(seen) }
    }
}

final class AnnotatedOwner: ManagedObject {
    @ToMany(inverse: "owner") var annotated: [Annotated]
}

@Suite struct ModelTests {
    @Test func everyWrapperOptionReachesTheEntityThoughObjectsDoNotStoreIt() throws {
        // Built on several threads at once: declarations noted by one prototype must not be
        // lost or mixed up with another's.
        let results = Locked<[EntityDescription]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            if let model = try? Model(Annotated.self, AnnotatedOwner.self), let entity = model.schema.entity(named: "Annotated") {
                results.withLock { $0.append(entity) }
            }
        }
        #expect(results.value.count == 4)
        for entity in results.value {
            #expect(entity.attributes.map(\.isIndexed) == [true, false])
            #expect(entity.attributes.map(\.renamingIdentifier) == ["oldCode", nil])
            #expect(entity.attributes.map(\.defaultValue) == [.int64(3), .string("p")])
            let owner = entity.relationships[0], parts = entity.relationships[1]
            #expect(owner.inverse == "annotated" && owner.deleteRule == .deny && !owner.isOptional && owner.renamingIdentifier == "oldOwner")
            #expect(parts.inverse == nil && parts.deleteRule == .cascade && parts.isToMany && parts.renamingIdentifier == "oldParts")
        }
        // What every object carries per property: where it was declared, in one word.
        #expect(MemoryLayout<Attribute<Int64>>.size == 8 && MemoryLayout<Attribute<String>>.size == 8)
        #expect(MemoryLayout<ToOne<AnnotatedOwner>>.size == 8 && MemoryLayout<ToMany<AnnotatedOwner>>.size == 8)
    }

    @Test func propertiesAreToldApartBySiteAloneFileLineAndColumn() throws {
        // Two on one line (told apart by column), and two whose sites differ only in the
        // file or only in the line: each must reach its own value.
        let model = try Model(Sited.self)
        let entity = try #require(model.schema.entity(named: "Sited"))
        #expect(entity.attributes.map(\.name) == ["a", "b", "c", "d", "e", "f", "g", "h", "i"])
        #expect(entity.attributes.map(\.defaultValue) == (1...9).map { .int64($0) })
        let object = Sited()
        #expect([object.a, object.b, object.c, object.d, object.e, object.f, object.g, object.h, object.i] == Array(1...9))
        object.a = 10; object.b = 20; object.c = 30; object.d = 40; object.e = 50
        object.f = 60; object.g = 70; object.h = 80; object.i = 90
        #expect([object.a, object.b, object.c, object.d, object.e, object.f, object.g, object.h, object.i]
                == [10, 20, 30, 40, 50, 60, 70, 80, 90])
        #expect(object.values == [10, 20, 30, 40, 50, 60, 70, 80, 90].map { .int64($0) })
    }

    @Test func propertiesASiteCannotTellApartAreRefusedNotConfused() throws {
        // Both columns are past what a site keeps: one property would read the other's
        // value, so the model must refuse the class, naming both.
        do {
            _ = try Model(Clashing.self)
            Issue.record("a model of a class with two properties at one site was made")
        } catch let error as CairnError {
            #expect(error.code == .invalidArgument)
            #expect(error.message.contains("first") && error.message.contains("second"), "\(error.message)")
        }
    }

    @Test func aPrototypeReadsTheDefaultsItsWrappersDeclared() throws {
        // The layout is built from a prototype (the first instance made): what its init
        // reads comes from the declarations its wrappers noted. Later objects read the
        // layout's values.
        let model = try Model(SelfReading.self)
        #expect(model.schema.entity(named: "SelfReading")?.attributes.map(\.defaultValue) == [.int64(42), .string("seed")])
        let later = SelfReading()
        #expect(later.start == 42 && later.label == "seed")
        #expect(SelfReading.seenInInit.value == ["42 seed", "42 seed"])
    }

    @Test func aLayoutFindsEverySlotAsASearchWould() {
        // The line table must give what a search of every site gives: for sites alone on
        // a line, sharing one (several files, several columns), lines far apart (no
        // table), and sites that are not in the layout at all.
        var random = SplitMix64(seed: 11)
        let files: [StaticString] = ["A.swift", "B.swift", "C.swift"]
        for round in 0..<200 {
            let spread = round % 4 == 0 ? 2_000 : 40
            var sites: [DeclarationSite] = []
            for _ in 0..<Int(random.next() % 12) {
                let site = DeclarationSite(file: files[Int(random.next() % 3)], line: UInt(1 + random.next() % UInt64(spread)),
                                           column: UInt(1 + random.next() % 3))
                if !sites.contains(site) { sites.append(site) }
            }
            let slots = Dictionary(uniqueKeysWithValues: sites.enumerated().map { ($1, $0) })
            let layout = PropertyLayout(entity: EntityDescription(name: "E", number: 0), slots: slots)
            var wrong: [DeclarationSite] = []
            for line in 0...UInt(spread + 2) {
                for file in files {
                    for column in 1...UInt(3) {
                        let site = DeclarationSite(file: file, line: line, column: column)
                        if layout.slot(for: site) != (sites.firstIndex(of: site) ?? -1) { wrong.append(site) }
                    }
                }
            }
            #expect(wrong.count == 0, "round \(round), first \(String(describing: wrong.first))")
        }
    }

    @Test func entitiesAreDerivedFromClasses() throws {
        let model = try Stack.model()
        let person = try #require(model.schema.entity(named: "Person"))
        #expect(person.number == 1)
        #expect(person.attributes.map(\.name) == ["username", "name", "age"])
        #expect(person.attributes.map(\.type) == [.string, .string, .int64])
        #expect(person.attributes.map(\.isOptional) == [false, true, false])
        #expect(person.attributes[0].defaultValue == .string(""))
        #expect(person.relationships.map(\.name) == ["dvds", "borrowed"])
        #expect(person.relationships[0].deleteRule == .cascade && person.relationships[0].isToMany)
        #expect(person.uniqueness == [["username"]])
        let box = try #require(model.schema.entity(named: "Box"))
        #expect(box.attributes.map(\.type) == [.int16, .binary, .archived])
    }

    @Test func aChangedModelIsRefused() throws {
        let stack = try Stack()
        try stack.coordinator.close()
        var schema = stack.model.schema
        schema.entities[0].attributes.append(AttributeDescription(name: "email", type: .string, isOptional: true))
        #expect { try Coordinator(path: "/db", schema: schema, options: memoryOptions(stack.fs), migration: .refuse) } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .schemaMismatch && error.message.contains("~Person")
        }
        // Reordering classes keeps the stored numbers.
        let reordered = try Model(Box.self, Shelf.self, DVD.self, Person.self)
        let coordinator = try Coordinator(path: "/db", schema: reordered.schema, options: memoryOptions(stack.fs), migration: .refuse)
        #expect(coordinator.entity(named: "Person")?.number == 1)
        try coordinator.close()
        // By default the same change migrates.
        let migrated = try Coordinator(path: "/db", schema: schema, options: memoryOptions(stack.fs))
        #expect(migrated.entity(named: "Person")?.attributes.last?.name == "email")
        try migrated.close()
    }
}

@Suite struct ContextBasicsTests {
    /// An object whose context is gone belongs to no context, and not to a new one made
    /// where the old one was in memory (an object knows its context by a number that is
    /// never reused, not by an address): each new context takes it as one of no context's,
    /// inserts it, and its fetches find it among their changed objects.
    @Test func anObjectOutlivingItsContextBelongsToNoNewOne() throws {
        let stack = try Stack()
        let person = Person()
        person.username = "p"
        for round in 0..<50 {
            do {
                let context = stack.context()
                context.insert(person)
                #expect(person.context === context)
            }
            #expect(person.context == nil, "round \(round): the context is gone")
            let next = stack.context()
            #expect(!person.belongs(to: next), "round \(round)")
            next.insert(person)
            #expect(person.context === next && person.belongs(to: next), "round \(round)")
            #expect(try next.fetch(FetchQuery(Person.self, format: "username == 'p'")) == [person], "round \(round)")
        }
    }

    @Test func insertSaveAndReadBackAcrossAReopen() throws {
        var stack = try Stack()
        let context = stack.context()
        let alice = Person(context: context)
        alice.username = "alice"
        alice.name = "Alice"
        alice.age = 31
        let dvd = DVD(context: context)
        dvd.title = "Alien"
        dvd.purchaseDate = Date(timeIntervalSince1970: 1_000_000)
        dvd.owner = alice
        #expect(alice.dvds == [dvd], "inverse set on the other side")
        #expect(context.hasChanges)
        #expect(context.insertedObjects.count == 2)
        try context.save()
        #expect(!context.hasChanges)
        let aliceID = alice.objectID, dvdID = dvd.objectID

        stack = try stack.reopened()
        let fresh = stack.context()
        let person = try #require(try fresh.existingObject(Person.self, with: aliceID))
        #expect(person.username == "alice" && person.name == "Alice" && person.age == 31)
        #expect(person.dvds.map(\.objectID) == [dvdID])
        #expect(person.dvds.first?.title == "Alien")
        #expect(person.dvds.first?.owner === person)
        #expect(person.dvds.first?.purchaseDate == Date(timeIntervalSince1970: 1_000_000))
    }

    @Test func identityMapAndFaults() throws {
        let stack = try Stack()
        let writer = stack.context()
        for name in ["a", "b", "c"] { Person(context: writer).username = name }
        try writer.save()
        let reader = stack.context()
        let people = try reader.fetch(Person.self)
        #expect(people.count == 3)
        #expect(people.allSatisfy { $0.isFault }, "fetched objects are faults")
        #expect(people[0].username == "a")
        #expect(!people[0].isFault && people[1].isFault, "only the touched object loaded")
        #expect(reader.object(with: people[1].objectID) === people[1])
        #expect(try reader.fetch(Person.self)[2] === people[2])
        #expect(try reader.fetch(Person.self, filter: { $0.username == "b" }).map(\.username) == ["b"])
    }

    @Test func inversesStayInStep() throws {
        let context = try Stack().context()
        let a = Person(context: context), b = Person(context: context)
        a.username = "a"; b.username = "b"
        let x = DVD(context: context), y = DVD(context: context)
        a.dvds = [x, y]
        #expect(x.owner === a && y.owner === a)
        y.owner = b
        #expect(a.dvds == [x] && b.dvds == [y])
        a.dvds = []
        #expect(x.owner == nil)
        x.borrower = b
        #expect(b.borrowed == [x])
        // Unattached objects join the context when related.
        let z = DVD()
        z.title = "Zardoz"
        a.dvds = [z]
        #expect(z.context === context && z.owner === a && z.isInserted)
    }

    @Test func archivedAndBinaryValuesRoundTrip() throws {
        var stack = try Stack()
        let context = stack.context()
        let box = Box(context: context)
        box.size = -3
        box.tags = Data([1, 2, 3])
        box.settings = BoxSettings(color: "blue", fragile: true)
        try context.save()
        let id = box.objectID
        stack = try stack.reopened()
        let reader = stack.context()
        let loaded = try #require(try reader.existingObject(Box.self, with: id))
        #expect(loaded.size == -3 && loaded.tags == Data([1, 2, 3]))
        #expect(loaded.settings == BoxSettings(color: "blue", fragile: true))
    }

    @Test func aWriteAfterASaveOrRollbackIsTrackedAgain() throws {
        // A run of writes to one object finds it in the changed set once (the context
        // remembers the object it last wrote); after a save or a rollback empties that
        // set, the next write to the same object must put it back.
        let stack = try Stack()
        let context = stack.context()
        let p = Person(context: context)
        p.username = "a"
        p.age = 1
        try context.save()
        p.age = 2
        #expect(context.hasChanges && p.hasChanges)
        try context.save()
        p.age = 3
        context.rollback()
        #expect(p.age == 2 && !context.hasChanges)
        p.age = 4
        #expect(context.hasChanges)
        try context.save()
        #expect(try stack.context().existingObject(Person.self, with: p.objectID)?.age == 4)
    }

    @Test func rollbackResetAndRefresh() throws {
        let stack = try Stack()
        let context = stack.context()
        let p = Person(context: context)
        p.username = "p"
        try context.save()
        p.username = "changed"
        let q = Person(context: context)
        q.username = "q"
        context.rollback()
        #expect(p.username == "p" && !context.hasChanges)
        #expect(q.context == nil)
        #expect(try context.count(Person.self) == 1)

        p.age = 5
        context.refresh(p, mergeChanges: true)
        #expect(p.age == 5 && context.hasChanges)
        context.refresh(p, mergeChanges: false)
        #expect(p.age == 0 && !context.hasChanges)
        context.reset()
        #expect(context.registeredObjects.isEmpty && p.context == nil)
    }

    /// The IDs a child context sees: its parent's ascending list and its own inserts merged,
    /// each once, as a set's sorted union would give them.
    @Test func idListsMergeAsASortedUnion() {
        var random = SplitMix64(seed: 17)
        for _ in 0..<300 {
            let ids = Set((0..<Int(random.next() % 40)).map { _ in RecordID(entity: 1, serial: random.next() % 100 + 1) }).sorted()
            let added = Set((0..<Int(random.next() % 6)).map { _ in RecordID(entity: 1, serial: random.next() % 110 + 1) }).sorted()
            #expect(Context.merged(ids, added) == Set(ids).union(added).sorted())
        }
    }

    /// An object keeps no context alive, and finds none once its context is gone (a weak
    /// reference). Reads still answer; a write changes only the detached object.
    @Test func objectsOutliveTheirContext() throws {
        let stack = try Stack()
        weak var gone: Context?
        var saved: Person?, unsaved: Person?, child: Person?
        do {
            let context = stack.context()
            gone = context
            saved = Person(context: context)
            saved?.username = "kept"
            try context.save()
            unsaved = Person(context: context)
            unsaved?.username = "pending"
            let scratch = Context(parent: context)
            child = try scratch.existingObject(with: saved!.objectID) as? Person
            #expect(child?.context === scratch && saved?.context === context)
        }
        #expect(gone == nil)
        for object in [saved, unsaved, child] {
            let object = try #require(object)
            #expect(object.context == nil && !object.hasChanges && !object.isInserted && !object.isDeleted)
        }
        #expect(saved?.username == "kept" && unsaved?.username == "pending" && child?.username == "kept")
        unsaved?.username = "detached"
        #expect(unsaved?.username == "detached")
        // The store holds what was saved, and only that.
        let reader = stack.context()
        #expect(try reader.fetch(FetchQuery(Person.self)).map(\.username) == ["kept"])
    }

    @Test func dynamicEntitiesWithoutClasses() throws {
        let note = EntityDescription(name: "Note", number: 0, attributes: [
            AttributeDescription(name: "text", type: .string),
            AttributeDescription(name: "stars", type: .int32, isOptional: true),
        ])
        let model = try Model(entities: [note])
        var stack = try Stack(model: model)
        let context = stack.context()
        let object = try context.insertObject(entityName: "Note")
        try object.setValue(.string("hello"), forKey: "text")
        object["stars"] = .int32(4)
        #expect(throws: CairnError.self) { try object.setValue(.int64(1), forKey: "text") }
        #expect(throws: CairnError.self) { try object.setValue(.null, forKey: "nope") }
        try context.save()
        stack = try stack.reopened()
        let reader = stack.context()  // objects do not keep their context alive, as in Core Data
        let notes = try reader.fetchObjects(entityName: "Note")
        #expect(notes.count == 1)
        #expect(notes[0]["text"] == .string("hello"), "\(notes[0])")
        #expect(notes[0].value(forKey: "stars") == .int32(4))
    }

    /// insertObject(entityName:) throws only what its own insert refused: an error an
    /// earlier write left for the next save (a write to an unknown key) is not thrown by an
    /// insert that succeeded, whose caller would never get the object it inserted.
    @Test func insertObjectThrowsOnlyItsOwnError() throws {
        let note = EntityDescription(name: "Note", number: 0, attributes: [AttributeDescription(name: "text", type: .string)])
        let stack = try Stack(model: try Model(entities: [note]))
        let context = stack.context()
        let first = try context.insertObject(entityName: "Note")
        first["text"] = .string("one")
        first["nope"] = .string("refused")  // kept for the next save or fetch
        let second = try context.insertObject(entityName: "Note")
        second["text"] = .string("two")
        #expect(second.isInserted && second !== first)
        #expect { try context.save() } throws: { ($0 as? CairnError)?.message.contains("Note has no key 'nope'") == true }
        try context.save()
        let reader = stack.context()
        let texts = try reader.fetchObjects(entityName: "Note").map(\.["text"])
        #expect(Set(texts) == [.string("one"), .string("two")] && texts.count == 2, "\(texts)")
        // An insert that fails still throws.
        #expect(throws: CairnError.self) { try context.insertObject(entityName: "Nowhere") }
    }
}

@Suite struct DeleteRuleAndValidationTests {
    @Test func cascadeNullifyAndNoAction() throws {
        var stack = try Stack()
        let context = stack.context()
        let owner = Person(context: context), borrower = Person(context: context)
        owner.username = "owner"; borrower.username = "borrower"
        let a = DVD(context: context), b = DVD(context: context)
        owner.dvds = [a, b]
        a.borrower = borrower
        try context.save()
        // nullify: deleting a DVD removes it from its owner's list
        context.delete(b)
        #expect(owner.dvds == [a])
        // cascade: deleting the owner deletes its DVDs; borrower's inverse is noAction from DVD's side
        context.delete(owner)
        #expect(a.isDeleted)
        try context.save()
        stack = try stack.reopened()
        let fresh = stack.context()
        #expect(try fresh.fetch(DVD.self).isEmpty)
        #expect(try fresh.fetch(Person.self).map(\.username) == ["borrower"])
    }

    /// An object inserted and deleted before a save was never in the store: the save lets
    /// it go, as it lets a deleted stored object go (it had stayed tied to the context, in
    /// no table of it, and relating it to anything was ignored without a word). Relating a
    /// deleted object is an error that names it; undoing the delete after the save brings
    /// the object back as an insert. The same holds for a child context's save.
    @Test func anObjectInsertedAndDeletedBeforeASaveLeavesTheContext() throws {
        let stack = try Stack()
        let context = stack.context()
        let owner = Person(context: context)
        owner.username = "owner"
        try context.save()

        let ghost = DVD(context: context)
        ghost.title = "ghost"
        context.undoManager.endEvent()  // the delete is an undo step of its own
        context.delete(ghost)
        #expect(!ghost.isInserted && !ghost.isDeleted)
        // A list of IDs set by key leaves a deleted one out (a list read by key may hold it).
        owner["dvds"] = .references([ghost.objectID.recordID.rawValue])
        #expect(owner.dvds.isEmpty && owner["dvds"] == .references([]) && context.deferredErrors.isEmpty)
        // Relating a deleted object: an error naming it, at the next save.
        owner.dvds.append(ghost)
        #expect(owner.dvds.isEmpty)
        #expect(throws: CairnError.self) { try context.save() }
        try context.save()
        #expect(ghost.context == nil && !context.registeredObjects.contains(ghost) && !context.hasChanges)

        // Undoing the delete after the save: the object is an insert again, and saves.
        context.undo()
        #expect(ghost.context === context && ghost.isInserted && context.registeredObjects.contains(ghost))
        ghost.owner = owner
        try context.save()
        let reader = try stack.reopened().context()
        #expect(try reader.fetch(DVD.self).map(\.title) == ["ghost"])
        #expect(try reader.fetch(Person.self).first?.dvds.map(\.title) == ["ghost"])

        // A child's save lets it go too.
        let child = Context(parent: context)
        let childGhost = DVD(context: child)
        child.delete(childGhost)
        try child.save()
        #expect(childGhost.context == nil && !child.registeredObjects.contains(childGhost))
        #expect(!context.hasChanges)
    }

    @Test func denyRefusesTheSaveAndChangesNothing() throws {
        let stack = try Stack()
        let context = stack.context()
        let shelf = Shelf(context: context)
        shelf.label = "top"
        let box = Box(context: context)
        box.shelf = shelf
        try context.save()
        context.delete(shelf)
        #expect { try context.save() } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .validation && error.message.contains("Shelf") && error.message.contains("'boxes'")
                && error.message.contains("deny")
        }
        #expect(context.hasChanges, "the context keeps its unsaved changes after a failed save")
        #expect(stack.coordinator.store.count(entity: stack.coordinator.entity(named: "Shelf")!.number) == 1)
        context.delete(box)
        try context.save()
    }

    @Test func validationNamesObjectKeyAndRule() throws {
        let stack = try Stack()
        let context = stack.context()
        let nameless = Person(context: context)  // validateForInsert: username must not be empty
        #expect { try context.save() } throws: { error in
            (error as? CairnError)?.message.contains("'username' must not be empty") == true
        }
        nameless.username = "ok"
        // A required value missing (through the dynamic API).
        let dvd = DVD(context: context)
        dvd["title"] = .null
        #expect { try context.save() } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .validation && error.message.contains("DVD") && error.message.contains("'title' is required")
        }
        #expect(stack.coordinator.store.lastSequence == 0, "nothing was written")
        dvd.title = "fine"
        try context.save()
        #expect(stack.coordinator.store.lastSequence == 1)
    }

    /// A validation hook that changes another, unchanged object: that change is saved in
    /// the same transaction, not dropped when the save clears the changed set.
    @Test func changesMadeByValidationHooksAreSaved() throws {
        let model = try Model(Relay.self)
        let stack = try Stack(model: model)
        let context = stack.context()
        let leader = Relay(context: context), follower = Relay(context: context)
        leader.follower = follower
        try context.save()
        leader.count = 7  // its validateForUpdate copies the count to the (unchanged) follower
        try context.save()
        #expect(!context.hasChanges)
        let fresh = stack.context()
        let stored = try fresh.fetch(FetchQuery(Relay.self)).map(\.count).sorted()
        #expect(stored == [7, 7])
    }

    /// A hook that changes an object validated (and its record made) before it, lower in
    /// ID order: the save writes the object as the hook left it, not as it was when its
    /// record was first made.
    @Test func aHookChangingAnObjectValidatedBeforeItIsSavedAsTheHookLeftIt() throws {
        let model = try Model(Relay.self)
        let stack = try Stack(model: model)
        let context = stack.context()
        let follower = Relay(context: context), leader = Relay(context: context)
        #expect(follower.objectID.recordID < leader.objectID.recordID)
        leader.follower = follower
        try context.save()
        follower.count = 1  // validated first
        leader.count = 7  // its hook then sets the follower's count to 7
        try context.save()
        #expect(!context.hasChanges)
        let fresh = stack.context()
        let stored = try fresh.fetch(FetchQuery(Relay.self)).map(\.count).sorted()
        #expect(stored == [7, 7])
    }

    @Test func relationshipsAcrossContextsAreRefused() throws {
        let stack = try Stack()
        let one = stack.context(), two = stack.context()
        let person = Person(context: one)
        person.username = "x"
        let dvd = DVD(context: two)
        dvd.owner = person
        #expect(dvd.owner == nil)
        #expect { try two.save() } throws: { ($0 as? CairnError)?.message.contains("different contexts") == true }
    }
}

@Suite struct OnDiskObjectStackTests {
    /// The Person ↔ DVD collection on disk through POSIX calls, across a reopen.
    @Test func personAndDVDsOnDisk() throws {
        let path = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        var stack = try Stack(fs: POSIXFileSystem(), path: path)
        let context = stack.context()
        for (index, username) in ["ann", "ben"].enumerated() {
            let person = Person(context: context)
            person.username = username
            for n in 0..<3 {
                let dvd = DVD(context: context)
                dvd.title = "\(username)-\(n)"
                dvd.purchaseDate = Date(timeIntervalSince1970: Double(index * 100 + n))
                dvd.owner = person
            }
        }
        try context.save()
        stack = try stack.reopened()
        let reader = stack.context()
        let ben = try #require(try reader.fetch(Person.self, filter: { $0.username == "ben" }).first)
        #expect(ben.dvds.map(\.title) == ["ben-0", "ben-1", "ben-2"])
        reader.delete(ben)
        try reader.save()
        stack = try stack.reopened()
        let after = stack.context()
        #expect(try after.fetch(DVD.self).map(\.title) == ["ann-0", "ann-1", "ann-2"])
        try stack.coordinator.close()
    }
}

@Suite struct MainActorContextTests {
    /// A context confined to the main actor, saving while a background context saves.
    @MainActor @Test func mainContextAndBackgroundContext() async throws {
        let stack = try Stack()
        let main = stack.context()
        let person = Person(context: main)
        person.username = "main"
        try main.save()
        let background = BackgroundContext(coordinator: stack.coordinator, model: stack.model)
        let id = person.objectID
        try await background.perform { context in
            let same = try #require(try context.existingObject(Person.self, with: id))
            same.age = 12
            try context.save()
        }
        main.processExternalChanges()
        #expect(person.age == 12)
    }
}

/// Copies its count to its follower when validated for an update.
final class Relay: ManagedObject {
    @Attribute var count: Int = 0
    @ToOne(inverse: nil) var follower: Relay?

    override func validateForUpdate() throws {
        if let follower, follower.count != count { follower.count = count }
    }
}
