import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

@Suite struct MergeTests {
    /// Two contexts on one coordinator, both holding the same saved person.
    func twoContexts() throws -> (Stack, Context, Context, Person, Person) {
        let stack = try Stack()
        let a = stack.context(), b = stack.context()
        let p = Person(context: a)
        p.username = "pat"
        p.name = "Pat"
        p.age = 40
        try a.save()
        let q = try #require(try b.existingObject(Person.self, with: p.objectID))
        #expect(q.username == "pat")
        return (stack, a, b, p, q)
    }

    @Test func aSaveMergesIntoOtherContexts() throws {
        let (_, a, b, p, q) = try twoContexts()
        var delivered: [ChangeSet] = []
        b.onExternalChanges = { delivered.append($0) }
        p.age = 41
        try a.save()
        #expect(q.age == 40, "merges happen at the context's next operation, not inside a property access")
        b.processExternalChanges()
        #expect(q.age == 41, "b sees a's save once merged")
        #expect(delivered.count == 1 && delivered[0].updated[p.objectID] == ["age"])
        let newcomer = Person(context: a)
        newcomer.username = "new"
        try a.save()
        #expect(try b.fetch(Person.self).map(\.username) == ["pat", "new"])
        a.delete(p)
        try a.save()
        #expect(try b.fetch(Person.self).map(\.username) == ["new"])
        #expect(q.context == nil)
    }

    /// After a conflict, rollback() brings the object back to what the store holds, not
    /// to the stale values it was read at: a fetch shows the other save, and a retry saves.
    /// (The merge of the other save had been skipped while the object had changes, and
    /// rollback restored the old values: every retry conflicted again.)
    @Test func rollbackAfterAConflictShowsTheStore() throws {
        let (_, a, b, p, q) = try twoContexts()
        q.age = 50
        try b.save()
        p.age = 60  // the same attribute: a conflict (another would merge in)
        #expect { try a.save() } throws: { ($0 as? CairnError)?.code == .conflict }
        a.rollback()
        #expect(p.age == 50 && p.name == "Pat")
        #expect(try a.fetch(Person.self).first?.age == 50)
        p.name = "Patricia"
        try a.save()
        #expect(try b.fetch(Person.self).first?.name == "Patricia")
    }

    /// A moves a DVD to another owner while B deletes it: A's save is a conflict (the
    /// merge policy's to resolve), not a validation error about a missing record.
    @Test func aMoveAgainstADeleteIsAConflict() throws {
        let (stack, a, b, p, _) = try twoContexts()
        let d = DVD(context: a)
        d.title = "d1"
        p.dvds = [d]
        let other = Person(context: a)
        other.username = "quinn"
        try a.save()
        let theirs = try #require(try b.existingObject(DVD.self, with: d.objectID))
        b.delete(theirs)
        try b.save()
        d.owner = other
        #expect { try a.save() } throws: { ($0 as? CairnError)?.code == .conflict }
        #expect(stack.coordinator.store.verify().isEmpty)
    }

    /// A conflict carries each object's values as read, as it would save them and as
    /// stored (`NSMergeConflict`), so an app can resolve it in code: here it keeps its own
    /// change and takes the other one.
    @Test func aConflictCarriesTheValuesToResolveItInCode() throws {
        let (_, a, b, p, q) = try twoContexts()
        q.age = 50
        q.name = "B"
        try b.save()
        p.name = "Patricia"
        let error = try #require(throws: CairnError.self) { try a.save() }
        #expect(error.code == .conflict)
        let conflict = try #require(error.conflicts.first)
        #expect(error.conflicts.count == 1 && conflict.objectID == p.objectID)
        #expect(conflict.changedHere == ["name"] && conflict.changedElsewhere == ["name"])
        #expect(conflict.cachedValues["name"] == .string("Pat") && conflict.storedValues?["name"] == .string("B"))
        #expect(conflict.newValues?["name"] == .string("Patricia"))
        #expect(conflict.cachedValues["age"] == .int64(50), "the age it did not change was merged in")
        #expect(conflict.storedVersion > conflict.cachedVersion)
        // Resolved in code: the stored values, then this context's changes on top.
        a.refresh(p, mergeChanges: false)
        for key in conflict.changedHere { p[key] = conflict.newValues?[key] ?? .null }
        try a.save()
        let reader = b.coordinator.store
        #expect(reader.verify().isEmpty)
        b.processExternalChanges()
        #expect(q.age == 50 && q.name == "Patricia")
    }

    /// A delete here against a change elsewhere: no values to save.
    @Test func aConflictOfADeleteHasNoNewValues() throws {
        let (_, a, b, p, q) = try twoContexts()
        q.age = 51
        try b.save()
        a.delete(p)
        let error = try #require(throws: CairnError.self) { try a.save() }
        let conflict = try #require(error.conflicts.first)
        #expect(conflict.newValues == nil && conflict.storedValues?["age"] == .int64(51) && conflict.changedHere.isEmpty)
    }

