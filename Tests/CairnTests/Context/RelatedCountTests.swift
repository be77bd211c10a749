import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// `person.$dvds.count` and `.isEmpty`: what `person.dvds.count` says, without an object
/// per target when the stored list vouches for its targets.
@Suite struct RelatedCountTests {
    /// Every existing person of `context`: its counts agree with its lists.
    static func check(_ context: Context, _ label: String) throws {
        for person in try context.fetch(Person.self) {
            #expect(person.$dvds.count == person.dvds.count, "\(label): \(person.username)'s dvds")
            #expect(person.$borrowed.count == person.borrowed.count, "\(label): \(person.username)'s borrowed")
            #expect(person.$dvds.isEmpty == person.dvds.isEmpty)
        }
    }

    /// Random operations of two contexts: the counts agree with the lists, and the store
    /// stays whole, under every merge policy. A save fails only as a conflict (a DVD
    /// deleted here that another save moved made it fail validation, or leave a person
    /// naming a deleted DVD in the store).
    @Test(arguments: [1, 2, 3, 17, 22, 33] as [UInt64], [MergePolicy.error, .storeTrumps, .objectTrumps, .overwrite, .rollback])
    func countsAgreeWithTheListsOverRandomOperations(seed: UInt64, policy: MergePolicy) throws {
        var random = ResultsChangeApplyTests.Generator(state: seed)
        let stack = try Stack()
        let main = stack.context(), other = stack.context()
        main.mergePolicy = policy
        var serial = 0
        for step in 0..<200 {
            serial += 1
            let people = try main.fetch(Person.self), dvds = try main.fetch(DVD.self)
            switch Int.random(in: 0..<10, using: &random) {
            case 0...1:
                Person(context: main).username = "p\(serial)"
            case 2...4 where !people.isEmpty:
                let dvd = DVD(context: main)
                dvd.title = "d\(serial)"
                dvd.owner = people.randomElement(using: &random)!
                if Bool.random(using: &random) { dvd.borrower = people.randomElement(using: &random)! }
            case 5 where !dvds.isEmpty:
                let dvd = dvds.randomElement(using: &random)!
                dvd.borrower = nil  // (no action on the borrower's list: cleared first)
                main.delete(dvd)
            case 6:
                // (A save that clashes with the other context's is refused and rolled back.)
                do { try main.save() } catch let error as CairnError where error.code == .conflict {
                    main.rollback()
                }
            case 7:
                // Another context deletes or moves a saved DVD.
                if let dvd = try other.fetch(DVD.self).randomElement(using: &random) {
                    if Bool.random(using: &random) {
                        dvd.borrower = nil
                        other.delete(dvd)
                    } else { dvd.owner = try other.fetch(Person.self).randomElement(using: &random) }
                    do { try other.save() } catch let error as CairnError where error.code == .conflict {
                        other.rollback()
                    }
                }
            case 8:
                let child = Context(parent: main)
                try Self.check(child, "child at \(step)")
            default:
                main.processExternalChanges()
            }
            let problems = stack.coordinator.store.verify()
            #expect(problems.isEmpty, "\(policy) step \(step): \(problems.prefix(3))")
            if !problems.isEmpty { return }
            try Self.check(main, "step \(step)")
            try Self.check(stack.context(), "fresh at \(step)")
        }
    }

    @Test func aCountOfASavedListMakesNoObjectPerTarget() throws {
        let stack = try Stack()
        let writer = stack.context()
        let ann = Person(context: writer)
        ann.username = "ann"
        for index in 0..<50 {
            let dvd = DVD(context: writer)
            dvd.title = "d\(index)"
            dvd.owner = ann
        }
        try writer.save()
        let reader = stack.context()
        let person = try #require(try reader.fetch(Person.self).first)
        let before = reader.registeredObjects.count
        #expect(person.$dvds.count == 50 && !person.$dvds.isEmpty)
        #expect(reader.registeredObjects.count == before, "no fault made for the DVDs")
        // One deleted here is not counted.
        let one = try #require(person.dvds.first)
        reader.delete(one)
        #expect(person.$dvds.count == 49 && person.dvds.count == 49)
    }
}
