import Foundation
import Testing
@testable import Cairn

/// Conflicts resolved by a merge policy leave the saved graph whole: no reference to a
/// deleted record, no relationship whose inverse does not point back. Context A uses the
/// policy and changes first;
/// context B then saves, and A saves last. (Each case left the store broken under every policy
/// but `.error` when each conflicting object was merged on its own.)
@Suite struct ConflictGraphTests {
    static let policies: [MergePolicy] = [.storeTrumps, .objectTrumps, .overwrite, .rollback]

    /// A store holding Pat (with DVD d1) and Quinn, and two contexts that read them.
    struct Scene {
        let stack: Stack
        let a: Context, b: Context
        let pat: ObjectID, quinn: ObjectID, d1: ObjectID

        init(policy: MergePolicy) throws {
            stack = try Stack()
            let setup = stack.context()
            let p = Person(context: setup), q = Person(context: setup), d = DVD(context: setup)
            p.username = "pat"
            q.username = "quinn"
            d.title = "d1"
            p.dvds = [d]
            try setup.save()
            pat = p.objectID
            quinn = q.objectID
            d1 = d.objectID
            a = stack.context()
            a.mergePolicy = policy
            b = stack.context()
            for context in [a, b] {  // both read the whole graph
                for person in try context.fetch(Person.self) { _ = person.dvds.map(\.title) }
            }
        }

        func person(_ id: ObjectID, in context: Context) throws -> Person {
            try #require(try context.existingObject(Person.self, with: id))
        }

        func dvd(_ id: ObjectID, in context: Context) throws -> DVD {
            try #require(try context.existingObject(DVD.self, with: id))
        }

        /// The store verifies clean, and a fresh context sees every link from both ends.
        func expectWhole(_ policy: MergePolicy, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let problems = stack.coordinator.store.verify()
            #expect(problems.isEmpty, "\(policy): \(problems)", sourceLocation: sourceLocation)
            let fresh = stack.context()
            for dvd in try fresh.fetch(DVD.self) {
                if let owner = dvd.owner {
                    #expect(owner.dvds.contains { $0 === dvd }, "\(policy): \(dvd.title)'s owner does not list it", sourceLocation: sourceLocation)
                }
            }
            for person in try fresh.fetch(Person.self) {
                for dvd in person.dvds {
                    #expect(dvd.owner === person, "\(policy): \(person.username) lists \(dvd.title), whose owner is elsewhere", sourceLocation: sourceLocation)
                }
            }
        }

        /// `body` run on a new context, alive while it runs (an object's relationships
        /// read as empty once its context is gone).
        func fresh<T>(_ body: (Context) throws -> T) rethrows -> T {
            let context = stack.context()
            return try withExtendedLifetime(context) { try body(context) }
        }

        func titles(of id: ObjectID) throws -> [String]? {
            try fresh { try $0.existingObject(Person.self, with: id).map { $0.dvds.map(\.title).sorted() } }
        }
    }

    /// A deletes Pat (cascading to d1) while B renames Pat.
    @Test(arguments: policies) func deleteAgainstAChange(policy: MergePolicy) throws {
        let scene = try Scene(policy: policy)
        scene.a.delete(try scene.person(scene.pat, in: scene.a))
        try scene.person(scene.pat, in: scene.b).name = "Patricia"
        try scene.b.save()
        try scene.a.save()
        try scene.expectWhole(policy)
        let survivor = try scene.titles(of: scene.pat)
        switch policy {
        case .storeTrumps, .rollback:
            // The store's change brings Pat back; what the delete cascaded to stays deleted.
            #expect(survivor == [])
        case .objectTrumps, .overwrite:
            #expect(survivor == nil)
        case .error: break
        }
        #expect(try scene.fresh { try $0.existingObject(DVD.self, with: scene.d1) } == nil)
    }