    @Test func conflictsAreErrorsByDefault() throws {
        let (stack, a, b, p, q) = try twoContexts()
        q.age = 50  // b changes first: a clean object would simply take a's save
        p.age = 41
        p.name = "From A"
        try a.save()
        #expect { try b.save() } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .conflict && error.message.contains("Person \(p.objectID.recordID)")
                && error.message.contains("changed here: age") && error.message.contains("changed elsewhere: age")
        }
        #expect(b.hasChanges && q.age == 50, "a failed save keeps the change")
        #expect(q.name == "From A", "the attribute b did not change took a's value")
        let reader = stack.context()
        #expect(try reader.existingObject(Person.self, with: p.objectID)?.age == 41)
    }

    /// Another context's save of other attributes merges into an object changed here, as
    /// Core Data's merge does: its other keys take the new values, its edits stay, and its
    /// save is no conflict. (It was not refreshed at all: the other keys stayed stale, and
    /// the save conflicted.)
    @Test func aChangedObjectTakesInOtherAttributesAndSavesWithoutConflict() throws {
        let (stack, a, b, p, q) = try twoContexts()
        q.name = "edited in b"
        p.age = 41
        try a.save()
        _ = try b.fetch(Person.self)  // merges a's save
        #expect(q.age == 41 && q.name == "edited in b" && b.hasChanges)
        try b.save()
        let reader = stack.context()
        let stored = try #require(try reader.existingObject(Person.self, with: p.objectID))
        #expect(stored.age == 41 && stored.name == "edited in b")
    }

    @Test func objectTrumpsMergesPropertyByProperty() throws {
        let (stack, a, b, p, q) = try twoContexts()
        q.age = 2
        p.name = "From A"
        p.age = 1
        try a.save()
        b.mergePolicy = .objectTrumps
        try b.save()
        let reader = stack.context()
        let merged = try #require(try reader.existingObject(Person.self, with: p.objectID))
        #expect(merged.name == "From A" && merged.age == 2, "b's change wins; a's other change is kept")
    }

    @Test func storeTrumpsMergesPropertyByProperty() throws {
        let (stack, a, b, p, q) = try twoContexts()
        q.age = 2
        q.name = "From B"
        p.age = 1
        try a.save()
        b.mergePolicy = .storeTrumps
        try b.save()
        let reader = stack.context()
        let merged = try #require(try reader.existingObject(Person.self, with: p.objectID))
        #expect(merged.age == 1 && merged.name == "From B", "a's change wins; b's other change is kept")
    }

    @Test func overwriteAndRollback() throws {
        let (stack, a, b, p, q) = try twoContexts()
        q.age = 2
        p.age = 1
        p.name = "A"
        try a.save()
        b.mergePolicy = .overwrite
        try b.save()
        var reader = stack.context()
        var merged = try #require(try reader.existingObject(Person.self, with: p.objectID))
        #expect(merged.age == 2 && merged.name == "A", "b's object replaced the store's (with the name it merged in)")

        q.age = 4
        q.name = "B"
        a.processExternalChanges()  // a takes b's overwrite before changing p again
        p.age = 3
        try a.save()
        b.mergePolicy = .rollback
        try b.save()
        #expect(q.name == "A" && q.age == 3 && !b.hasChanges)
        reader = stack.context()
        merged = try #require(try reader.existingObject(Person.self, with: p.objectID))
        #expect(merged.age == 3 && merged.name == "A")
    }

    @Test func deletedElsewhere() throws {
        let (_, a, b, p, q) = try twoContexts()
        q.age = 99  // local change: the merge keeps it for the policy
        a.delete(p)
        try a.save()
        #expect { try b.save() } throws: { ($0 as? CairnError)?.message.contains("deleted elsewhere") == true }
        b.mergePolicy = .objectTrumps
        try b.save()
        #expect(try a.fetch(Person.self).map(\.age) == [99], "re-inserted with the same ID")
    }
}

@Suite struct ContextConcurrencyTests {
    /// Eight background contexts insert and update at once; every save lands, and
    /// updates to a shared counter object never lose an increment (optimistic locking
    /// plus retry).
    @Test func manyContextsSavingConcurrently() async throws {
        let stack = try Stack()
        let setup = stack.context()
        let counter = Person(context: setup)
        counter.username = "counter"
        try setup.save()
        let counterID = counter.objectID
        let coordinator = stack.coordinator, model = stack.model
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    let background = BackgroundContext(coordinator: coordinator, model: model)
                    for i in 0..<10 {
                        try await background.perform { context in
                            let person = Person(context: context)
                            person.username = "w\(worker)-\(i)"
                            try context.save()
                            while true {
                                let shared = try #require(try context.existingObject(Person.self, with: counterID))
                                shared.age += 1
                                do { try context.save(); break } catch let error as CairnError where error.code == .conflict {
                                    context.refresh(shared, mergeChanges: false)
                                }
                            }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let reader = stack.context()
        #expect(try reader.count(Person.self) == 81)
        #expect(try reader.existingObject(Person.self, with: counterID)?.age == 80)
    }
}

/// Inverses kept whole against saves a context has not taken in yet.
@Suite struct StaleRowTests {
    /// A fault holds the row a fetch read for it; another context then links a new DVD to
    /// that person. Deleting the DVD here takes it out of the person's list: the person is
    /// read from the store, not from the older row (whose list lacked the DVD, so that the
    /// delete changed nothing and left the person naming a deleted DVD).
    @Test func aDeleteUnlinksFromTheStoresRecordNotAnOlderFetchedRow() throws {
        let stack = try Stack()
        let setup = stack.context()
        let pat = Person(context: setup)
        pat.username = "pat"
        try setup.save()

        let here = stack.context()
        here.automaticallyMergesChangesFromParent = false  // (the other save lands after the fetch, as in a race)
        let people = try here.fetch(FetchQuery(Person.self))
        #expect(people.first?.isFault == true)

        let other = stack.context()
        let dvd = DVD(context: other)
        dvd.title = "Alien"
        dvd.owner = try other.existingObject(Person.self, with: pat.objectID)
        try other.save()

        let found = try here.fetch(FetchQuery(DVD.self))
        #expect(found.count == 1)
        here.delete(found[0])
        try here.save()
        #expect(stack.coordinator.store.verify().isEmpty, "\(stack.coordinator.store.verify())")
        let reader = stack.context()
        #expect(try reader.existingObject(Person.self, with: pat.objectID)?.dvds.isEmpty == true)
    }
}
