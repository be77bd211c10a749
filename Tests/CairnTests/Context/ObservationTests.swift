import Foundation
import Observation
import Synchronization
import Testing
@testable import Cairn
@testable import CairnStorage

/// Managed objects and live results are `Observable`: what a SwiftUI view, or
/// `withObservationTracking`, reads of them tells it of their changes.
@Suite struct ObservationTests {
    /// Whether `change` changes what `read` read, as observation reports it.
    func notifies(_ read: () -> Void, when change: () throws -> Void) rethrows -> Bool {
        let fired = Atomic<Bool>(false)
        withObservationTracking { read() } onChange: { fired.store(true, ordering: .relaxed) }
        try change()
        return fired.load(ordering: .relaxed)
    }

    func observingContext(_ stack: Stack) -> Context {
        let context = stack.context()
        context.observesObjects = true
        return context
    }

    func savedPerson(_ context: Context) throws -> Person {
        let pat = Person(context: context)
        pat.username = "pat"
        try context.save()
        return pat
    }

    @Test func aSetTellsTheObserversOfThatPropertyOnly() throws {
        let context = observingContext(try Stack())
        let pat = try savedPerson(context)
        #expect(pat.isObservable)
        #expect(notifies({ _ = pat.name }, when: { pat.name = "Pat" }))
        #expect(!notifies({ _ = pat.name }, when: { pat.age = 3 }), "another property's change is not this one's")
        #expect(!notifies({ _ = pat.name }, when: { pat.name = "Pat" }), "setting the same value changes nothing")
    }

    @Test func anInverseUndoAndRollbackTellObservers() throws {
        let context = observingContext(try Stack())
        let pat = try savedPerson(context)
        let dvd = DVD(context: context)
        #expect(notifies({ _ = pat.dvds }, when: { dvd.owner = pat }), "the inverse side changed")
        context.undoManager.endEvent()
        pat.name = "Pat"
        #expect(notifies({ _ = pat.name }, when: { context.undo() }))
        pat.age = 9
        #expect(notifies({ _ = pat.age }, when: { context.rollback() }))
        #expect(pat.age == 0)
    }

    @Test func aMergedSaveTellsObservers() throws {
        let stack = try Stack()
        let context = observingContext(stack)
        let pat = try savedPerson(context)
        _ = pat.age
        let other = stack.context()
        try #require(try other.existingObject(Person.self, with: pat.objectID)).age = 50
        try other.save()
        #expect(try notifies({ _ = pat.age }, when: { _ = try context.fetch(FetchQuery(Person.self)) }))
        #expect(pat.age == 50)
    }

    @Test func transientsAreObservable() throws {
        let context = observingContext(try Stack(model: Model(Note.self)))
        let note = Note(context: context)
        #expect(notifies({ _ = note.isSelected }, when: { note.isSelected = true }))
        #expect(notifies({ _ = note.isSelected }, when: { context.undo() }))
    }

    @Test func observingAnAttributeFaultsNothingElseIn() throws {
        let stack = try Stack()
        do {
            let setup = stack.context()
            let pat = try savedPerson(setup)
            for index in 0..<3 {
                let dvd = DVD(context: setup)
                dvd.title = "d\(index)"
                dvd.owner = pat
            }
            try setup.save()
        }
        let context = observingContext(stack)
        let pat = try #require(try context.fetch(FetchQuery(Person.self)).first)
        let dvds = pat.dvds
        withObservationTracking { _ = pat.name } onChange: {}
        #expect(dvds.count == 3 && dvds.allSatisfy { $0.isFault })
    }

    @Test func aContextThatDoesNotObserveMakesNoRegistrar() throws {
        let context = try Stack().context()
        let pat = try savedPerson(context)
        #expect(!pat.isObservable)
        #expect(!notifies({ _ = pat.name }, when: { pat.name = "Pat" }))
    }

    @MainActor @Test func theMainContextObservesItsObjects() throws {
        let container = try Container(entities: [Person.self, DVD.self], storage: .inMemory)
        let pat = try savedPerson(container.mainContext)
        #expect(pat.isObservable)
    }

    @Test func liveResultsAreObservable() throws {
        let context = observingContext(try Stack())
        _ = try savedPerson(context)
        let results = try LiveResults(request: FetchQuery(Person.self), context: context)
        #expect(try notifies({ _ = results.objects }, when: {
            Person(context: context).username = "bo"
            context.processPendingChanges()
        }))
        #expect(results.objects.count == 2)
    }
}
