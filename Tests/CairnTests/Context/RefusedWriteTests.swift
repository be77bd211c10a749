import Foundation
import Synchronization
import Testing
@testable import Cairn
@testable import CairnStorage

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
        #expect(try context.fetch(FetchQuery(Report.self)).count == 1, "a fetch does not throw the refused write")
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
        _ = try context.fetch(FetchQuery(Report.self))
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

    @Test func eachUseReportsWhyAndCheckValidThrows() throws {
        let reported = Mutex<[CairnError]>([])
        let previous = ManagedObject.invalidAccessHandler
        // Only this test's entity: other tests run meanwhile.
        ManagedObject.invalidAccessHandler = { error in
            if error.entityName == "Ticket" { reported.withLock { $0.append(error) } }
        }
        defer { ManagedObject.invalidAccessHandler = previous }
        let stack = try Stack(model: Model(Ticket.self))

        var context: Context? = stack.context()
        let kept = Ticket(context: try #require(context)), reset = Ticket(context: try #require(context))
        let gone = Ticket(context: try #require(context))
        try context?.save()
        context?.delete(gone)
        try context?.save()
        #expect(gone.invalidationReason == .deleted)
        gone.number = 1

        let other = stack.context()
        let resetHere = try #require(try other.existingObject(Ticket.self, with: reset.objectID))
        other.reset()
        #expect(resetHere.invalidationReason == .contextReset)
        resetHere.number = 2
        resetHere.isOpen = true

        context = nil
        #expect(kept.invalidationReason == .contextReleased && reset.invalidationReason == .contextReleased)
        _ = kept.related
        kept.related = [Ticket()]
        #expect(throws: CairnError.self) { try kept.checkValid() }
        let error = try #require({ () -> CairnError? in do { try kept.checkValid() } catch let e as CairnError { return e } catch { return nil }; return nil }())
        #expect(error.code == .invalidated && error.recordID == kept.recordID && error.message.contains("released"))

        let codes = reported.withLock { $0 }
        #expect(codes.count == 5, "\(codes.map(\.message))")
        #expect(codes.allSatisfy { $0.code == .invalidated })
        #expect(codes.map(\.recordID) == [gone.recordID, resetHere.recordID, resetHere.recordID, kept.recordID, kept.recordID])
        #expect(codes[0].message.contains("deleted") && codes[1].message.contains("reset") && codes[3].message.contains("read related"))
        try Ticket().checkValid()  // a new object is valid
    }
}

/// A ticket, used only by the test that counts reports of invalidated objects.
final class Ticket: ManagedObject {
    @Attribute var number: Int = 0
    @Transient var isOpen = false
    @ToMany var related: [Ticket]
}
