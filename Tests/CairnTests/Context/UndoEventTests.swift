import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Undo groups what the app did in one event, as `NSUndoManager.groupsByEvent` does: a
/// Core Data developer's `a.name = "x"; a.age = 9; context.undo()` reverts both. (Each
/// change was its own group: the undo reverted only `age`.)
@Suite struct UndoEventTests {
    func person(_ context: Context) throws -> Person {
        let person = Person(context: context)
        person.username = "pat"
        person.age = 40
        try context.save()  // a save ends the event: the insert is not undone below
        return person
    }

    @Test func changesOfOneEventUndoTogether() throws {
        let context = try Stack().context()
        let pat = try person(context)
        pat.name = "x"
        pat.age = 9
        #expect(context.undoManager.canUndo, "an open event with changes can be undone")
        context.undo()
        #expect(pat.name == nil && pat.age == 40)
        context.redo()
        #expect(pat.name == "x" && pat.age == 9)
    }

    @Test func aSaveAnExplicitGroupAndEndEventEndTheEvent() throws {
        let context = try Stack().context()
        let pat = try person(context)
        pat.age = 41
        try context.save()
        pat.age = 42
        context.undoManager.endEvent()
        pat.age = 43
        context.undoGroup(named: "Rename") { pat.name = "Patricia"; pat.age = 44 }
        pat.age = 45
        #expect(context.undoManager.undoActionName == nil)
        context.undo()
        #expect(pat.age == 44 && context.undoManager.undoActionName == "Rename")
        context.undo()
        #expect(pat.age == 43 && pat.name == nil, "the explicit group was a step of its own")
        context.undo()
        #expect(pat.age == 42)
        context.undo()
        #expect(pat.age == 41, "the save ended the event before")
    }

    @Test func eachPerformIsOneEvent() async throws {
        let stack = try Stack()
        let background = BackgroundContext(coordinator: stack.coordinator, model: stack.model)
        let id = try await background.perform { context in
            let pat = Person(context: context)
            pat.username = "pat"
            try context.save()
            return pat.objectID
        }
        try await background.perform { context in
            let pat = try #require(try context.existingObject(Person.self, with: id))
            pat.age = 1
            pat.name = "one"
        }
        try await background.perform { context in
            try #require(try context.existingObject(Person.self, with: id)).age = 2
        }
        let after = try await background.perform { context in
            context.undo()
            let pat = try #require(try context.existingObject(Person.self, with: id))
            return "\(pat.age) \(pat.name ?? "-")"
        }
        #expect(after == "1 one", "only the last perform was undone")
    }

    /// On the main actor, an event is what one job did: it ends when the job awaits.
    @MainActor @Test func oneTurnOfTheMainActorIsOneEvent() async throws {
        let context = try Stack().context()
        context.undoManager.endEventsEachMainActorTurn()  // as Container.mainContext's is
        let pat = try person(context)
        pat.name = "x"
        pat.age = 9
        await Task.yield()  // the turn ends: the main queue closes its event
        pat.age = 10
        context.undo()
        #expect(pat.age == 9 && pat.name == "x", "the turn's two changes stay; the next turn's is undone")
    }

    @Test func groupingByEventCanBeTurnedOff() throws {
        let context = try Stack().context()
        let pat = try person(context)
        context.undoManager.groupsByEvent = false
        pat.name = "x"
        pat.age = 9
        context.undo()
        #expect(pat.name == "x" && pat.age == 40)
    }
}
