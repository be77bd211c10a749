import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Reading a to-many relationship returns its objects as faults, which fire in batches
/// when read (Core Data's relationship faults and batch faulting).
@Suite struct RelationshipFaultTests {
    /// A store holding one person with `count` DVDs, and the person's ID.
    func store(dvds count: Int) throws -> (Stack, ObjectID) {
        let stack = try Stack()
        let context = stack.context()
        let pat = Person(context: context)
        pat.username = "pat"
        for index in 0..<count {
            let dvd = DVD(context: context)
            dvd.title = "dvd \(index)"
            dvd.owner = pat
        }
        try context.save()
        return (stack, pat.objectID)
    }

    @Test func theRelatedObjectsAreFaultsUntilRead() throws {
        let (stack, id) = try store(dvds: 100)
        let context = stack.context()
        let pat = try #require(try context.existingObject(Person.self, with: id))
        let dvds = pat.dvds
        #expect(dvds.count == 100)
        #expect(dvds.allSatisfy { $0.isFault }, "reading the list read no DVD")

        #expect(dvds[0].title == "dvd 0")
        let loaded = dvds.filter { !$0.isFault }.count
        #expect(loaded == RelationshipFaultTests.batch, "reading one fired its batch")
        #expect(dvds[99].title == "dvd 99")
        #expect(dvds.map(\.title) == (0..<100).map { "dvd \($0)" })
    }

    static let batch = FaultBatch.relationshipSize

    @Test func aTargetGoneFromTheStoreIsLeftOutWithoutReadingTheOthers() throws {
        let (stack, id) = try store(dvds: 5)
        let context = stack.context()
        context.automaticallyMergesChangesFromParent = false  // the person stays as read
        let pat = try #require(try context.existingObject(Person.self, with: id))
        _ = pat.username

        let other = stack.context()
        let victim = try #require(try other.existingObject(Person.self, with: id)).dvds[2]
        other.delete(victim)
        try other.save()

        let dvds = pat.dvds
        #expect(dvds.count == 4 && !dvds.contains { $0.objectID == victim.objectID })
        #expect(dvds.allSatisfy { $0.isFault })
    }

    @Test func editsOfAListOfFaultsKeepTheInverses() throws {
        let (stack, id) = try store(dvds: 3)
        let context = stack.context()
        let pat = try #require(try context.existingObject(Person.self, with: id))
        let first = pat.dvds[0]
        pat.dvds.removeFirst()
        let extra = DVD(context: context)
        extra.title = "new"
        pat.dvds.append(extra)
        try context.save()
        #expect(first.owner == nil && extra.owner === pat)
        let check = stack.context()
        let titles = try #require(try check.existingObject(Person.self, with: id)).dvds.map(\.title)
        #expect(titles == ["dvd 1", "dvd 2", "new"])
    }

    @Test func aChildReadsThroughItsParentAsBefore() throws {
        let (stack, id) = try store(dvds: 3)
        let parent = stack.context()
        let child = Context(parent: parent)
        let pat = try #require(try child.existingObject(Person.self, with: id))
        #expect(pat.dvds.map(\.title) == ["dvd 0", "dvd 1", "dvd 2"])
    }
}
