import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A child context's save hands its parent what the child changed, and only that.
@Suite struct ChildSaveTests {
    /// The parent changes a value after the child read the object; the child changes
    /// another. The child's save keeps the parent's change (it had put back the value the
    /// child read).
    @Test func aValueTheChildDidNotChangeStaysTheParents() throws {
        let fixture = try FetchFixture(seed: 3, count: 10)
        let context = fixture.context
        let item = try #require(try context.fetch(FetchQuery(Item.self)).first)
        let child = Context(parent: context)
        let mine = try #require(try child.existingObject(Item.self, with: item.objectID))
        _ = mine.score                                      // read in the child
        item.score = 1234
        mine.rank = 77
        try child.save()
        #expect(item.rank == 77)
        #expect(item.score == 1234)
    }

    /// The child renames a group the parent has since given an item, and adds another
    /// item to it: the parent's group holds both items, each names the group, and so does
    /// the store after the parent's save.
    @Test func aRelationshipListTakesTheChildsEditsIntoTheParents() throws {
        let fixture = try FetchFixture(seed: 4, count: 30)
        let context = fixture.context
        let groups = try context.fetch(FetchQuery(Group.self))
        let group = try #require(groups.first), elsewhere = try #require(groups.last)
        let items = try context.fetch(FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: "group == nil")))
        #expect(items.count >= 2)
        let (parentAdds, childAdds) = (items[0], items[1])
        let child = Context(parent: context)
        let childGroup = try #require(try child.existingObject(Group.self, with: group.objectID))
        let before = Set(childGroup.items.map(\.objectID))  // read in the child
        parentAdds.group = group
        childGroup.title = "renamed"
        let taken = try #require(childGroup.items.first)
        try #require(try child.existingObject(Item.self, with: childAdds.objectID)).group = childGroup
        taken.group = try #require(try child.existingObject(Group.self, with: elsewhere.objectID))
        try child.save()

        let expected = before.subtracting([taken.objectID]).union([parentAdds.objectID, childAdds.objectID])
        #expect(group.title == "renamed")
        #expect(Set(group.items.map(\.objectID)) == expected)
        #expect(parentAdds.group === group && childAdds.group === group)
        try context.save()
        let reader = fixture.stack.context()
        let stored = try #require(try reader.existingObject(Group.self, with: group.objectID))
        #expect(Set(stored.items.map(\.objectID)) == expected)
        for item in stored.items { #expect(item.group === stored) }
        let owners = try reader.fetch(FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: "group == %@", arguments: [.reference(group.objectID.recordID.rawValue)])))
        #expect(Set(owners.map(\.objectID)) == expected)
    }

    /// A group changed here (renamed) loses an item another context deleted, as the stored
    /// group did: its save had failed on a list naming the deleted item.
    @Test func aChangedObjectDropsARecordDeletedElsewhere() throws {
        let fixture = try FetchFixture(seed: 5, count: 40)
        let context = fixture.context
        context.mergePolicy = .objectTrumps
        let group = try #require(try context.fetch(FetchQuery(Group.self)).first { $0.items.count >= 2 })
        let doomed = group.items[0].objectID, kept = group.items[1].objectID
        group.title = "renamed"
        let other = fixture.stack.context()
        try other.delete(#require(try other.existingObject(Item.self, with: doomed)))
        try other.save()
        context.processExternalChanges()
        #expect(!group.items.map(\.objectID).contains(doomed))
        try context.save()
        let reader = fixture.stack.context()
        let stored = try #require(try reader.existingObject(Group.self, with: group.objectID))
        #expect(stored.title == "renamed")
        #expect(!stored.items.map(\.objectID).contains(doomed) && stored.items.map(\.objectID).contains(kept))
    }

    /// An object changed and changed back (by undo) takes in a delete elsewhere as an
    /// unchanged one: it re-reads, and the context has nothing to save. (Found by review.)
    @Test func anUnchangedObjectIsLeftToRefresh() throws {
        let fixture = try FetchFixture(seed: 6, count: 40)
        let context = fixture.context
        let group = try #require(try context.fetch(FetchQuery(Group.self)).first { $0.items.count >= 2 })
        let doomed = group.items[0].objectID
        group.title = "renamed"
        context.undo()
        let other = fixture.stack.context()
        try other.delete(#require(try other.existingObject(Item.self, with: doomed)))
        try other.save()
        context.processExternalChanges()
        #expect(!context.hasChanges)
        #expect(!group.items.map(\.objectID).contains(doomed))
        try context.save()
    }

    /// The parent gives a group an item after the child read the group; the child deletes
    /// that item and takes another out of the group. The parent's group holds neither, and
    /// its save stands. (Found by review: the merged list kept the deleted item.)
    @Test func anItemTheChildDeletedLeavesTheParentsList() throws {
        let fixture = try FetchFixture(seed: 10, count: 30)
        let context = fixture.context
        let group = try #require(try context.fetch(FetchQuery(Group.self)).first { $0.items.count >= 2 })
        let loose = try #require(try context.fetch(FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: "group == nil"))).first)
        let child = Context(parent: context)
        let childGroup = try #require(try child.existingObject(Group.self, with: group.objectID))
        let taken = try #require(childGroup.items.first)
        loose.group = group                                        // after the child read the group
        child.delete(try #require(try child.existingObject(Item.self, with: loose.objectID)))
        taken.group = nil
        try child.save()
        #expect(!group.items.contains { $0.objectID == loose.objectID || $0.objectID == taken.objectID })
        try context.save()
    }

    /// The child moves an item to one group while the parent moved it to another: the
    /// child's move stands, and only its group lists the item.
    @Test func theChildsMoveLeavesOnlyItsGroupListingTheItem() throws {
        let fixture = try FetchFixture(seed: 11, count: 30)
        let context = fixture.context
        let groups = try context.fetch(FetchQuery(Group.self))
        #expect(groups.count == 3)
        let item = try #require(groups[0].items.first)
        let child = Context(parent: context)
        let mine = try #require(try child.existingObject(Item.self, with: item.objectID))
        _ = mine.group
        item.group = groups[2]                                     // the parent's move
        mine.group = try child.existingObject(Group.self, with: groups[1].objectID)
        try child.save()
        #expect(item.group === groups[1])
        #expect(groups.map { $0.items.contains { $0 === item } } == [false, true, false])
        try context.save()
        let reader = fixture.stack.context()
        let stored = try reader.fetch(FetchQuery(Group.self))
        #expect(stored.map { $0.items.contains { $0.objectID == item.objectID } } == [false, true, false])
    }

    /// The parent gives a group an item after the child read the group; the child deletes
    /// the item and changes nothing else. The parent's group lets go of it. (Found by
    /// review: the child's delete rule saw the group's older list, so the list was not
    /// pushed.)
    @Test func anItemTheChildDeletedLeavesAListTheChildDidNotChange() throws {
        let fixture = try FetchFixture(seed: 14, count: 30)
        let context = fixture.context
        let group = try #require(try context.fetch(FetchQuery(Group.self)).first)
        let loose = try #require(try context.fetch(FetchQuery(Item.self, fetchPredicate: try FetchPredicate(format: "group == nil"))).first)
        let child = Context(parent: context)
        _ = try #require(try child.existingObject(Group.self, with: group.objectID)).items
        loose.group = group
        child.delete(try #require(try child.existingObject(Item.self, with: loose.objectID)))
        try child.save()
        #expect(!group.items.contains { $0.objectID == loose.objectID })
        try context.save()
    }

    /// The child deletes an item of a group and reorders the rest: the parent's list takes
    /// the child's order. (Found by review: taking the deleted item out first made the
    /// parent's list look changed, and the merge kept the parent's order.)
    @Test func aDeleteAndAReorderKeepTheChildsOrder() throws {
        let fixture = try FetchFixture(seed: 15, count: 40)
        let context = fixture.context
        let group = try #require(try context.fetch(FetchQuery(Group.self)).first { $0.items.count >= 3 })
        let child = Context(parent: context)
        let mine = try #require(try child.existingObject(Group.self, with: group.objectID))
        let items = mine.items
        child.delete(items[0])
        mine.items = Array(items.dropFirst().reversed())
        try child.save()
        #expect(group.items.map(\.objectID) == items.dropFirst().reversed().map(\.objectID))
    }

    /// The parent gives a person a DVD after the child read the person; the child deletes
    /// the person, whose DVDs cascade: the parent's new DVD goes too.
    @Test func aCascadeReachesWhatTheParentAddedSinceTheChildRead() throws {
        let stack = try Stack()
        let context = stack.context()
        let person = Person(context: context)
        person.username = "p"
        let kept = DVD(context: context)
        kept.owner = person
        try context.save()
        let child = Context(parent: context)
        let mine = try #require(try child.existingObject(Person.self, with: person.objectID))
        _ = mine.dvds
        let added = DVD(context: context)
        added.title = "added"
        added.owner = person
        child.delete(mine)
        try child.save()
        #expect(person.isDeleted && kept.isDeleted && !added.exists)    // (new here: deleted, it is gone)
        try context.save()
        #expect(try stack.context().fetch(FetchQuery(DVD.self)).isEmpty)
    }
}
