import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A root context with `automaticallyMergesChangesFromParent` off keeps what it read until
/// it asks to merge, as a Core Data root context does by default.
@Suite struct StableSnapshotTests {
    /// A stack, a context that keeps its snapshot with `pat` loaded, and a second context.
    func setUp() throws -> (stack: Stack, stable: Context, pat: Person, other: Context) {
        let stack = try Stack()
        let stable = stack.context()
        #expect(stable.automaticallyMergesChangesFromParent, "a root context merges by default")
        stable.automaticallyMergesChangesFromParent = false
        let pat = Person(context: stable)
        pat.username = "pat"
        pat.age = 30
        try stable.save()
        return (stack, stable, pat, stack.context())
    }

    @Test func loadedObjectsKeepTheirValuesUntilTheContextMerges() throws {
        let (_, stable, pat, other) = try setUp()
        try #require(try other.existingObject(Person.self, with: pat.objectID)).age = 31
        try other.save()

        _ = try stable.fetch(FetchQuery(Person.self))
        _ = try stable.existingObject(Person.self, with: pat.objectID)
        _ = try stable.count(Person.self)
        #expect(pat.age == 30, "fetches, lookups and counts keep the snapshot")
        #expect(!pat.hasChanges)

        stable.processExternalChanges()
        #expect(pat.age == 31)
    }

    @Test func anObjectDeletedElsewhereStaysUntilTheMerge() throws {
        let (_, stable, pat, other) = try setUp()
        other.delete(try #require(try other.existingObject(Person.self, with: pat.objectID)))
        try other.save()
        _ = try stable.fetch(FetchQuery(Person.self))
        #expect(pat.context === stable && pat.username == "pat")
        stable.processExternalChanges()
        #expect(pat.isInvalidated)
    }

    @Test func liveResultsStayUntilTheMerge() throws {
        let (_, stable, pat, other) = try setUp()
        let results = try LiveResults(request: FetchQuery(Person.self, sortBy: [SortDescriptor(\Person.username)]),
                                         context: stable)
        let bo = Person(context: other)
        bo.username = "bo"
        try other.save()
        stable.processPendingChanges()
        _ = try stable.fetch(FetchQuery(Person.self))
        #expect(results.objects == [pat], "no change is delivered before the merge")
        stable.processExternalChanges()
        #expect(results.objects.map(\.username) == ["bo", "pat"])
    }

    @Test func aSaveOnAStaleSnapshotStillMeetsTheMergePolicy() throws {
        let (_, stable, pat, other) = try setUp()
        try #require(try other.existingObject(Person.self, with: pat.objectID)).age = 31
        try other.save()
        pat.age = 40
        let error = #expect(throws: CairnError.self) { try stable.save() }
        #expect(error?.code == .conflict, "the save takes in the other save first, and the clash is a conflict")
    }

    @Test func turnedOnAgainItMergesAtTheNextFetch() throws {
        let (_, stable, pat, other) = try setUp()
        try #require(try other.existingObject(Person.self, with: pat.objectID)).name = "Pat"
        try other.save()
        _ = try stable.fetch(FetchQuery(Person.self))
        #expect(pat.name == nil)
        stable.automaticallyMergesChangesFromParent = true
        _ = try stable.fetch(FetchQuery(Person.self))
        #expect(pat.name == "Pat")
    }
}
