import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A target this context deletes while another save links it elsewhere: the save (under
/// every merge policy) neither fails validation on a link it never made nor leaves a list
/// naming a deleted record. (Found by RelatedCountTests' random operations: such a save threw "relationship
/// 'dvds' points at deleted DVD".)
@Suite struct DeletedTargetMergeTests {
    static let policies: [MergePolicy] = [.error, .objectTrumps, .storeTrumps, .overwrite, .rollback]

    /// Every person's DVDs name it as their owner, in a fresh context.
    static func expectWhole(_ stack: Stack, _ policy: MergePolicy) throws {
        for person in try stack.context().fetch(Person.self) {
            for owned in person.dvds { #expect(owned.owner === person, "\(policy): \(person.username) lists \(owned.title)") }
        }
    }

    /// Ann's list changed here (a DVD added) and there (one moved to Bo); that one is then
    /// deleted here.
    @Test(arguments: policies) func aDeleteHereOfATargetMovedThere(policy: MergePolicy) throws {
        let stack = try Stack()
        let main = stack.context(), other = stack.context()
        main.mergePolicy = policy
        let ann = Person(context: main), bo = Person(context: main)
        ann.username = "ann"
        bo.username = "bo"
        let moved = DVD(context: main), kept = DVD(context: main)
        moved.title = "moved"
        kept.title = "kept"
        moved.owner = ann
        kept.owner = ann
        try main.save()
        let added = DVD(context: main)
        added.title = "added"
        added.owner = ann
        let theirs = try #require(try other.fetch(DVD.self).first { $0.title == "moved" })
        theirs.owner = try other.fetch(Person.self).first { $0.username == "bo" }
        try other.save()
        _ = try main.fetch(DVD.self)        // merged (ann's list, changed on both sides, waits for the save)
        main.delete(moved)
        do {
            try main.save()
        } catch let error as CairnError {
            #expect(error.code == .conflict, "\(policy): \(error)")
        }
        try Self.expectWhole(stack, policy)
    }

    /// A DVD deleted here is moved there to a person with changes here, then deleted there too.
    @Test(arguments: policies) func aDeleteHereOfATargetLinkedThereToAChangedObject(policy: MergePolicy) throws {
        let stack = try Stack()
        let main = stack.context(), other = stack.context()
        main.mergePolicy = policy
        let ann = Person(context: main), cy = Person(context: main)
        ann.username = "ann"
        cy.username = "cy"
        let dvd = DVD(context: main)
        dvd.title = "d"
        dvd.owner = ann
        try main.save()
        main.delete(dvd)
        cy.age = 30                         // cy has changes here
        let theirs = try #require(try other.fetch(DVD.self).first)
        theirs.owner = try other.fetch(Person.self).first { $0.username == "cy" }
        try other.save()
        _ = try main.fetch(Person.self)
        #expect(cy.dvds.isEmpty, "a DVD deleted here is in no list here")
        do {
            try main.save()
        } catch let error as CairnError {
            #expect(error.code == .conflict, "\(policy): \(error)")
        }
        try Self.expectWhole(stack, policy)
    }

    /// A link this context makes to an object it deleted is still refused.
    @Test func aLinkMadeHereToADeletedObjectIsReported() throws {
        let stack = try Stack()
        let context = stack.context()
        let ann = Person(context: context)
        ann.username = "ann"
        let dvd = DVD(context: context)
        dvd.title = "d"
        try context.save()
        context.delete(dvd)
        ann.dvds = [dvd]
        let error = #expect(throws: CairnError.self) { try context.save() }
        #expect(error?.code == .invalidArgument || error?.code == .validation, "\(String(describing: error))")
    }
}
