import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

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

        /// A new DVD titled `title`, owned by the person `owner`, in `context`.
        func giveDVD(_ title: String, to owner: ObjectID, in context: Context) throws -> DVD {
            let dvd = DVD(context: context)
            dvd.title = title
            dvd.owner = try person(owner, in: context)
            return dvd
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
        let d2 = try scene.giveDVD("d2", to: scene.pat, in: scene.b)
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

    /// A moves d1 to Quinn while B renames Pat and gives Pat a new DVD, d2: Pat's list
    /// changed on both sides (a conflict); the rename merges in as another attribute.
    @Test(arguments: policies) func moveAgainstAChange(policy: MergePolicy) throws {
        let scene = try Scene(policy: policy)
        try scene.dvd(scene.d1, in: scene.a).owner = try scene.person(scene.quinn, in: scene.a)
        try scene.person(scene.pat, in: scene.b).name = "Patricia"
        _ = try scene.giveDVD("d2", to: scene.pat, in: scene.b)
        try scene.b.save()
        try scene.a.save()
        try scene.expectWhole(policy)
        let (pat, quinn) = (try scene.titles(of: scene.pat), try scene.titles(of: scene.quinn))
        if policy == .rollback {
            #expect(pat == ["d1", "d2"] && quinn == [], "rollback takes Pat as stored, d1 included")
        } else {
            #expect(pat == ["d2"] && quinn == ["d1"], "both sides' list edits kept")
        }
        let name = try scene.fresh { try $0.existingObject(Person.self, with: scene.pat)?.name }
        #expect(name == "Patricia", "an attribute changed only elsewhere is merged in before the save")
    }

    /// B renames Pat while A, with nothing else of Pat's changed, moves d1 to Quinn: the
    /// rename is merged into Pat before A's save, which is then no conflict.
    @Test(arguments: policies) func moveAgainstARenameMerges(policy: MergePolicy) throws {
        let scene = try Scene(policy: policy)
        try scene.dvd(scene.d1, in: scene.a).owner = try scene.person(scene.quinn, in: scene.a)
        try scene.person(scene.pat, in: scene.b).name = "Patricia"
        try scene.b.save()
        try scene.a.save()
        try scene.expectWhole(policy)
        #expect(try scene.titles(of: scene.pat) == [] && scene.titles(of: scene.quinn) == ["d1"])
        #expect(try scene.fresh { try $0.existingObject(Person.self, with: scene.pat)?.name } == "Patricia")
    }

    /// A renames Pat while B gives Pat a new DVD, d2.
    @Test(arguments: policies) func changeAgainstAnAddition(policy: MergePolicy) throws {
        let scene = try Scene(policy: policy)
        try scene.person(scene.pat, in: scene.a).name = "Patricia"
        _ = try scene.giveDVD("d2", to: scene.pat, in: scene.b)
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
        box.shelf = try b.existingObject(Shelf.self, with: shelf.objectID)
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

    // A deletes a DVD that B moved (each case made A's save fail validation, or left a
    // person naming the deleted DVD in the store, before the save settled such links).

    /// Saves `context`: under `.error` it may fail only as a conflict (then rolled back);
    /// under the other policies it must save.
    static func save(_ context: Context, _ policy: MergePolicy) throws {
        do {
            try context.save()
        } catch let error as CairnError where policy == .error && error.code == .conflict {
            context.rollback()
        }
    }

    /// A gives Pat a new DVD, d2; B moves d1 to Quinn; A takes that in (Pat's list
    /// changed on both sides: A keeps its own until the save, d1 included) and deletes d1.
    @Test(arguments: [MergePolicy.error] + policies) func deleteOfAMovedDVDStillInAChangedList(policy: MergePolicy) throws {
        let scene = try Scene(policy: policy)
        _ = try scene.giveDVD("d2", to: scene.pat, in: scene.a)
        try scene.dvd(scene.d1, in: scene.b).owner = try scene.person(scene.quinn, in: scene.b)
        try scene.b.save()
        scene.a.processExternalChanges()
        scene.a.delete(try scene.dvd(scene.d1, in: scene.a))
        try Self.save(scene.a, policy)
        try scene.expectWhole(policy)
        if policy != .error {
            #expect(try scene.fresh { try $0.existingObject(DVD.self, with: scene.d1) } == nil)
            #expect(try scene.titles(of: scene.quinn) == [])
        }
    }

    /// A gives Quinn a new DVD; B moves d1 to Quinn; A takes that in (keeping its own list
    /// of Quinn's), deletes d1 (which Quinn's list here does not name), then deletes the
    /// new DVD, so that Quinn has no change left. B gives Quinn d2, and A reads Quinn again,
    /// d1 included: its save must take d1 out of Quinn's list.
    @Test(arguments: [MergePolicy.error] + policies) func deleteOfAMovedDVDThatAPartnerReadsAgain(policy: MergePolicy) throws {
        let scene = try Scene(policy: policy)
        let extra = try scene.giveDVD("extra", to: scene.quinn, in: scene.a)
        try scene.dvd(scene.d1, in: scene.b).owner = try scene.person(scene.quinn, in: scene.b)
        try scene.b.save()
        scene.a.processExternalChanges()
        scene.a.delete(try scene.dvd(scene.d1, in: scene.a))
        scene.a.delete(extra)
        _ = try scene.giveDVD("d2", to: scene.quinn, in: scene.b)
        try scene.b.save()
        scene.a.processExternalChanges()
        try Self.save(scene.a, policy)
        try scene.expectWhole(policy)
        #expect(try scene.fresh { try $0.existingObject(DVD.self, with: scene.d1) } == nil)
        #expect(try scene.titles(of: scene.quinn) == ["d2"])
    }

    /// A deletes d1; B moves it to Quinn; A takes that in (Quinn, unchanged here, reads
    /// d1 into its list) and then changes Quinn.
    @Test(arguments: [MergePolicy.error] + policies) func deleteOfADVDMovedToAPersonChangedLater(policy: MergePolicy) throws {
        let scene = try Scene(policy: policy)
        scene.a.delete(try scene.dvd(scene.d1, in: scene.a))
        try scene.dvd(scene.d1, in: scene.b).owner = try scene.person(scene.quinn, in: scene.b)
        try scene.b.save()
        scene.a.processExternalChanges()
        try scene.person(scene.quinn, in: scene.a).age += 1
        try Self.save(scene.a, policy)
        try scene.expectWhole(policy)
        let d1Left = try scene.fresh { try $0.existingObject(DVD.self, with: scene.d1) } != nil
        let quinn = try scene.titles(of: scene.quinn)
        switch policy {
        case .storeTrumps, .rollback: #expect(d1Left && quinn == ["d1"], "the store's move brings d1 back")
        case .objectTrumps, .overwrite: #expect(!d1Left && quinn == [])
        case .error: break
        }
    }
}


/// Delete rules and inverses applied to related objects this context read before another
/// context's save changed them (a fault that fires reads the store as it is now; a loaded
/// object waits for the next merge).
@Suite struct StalePartnerTests {
    /// A moves d1 from Pat to Quinn. This context read Quinn before that save, and d1
    /// only after it: deleting d1 must take it out of Quinn's list as the store has it.
    /// (The delete rule ran on the older Quinn, found nothing to remove, and Quinn was
    /// not saved: Quinn's list named a deleted DVD.)
    @Test func aDeleteLetsGoOfARelatedObjectReadBeforeAnotherSave() throws {
        let stack = try Stack()
        let setup = stack.context()
        let pat = Person(context: setup), quinn = Person(context: setup), d1 = DVD(context: setup)
        pat.username = "pat"
        quinn.username = "quinn"
        d1.title = "d1"
        d1.owner = pat
        try setup.save()
        let context = stack.context()
        let people = try context.fetch(Person.self)
        #expect(people.map(\.username) == ["pat", "quinn"] && people[1].dvds.isEmpty)  // read; d1 not yet
        let mover = stack.context()
        try #require(try mover.existingObject(DVD.self, with: d1.objectID)).owner =
            try mover.existingObject(Person.self, with: quinn.objectID)
        try mover.save()
        let ours = try #require(people[0].dvds.first)  // fires now: owned by Quinn
        #expect(ours.owner === people[1])
        context.delete(ours)
        try context.save()
        #expect(stack.coordinator.store.verify().isEmpty)
        let reader = stack.context()
        #expect(try reader.fetch(Person.self).map { $0.dvds.count } == [0, 0])
    }

    /// A record deleted and then saved again under its ID by another context's merge
    /// policy: a fault that had found it gone reads it again, so a cascade reaches it.
    /// (The cascade skipped it as deleted, and the store kept a DVD whose owner was gone.)
    @Test func aCascadeReachesARecordSavedAgainAfterItsFaultFoundItGone() throws {
        let stack = try Stack()
        let setup = stack.context()
        let pat = Person(context: setup), d1 = DVD(context: setup)
        pat.username = "pat"
        d1.title = "d1"
        d1.owner = pat
        try setup.save()
        let context = stack.context()
        // Faults, not fired yet: they read the store when first read, with no merge.
        let ours = try #require(context.object(for: pat.objectID.recordID) as? Person)
        let fault = try #require(context.object(for: d1.objectID.recordID) as? DVD)
        let keeper = stack.context()
        keeper.mergePolicy = .objectTrumps
        try #require(try keeper.existingObject(DVD.self, with: d1.objectID)).title = "kept"
        let deleter = stack.context()
        deleter.delete(try #require(try deleter.existingObject(DVD.self, with: d1.objectID)))
        try deleter.save()
        #expect(fault.title == "", "the fault found its record gone")
        try keeper.save()  // object-trumps: d1 saved again under its ID, Pat lists it
        context.delete(ours)  // Pat read now: lists d1
        try context.save()
        #expect(stack.coordinator.store.verify().isEmpty)
        let reader = stack.context()
        #expect(try reader.count(DVD.self) == 0, "the cascade reached d1")
    }
}