    /// A deletes Pat while B gives Pat a new DVD, d2.
    @Test(arguments: policies) func deleteAgainstAnAddition(policy: MergePolicy) throws {
        let scene = try Scene(policy: policy)
        scene.a.delete(try scene.person(scene.pat, in: scene.a))
        let d2 = DVD(context: scene.b)
        d2.title = "d2"
        d2.owner = try scene.person(scene.pat, in: scene.b)
        try scene.b.save()
        try scene.a.save()
        try scene.expectWhole(policy)
        let survivor = try scene.titles(of: scene.pat)
        let d2Left = try scene.fresh { try $0.existingObject(DVD.self, with: d2.objectID) } != nil
        switch policy {
        case .storeTrumps, .rollback:
            #expect(survivor == ["d2"] && d2Left)
        case .objectTrumps, .overwrite:
            // The delete stands, and its cascade reaches the DVD added meanwhile.
            #expect(survivor == nil && !d2Left)
        case .error: break
        }
    }

    /// A moves d1 to Quinn while B renames Pat.
    @Test(arguments: policies) func moveAgainstAChange(policy: MergePolicy) throws {
        let scene = try Scene(policy: policy)
        try scene.dvd(scene.d1, in: scene.a).owner = try scene.person(scene.quinn, in: scene.a)
        try scene.person(scene.pat, in: scene.b).name = "Patricia"
        try scene.b.save()
        try scene.a.save()
        try scene.expectWhole(policy)
        let (pat, quinn) = (try scene.titles(of: scene.pat), try scene.titles(of: scene.quinn))
        if policy == .rollback {
            #expect(pat == ["d1"] && quinn == [], "rollback takes Pat as stored, d1 included")
        } else {
            #expect(pat == [] && quinn == ["d1"])
        }
        let name = try scene.fresh { try $0.existingObject(Person.self, with: scene.pat)?.name }
        #expect(name == (policy == .overwrite ? nil : "Patricia"), "overwrite writes every attribute as this context had it")
    }

    /// A renames Pat while B gives Pat a new DVD, d2.
    @Test(arguments: policies) func changeAgainstAnAddition(policy: MergePolicy) throws {
        let scene = try Scene(policy: policy)
        try scene.person(scene.pat, in: scene.a).name = "Patricia"
        let d2 = DVD(context: scene.b)
        d2.title = "d2"
        d2.owner = try scene.person(scene.pat, in: scene.b)
        try scene.b.save()
        try scene.a.save()
        try scene.expectWhole(policy)
        #expect(try scene.titles(of: scene.pat) == ["d1", "d2"], "no policy takes away a link this context never touched")
        let name = try scene.fresh { try $0.existingObject(Person.self, with: scene.pat)?.name }
        #expect(name == (policy == .rollback ? nil : "Patricia"))
    }

    /// A and B move d1 to different people.
    @Test(arguments: policies) func moveAgainstAMove(policy: MergePolicy) throws {
        let scene = try Scene(policy: policy)
        try scene.dvd(scene.d1, in: scene.a).owner = try scene.person(scene.quinn, in: scene.a)
        let ray = Person(context: scene.b)
        ray.username = "ray"
        try scene.dvd(scene.d1, in: scene.b).owner = ray
        try scene.b.save()
        try scene.a.save()
        try scene.expectWhole(policy)
        let owner = try scene.fresh { try $0.existingObject(DVD.self, with: scene.d1)?.owner?.username }
        #expect(owner == (policy == .objectTrumps || policy == .overwrite ? "quinn" : "ray"))
    }

    /// A deletes a shelf while B puts a box on it: the deny rule now refuses the delete.
    @Test(arguments: policies) func denyAgainstAnAddition(policy: MergePolicy) throws {
        let stack = try Stack()
        let setup = stack.context()
        let shelf = Shelf(context: setup)
        shelf.label = "top"
        try setup.save()
        let a = stack.context(), b = stack.context()
        a.mergePolicy = policy
        a.delete(try #require(try a.existingObject(Shelf.self, with: shelf.objectID)))
        let box = Box(context: b)
        box.shelf = try #require(try b.existingObject(Shelf.self, with: shelf.objectID))
        try b.save()
        if policy == .objectTrumps || policy == .overwrite {
            #expect { try a.save() } throws: { ($0 as? CairnError)?.code == .validation }
        } else {
            try a.save()
        }
        #expect(stack.coordinator.store.verify().isEmpty)
        let reader = stack.context()
        #expect(try reader.fetch(Box.self).first?.shelf?.label == "top")
    }
}
