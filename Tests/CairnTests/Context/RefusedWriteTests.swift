import Foundation
import Testing
@testable import Cairn

/// A write a setter refused (it cannot throw) is thrown by the next save, never by an
/// unrelated fetch that would hide it from the save.
@Suite struct RefusedWriteTests {
    @Test func aRefusedSetterIsThrownBySaveNotByAFetch() throws {
        let stack = try Stack(model: try Model(Report.self))
        let context = stack.context()
        let report = Report(context: context)
        report.summary = Summary(mean: 1.5, peak: 2)
        try context.save()
        report.summary = Summary(mean: .nan, peak: 0)  // does not archive: refused
        #expect(try context.fetch(FetchRequest(Report.self)).count == 1, "a fetch does not throw the refused write")
        #expect(try context.count(Report.self) == 1)
        let error = try #require(throws: CairnError.self) { try context.save() }
        #expect(error.message.contains("Report.summary"), "\(error)")
    }

    @Test func aWriteToADeletedObjectIsThrownBySave() throws {
        let stack = try Stack(model: try Model(Report.self))
        let context = stack.context()
        let kept = Report(context: context), gone = Report(context: context)
        try context.save()
        context.delete(gone)
        gone.summary = Summary(mean: 3, peak: 3)
        kept.summary = Summary(mean: 4, peak: 4)
        _ = try context.fetch(FetchRequest(Report.self))
        #expect { try context.save() } throws: { ($0 as? CairnError)?.message.contains("deleted") == true }
        // Rolled back, nothing is outstanding.
        context.rollback()
        try context.save()
    }

    /// An object another context deleted, gone from this one once the delete is merged, is
    /// never inserted again by relating it: relating it is refused. (It was inserted as a
    /// new record under a new ID, with nothing in it if it had not been read.)
    @Test func anObjectDeletedElsewhereIsNotInsertedAgainByRelatingIt() throws {
        let stack = try Stack()
        let setup = stack.context()
        let pat = Person(context: setup), d1 = DVD(context: setup)
        pat.username = "pat"
        d1.title = "d1"
        try setup.save()
        let context = stack.context()
        let theirs = try #require(try context.fetch(Person.self).first)
        let other = stack.context()
        other.delete(try #require(try other.existingObject(Person.self, with: pat.objectID)))
        try other.save()
        let dvd = try #require(try context.fetch(DVD.self).first)  // merges the delete
        #expect(theirs.context == nil)
        dvd.owner = theirs
        let error = try #require(throws: CairnError.self) { try context.save() }
        #expect(error.code == .invalidArgument && error.message.contains("it was deleted"), "\(error)")
        context.rollback()
        #expect(try context.count(Person.self) == 0)
        // Deleting it is no error: it is deleted already.
        context.delete(theirs)
        try context.save()
        #expect(stack.coordinator.store.verify().isEmpty)
    }
}

/// Objects that left their context say so (`isInvalidated`), and writes to them change
/// nothing. (After `reset()`, an old object took writes that were never saved.)
@Suite struct InvalidatedObjectTests {
    @Test func anObjectAfterResetIsInvalidatedAndRefusesWrites() throws {
        let stack = try Stack()
        let context = stack.context()
        let pat = Person(context: context)
        pat.username = "pat"
        try context.save()
        #expect(!pat.isInvalidated)
        context.reset()
        #expect(pat.isInvalidated && pat.username == "pat", "it reads as it was")
        pat.username = "changed"
        pat.dvds = [DVD()]
        #expect(pat.username == "pat" && pat.dvds.isEmpty, "writes change nothing")
        let again = try #require(try context.existingObject(Person.self, with: pat.objectID))
        #expect(!again.isInvalidated && again.username == "pat")
    }

    @Test func aSavedDeleteAndAReleasedContextInvalidate() throws {
        let stack = try Stack()
        var context: Context? = stack.context()
        let pat = Person(context: try #require(context)), ray = Person(context: try #require(context))
        pat.username = "pat"
        ray.username = "ray"
        try context?.save()
        context?.delete(ray)
        try context?.save()
        #expect(ray.isInvalidated && !pat.isInvalidated)
        let fresh = Person()
        fresh.username = "new"
        let unsaved = Person(context: try #require(context))
        context = nil  // released
        #expect(pat.isInvalidated, "a stored object whose context is gone")
        #expect(!fresh.isInvalidated && !unsaved.isInvalidated, "new objects can still be inserted")
        let next = stack.context()
        next.insert(unsaved)
        #expect(unsaved.context === next)
    }
}
