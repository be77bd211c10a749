import Foundation
import Observation
import Testing
@testable import Cairn
@testable import CairnStorage

/// The did-save notification (Core Data's `NSManagedObjectContextDidSave`): one per save,
/// with the inserted, updated (and their changed keys) and deleted objects, as a
/// callback, an async sequence and an observable value.
@Suite struct DidSaveTests {
    /// Pat saved; then Quinn inserted, Pat's age changed and Ray deleted in one save.
    func scene() throws -> (Context, Person, Person, Person, ObjectID) {
        let context = try Stack().context()
        let pat = Person(context: context), ray = Person(context: context)
        pat.username = "pat"
        ray.username = "ray"
        try context.save()
        let quinn = Person(context: context)
        quinn.username = "quinn"
        pat.age = 41
        let rayID = ray.objectID
        context.delete(ray)
        return (context, pat, quinn, ray, rayID)
    }

    @Test func oneNotificationPerSaveWithWhatItSaved() throws {
        let (context, pat, quinn, _, rayID) = try scene()
        var heard: [ChangeSet] = []
        context.onDidSave = { heard.append($0) }
        try context.save()
        try context.save()  // nothing to save: no notification
        #expect(heard.count == 1)
        let changes = try #require(heard.first)
        #expect(changes.inserted == [quinn.objectID] && changes.deleted == [rayID])
        #expect(changes.updated == [pat.objectID: ["age"]])
        #expect(changes.sequence > 0)
    }

    @Test func savesArriveAsAnAsyncSequence() async throws {
        let (context, pat, _, _, _) = try scene()
        var iterator = context.saveChanges().makeAsyncIterator()
        try context.save()
        pat.name = "Pat"
        try context.save()
        let first = await iterator.next(), second = await iterator.next()
        #expect(first?.inserted.count == 1 && second?.updated == [pat.objectID: ["name"]])
    }

    @Test func savesAreObservable() throws {
        let (context, pat, _, _, _) = try scene()
        let saves = context.saves
        let changed = Locked(false)
        withObservationTracking { _ = saves.lastSave } onChange: { changed.withLock { $0 = true } }
        try context.save()
        #expect(changed.value && saves.saveCount == 1 && saves.lastSave?.updated[pat.objectID] == ["age"])
    }

    /// A child's save into its parent is a save too (sequence 0: nothing reached the store).
    @Test func aChildsSaveNotifiesItsListeners() throws {
        let (context, _, _, _, _) = try scene()
        try context.save()
        let child = Context(parent: context)
        var heard: [ChangeSet] = []
        child.onDidSave = { heard.append($0) }
        let newcomer = Person(context: child)
        newcomer.username = "sam"
        try child.save()
        #expect(heard.count == 1 && heard[0].inserted == [newcomer.objectID] && heard[0].sequence == 0)
    }
}

/// Children that merge what their parent saves (`automaticallyMergesChangesFromParent`).
@Suite struct ChildMergeTests {
    /// A sibling's save into the parent and the parent's own save reach a child that merges,
    /// not one that does not.
    @Test func aChildThatMergesSeesItsSiblingsAndParentsSaves() throws {
        let stack = try Stack()
        let parent = stack.context()
        let pat = Person(context: parent), ray = Person(context: parent)
        pat.username = "pat"
        ray.username = "ray"
        try parent.save()
        let editor = Context(parent: parent)
        let merging = Context(parent: parent), keeping = Context(parent: parent)
        merging.automaticallyMergesChangesFromParent = true
        let seen = try #require(try merging.existingObject(Person.self, with: pat.objectID))
        let kept = try #require(try keeping.existingObject(Person.self, with: pat.objectID))
        let doomed = try #require(try merging.existingObject(Person.self, with: ray.objectID))
        #expect(seen.age == 0 && kept.age == 0 && doomed.username == "ray")

        try #require(try editor.existingObject(Person.self, with: pat.objectID)).age = 7
        editor.delete(try #require(try editor.existingObject(Person.self, with: ray.objectID)))
        try editor.save()  // into the parent
        merging.processExternalChanges()
        #expect(seen.age == 7 && doomed.context == nil, "the sibling's save reached the merging child")
        #expect(kept.age == 0, "a child that does not merge keeps what it read")

        pat.age = 8
        try parent.save()  // the parent's own save, into the store
        #expect(try merging.fetch(Person.self).map(\.age) == [8])
        #expect(kept.age == 0)
    }

    /// A merging child's own unsaved change stays; its other values follow the parent.
    @Test func aMergingChildKeepsItsUnsavedChanges() throws {
        let stack = try Stack()
        let parent = stack.context()
        let pat = Person(context: parent)
        pat.username = "pat"
        try parent.save()
        let child = Context(parent: parent)
        child.automaticallyMergesChangesFromParent = true
        let ours = try #require(try child.existingObject(Person.self, with: pat.objectID))
        ours.name = "Pat"
        pat.age = 9
        try parent.save()
        child.processExternalChanges()
        #expect(ours.name == "Pat" && child.hasChanges, "the unsaved change is kept for the child's save")
        try child.save()
        #expect(pat.name == "Pat" && pat.age == 9)
    }
}
