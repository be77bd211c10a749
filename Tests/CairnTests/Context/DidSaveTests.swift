import Foundation
import Observation
import Testing
@testable import Cairn

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
