import Foundation
import Observation
import Synchronization
import Testing
@testable import Cairn
@testable import CairnStorage

/// Saves reach the contexts that show them without a call, as a SwiftUI app expects: the
/// main context on the main actor, a background context on its own actor; observers hear
/// of the properties that changed, and only of those.
@Suite struct AutomaticMergeTests {
    /// Whether `stream` yields within `seconds`.
    static func yields(_ stream: AsyncStream<Void>, within seconds: Double) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { for await _ in stream { return true }; return false }
            group.addTask { try? await Task.sleep(for: .seconds(seconds)); return false }
            defer { group.cancelAll() }
            return await group.next() ?? false
        }
    }

    /// Fires `signal` once the next change of what `read` reads (as a view's body does).
    @MainActor static func track(_ read: @escaping () -> Void) -> AsyncStream<Void> {
        let (stream, signal) = AsyncStream.makeStream(of: Void.self)
        withObservationTracking(read) { signal.yield() }
        return stream
    }

    /// A view's model: the main context's object and live results. A background context
    /// saves; with no fetch and no merge call, the object's observers of `age` hear of
    /// it, its `name` observers do not, the values are the new ones, and the live results
    /// hold the new object.
    @MainActor @Test func aBackgroundSaveReachesTheMainContextUnasked() async throws {
        let container = try Container(entities: [Person.self, DVD.self], storage: .inMemory)
        let main = container.mainContext
        let pat = Person(context: main)
        pat.username = "pat"
        try main.save()
        let results = try LiveResults(request: FetchQuery(Person.self), context: main)
        let ageChanged = Self.track { _ = pat.age }
        let nameChanged = Self.track { _ = pat.name }
        let listChanged = Self.track { _ = results.objects }

        let id = pat.objectID
        try await container.newBackgroundContext().perform { context in
            try #require(try context.existingObject(Person.self, with: id)).age = 50
            Person(context: context).username = "bo"
            try context.save()
        }
        #expect(await Self.yields(ageChanged, within: 10))
        #expect(await Self.yields(listChanged, within: 10))
        #expect(pat.age == 50)
        #expect(results.objects.map(\.username).sorted() == ["bo", "pat"])
        #expect(!(await Self.yields(nameChanged, within: 0.2)), "name did not change")
    }

    /// The same through the other ways a save is made: a batch update, and the object
    /// queue (observers of the coordinator and `onExternalChanges` hear of a push).
    @MainActor @Test func batchesAndQueuePushesReachTheMainContext() async throws {
        let container = try Container(entities: [Person.self, DVD.self], storage: .inMemory)
        let main = container.mainContext
        let pat = Person(context: main)
        pat.username = "pat"
        try main.save()
        let ageChanged = Self.track { _ = pat.age }
        let batch = Context(coordinator: container.coordinator, model: container.model)
        _ = try batch.batchUpdate(FetchQuery(Person.self)) { person in person.age = 7 }
        #expect(await Self.yields(ageChanged, within: 10))
        #expect(pat.age == 7)

        let (pushed, signal) = AsyncStream.makeStream(of: Void.self)
        main.onExternalChanges = { changes in if !changes.inserted.isEmpty { signal.yield() } }
        let queue = try container.queue(named: "jobs", of: String.self)
        try queue.push("one")
        #expect(await Self.yields(pushed, within: 10))
    }

    /// A background context takes in the main context's saves on its own actor, between
    /// its `perform`s: an object it loaded reads the new value without a fetch.
    @MainActor @Test func aMainSaveReachesABackgroundContext() async throws {
        let container = try Container(entities: [Person.self, DVD.self], storage: .inMemory)
        let main = container.mainContext
        let pat = Person(context: main)
        pat.username = "pat"
        try main.save()
        let id = pat.objectID
        let background = container.newBackgroundContext()
        let holder = try await background.perform { context -> Bool in
            try context.existingObject(Person.self, with: id)?.age == 0
        }
        #expect(holder)
        pat.age = 33
        try main.save()
        var seen = 0
        for _ in 0..<200 {
            seen = try await background.perform { context in
                // (Registered objects only: no fetch, no lookup that would merge.)
                (context.registered[id.recordID] as? Person)?.age ?? -1
            }
            if seen == 33 { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(seen == 33)
    }

    /// Off, a context keeps its stable snapshot: nothing reaches it until it asks.
    @MainActor @Test func aContextThatDoesNotMergeKeepsItsSnapshot() async throws {
        let container = try Container(entities: [Person.self, DVD.self], storage: .inMemory)
        let main = container.mainContext
        main.automaticallyMergesChangesFromParent = false
        let pat = Person(context: main)
        pat.username = "pat"
        try main.save()
        let ageChanged = Self.track { _ = pat.age }
        let id = pat.objectID
        try await container.newBackgroundContext().perform { context in
            try #require(try context.existingObject(Person.self, with: id)).age = 50
            try context.save()
        }
        #expect(!(await Self.yields(ageChanged, within: 0.3)))
        #expect(pat.age == 0)
        main.processExternalChanges()
        #expect(pat.age == 50)
    }
}

/// A merge tells observers of the properties it changed, whatever way it takes in the save.
@Suite struct MergeObservationTests {
    /// A stack, a context whose objects are observed, and a person saved in it.
    func savedPat() throws -> (Stack, Context, Person) {
        let stack = try Stack()
        let context = stack.context()
        context.observesObjects = true
        let pat = Person(context: context)
        pat.username = "pat"
        try context.save()
        return (stack, context, pat)
    }

    func notifies(_ read: () -> Void, when change: () throws -> Void) rethrows -> Bool {
        let fired = Atomic<Bool>(false)
        withObservationTracking { read() } onChange: { fired.store(true, ordering: .relaxed) }
        try change()
        return fired.load(ordering: .relaxed)
    }

    /// An unchanged object: a merge of `age` leaves `name`'s observers alone, and a later
    /// merge of `name` tells them (the object did not become a fault that a second merge
    /// would pass over).
    @Test func aMergeTellsTheObserversOfWhatChangedOnly() throws {
        let (stack, context, pat) = try savedPat()
        let other = stack.context()
        let there = try #require(try other.existingObject(Person.self, with: pat.objectID))
        there.age = 5
        try other.save()
        #expect(!notifies({ _ = pat.name }, when: { context.processExternalChanges() }))
        #expect(pat.age == 5)
        there.name = "Pat"
        try other.save()
        #expect(notifies({ _ = pat.name }, when: { context.processExternalChanges() }))
        #expect(pat.name == "Pat")
    }

    /// An object with changes here takes in the other save's attributes it did not
    /// change, and only their observers hear of it.
    @Test func aMergeIntoAChangedObjectTellsTheObserversOfWhatItTookIn() throws {
        let (stack, context, pat) = try savedPat()
        pat.name = "here"
        let other = stack.context()
        try #require(try other.existingObject(Person.self, with: pat.objectID)).age = 8
        try other.save()
        #expect(notifies({ _ = pat.age }, when: { context.processExternalChanges() }))
        #expect(pat.age == 8 && pat.name == "here")
        try #require(try other.existingObject(Person.self, with: pat.objectID)).age = 9
        try other.save()
        #expect(!notifies({ _ = pat.name }, when: { context.processExternalChanges() }))
    }
}
