import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

@Suite struct UniquenessTests {
    final class Account: ManagedObject {
        @Attribute var email: String = ""
        @Attribute var region: String = ""
        @Attribute var number: Int = 0
        @Attribute var note: String? = nil
        override class var uniqueness: [[String]] { [["email"], ["region", "number"]] }
    }

    func stack() throws -> Stack { try Stack(model: try Model(Account.self)) }

    @Test func violationsNameEntityAttributesAndValues() throws {
        let stack = try stack()
        let context = stack.context()
        let a = Account(context: context)
        a.email = "a@x"; a.region = "eu"; a.number = 1
        try context.save()
        let b = Account(context: context)
        b.email = "a@x"; b.region = "us"; b.number = 1
        #expect { try context.save() } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .validation && error.message.contains("Account (email)") && error.message.contains("email = \"a@x\"")
        }
        b.email = "b@x"
        b.region = "eu"
        #expect { try context.save() } throws: { ($0 as? CairnError)?.message.contains("region = \"eu\", number = 1") == true }
        b.number = 2
        try context.save()
        // Two new objects colliding with each other in one save.
        let c = Account(context: context), d = Account(context: context)
        c.email = "same"; d.email = "same"; c.number = 3; d.number = 4
        #expect(throws: CairnError.self) { try context.save() }
        d.email = "other"
        try context.save()
        // Swapping values between two saved objects in one save is fine.
        a.email = "tmp"; try context.save()
        a.email = "b@x"; b.email = "a@x"
        try context.save()
    }

    /// Within one save, values equal as the check against stored records compares them
    /// collide: two spellings of one string (composed and decomposed), as they do across
    /// two saves.
    @Test func equalSpellingsCollideWithinASaveAsAcrossSaves() throws {
        let stack = try stack()
        let context = stack.context()
        let a = Account(context: context), b = Account(context: context)
        a.email = "caf\u{E9}"; a.number = 1
        b.email = "cafe\u{301}"; b.number = 2
        #expect { try context.save() } throws: { ($0 as? CairnError)?.code == .validation }
        context.rollback()
        let c = Account(context: context)
        c.email = "caf\u{E9}"; c.number = 1
        try context.save()
        let d = Account(context: context)
        d.email = "cafe\u{301}"; d.number = 2
        #expect { try context.save() } throws: { ($0 as? CairnError)?.code == .validation }
    }

    /// Two new objects with one unique key in one save, under a policy that merges, are
    /// merged into one by the policy (the later one's values win under object trumps and
    /// overwrite, the first one's under store trumps and rollback); both were stored.
    @Test(arguments: [MergePolicy.objectTrumps, .overwrite, .storeTrumps, .rollback])
    func duplicatesInsertedTogetherAreMergedByThePolicy(policy: MergePolicy) throws {
        let stack = try stack()
        let context = stack.context()
        context.mergePolicy = policy
        let first = Account(context: context), second = Account(context: context)
        first.email = "dup"; first.region = "eu"; first.number = 1; first.note = "first"
        second.email = "dup"; second.region = "us"; second.number = 2
        try context.save()
        let saved = try stack.context().fetch(FetchQuery(Account.self))
        #expect(saved.count == 1, "\(policy): \(saved.count) accounts stored")
        let laterWins = policy == .objectTrumps || policy == .overwrite
        #expect(saved.first?.region == (laterWins ? "us" : "eu"), "\(policy)")
        #expect(saved.first?.note == "first", "\(policy): a value only one of them has is kept")
        #expect(stack.coordinator.store.verify().isEmpty)
        // Through two children, each pushing one before the parent saves.
        for (index, child) in [Context(parent: context), Context(parent: context)].enumerated() {
            let account = Account(context: child)
            account.email = "child"; account.region = "r\(index)"; account.number = 10 + index
            try child.save()
        }
        try context.save()
        #expect(try stack.context().fetch(FetchQuery(Account.self, format: "email == 'child'")).count == 1, "\(policy)")
        #expect(stack.coordinator.store.verify().isEmpty, "\(stack.coordinator.store.verify())")
    }

    /// An object whose values a merge of the same save changes is judged by its new
    /// values. Here a new account takes a stored one's email, so the policy merges it
    /// into this context's changed copy of that account (later in ID order), whose region
    /// and number become the new account's: they are another stored account's, which the
    /// save names. (Judged by the values it had, the copy would pass, and the store
    /// checks again only when other commits came between.)
    @Test func aMergedObjectIsJudgedByTheValuesTheMergeGaveIt() throws {
        let stack = try stack()
        let setup = stack.context()
        let taken = Account(context: setup)
        taken.email = "t@x"; taken.region = "eu"; taken.number = 1
        try setup.save()
        let context = stack.context()
        context.mergePolicy = .objectTrumps
        let new = Account(context: context)  // (its ID comes before the next save's)
        let other = stack.context()
        let later = Account(context: other)
        later.email = "m@x"; later.region = "us"; later.number = 7
        try other.save()
        let mine = try #require(try context.fetch(FetchQuery(Account.self, format: "email == 'm@x'")).first)
        mine.note = "changed here"
        new.email = "m@x"; new.region = "eu"; new.number = 1
        #expect(new.recordID.serial < mine.recordID.serial)
        #expect { try context.save() } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .validation && error.message.contains("(region, number) violated")
                && error.message.contains("region = \"eu\", number = 1")
        }
    }

    /// Eight contexts on eight threads insert the same 150 emails under `.error`: each
    /// email is stored once (uniqueness is decided with the commit, not only before it,
    /// where two contexts could both find it free), and verify is clean.
    @Test func concurrentInsertsOfOneKeyStoreItOnce() throws {
        let stack = try stack()
        let coordinator = stack.coordinator, model = stack.model
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            let context = Context(coordinator: coordinator, model: model)
            context.undoManager.isEnabled = false
            for n in 0..<150 {
                let account = Account(context: context)
                account.email = "user\(n)"
                account.region = "w\(worker)"
                account.number = n
                do { try context.save() } catch { context.rollback() }
            }
        }
        let accounts = try stack.context().fetch(FetchQuery(Account.self))
        #expect(accounts.count == 150, "\(accounts.count) accounts for 150 emails")
        #expect(stack.coordinator.store.verify().isEmpty, "\(stack.coordinator.store.verify().prefix(3))")
    }

    /// The store itself refuses a commit whose unique values another record holds.
    @Test func theStoreRefusesACommitThatRepeatsUniqueValues() throws {
        let stack = try stack()
        let store = stack.coordinator.store
        let entity = try #require(store.schema.entity(named: "Account"))
        func record(_ serial: UInt64, _ email: String, _ number: Int64) -> Change {
            .put(RecordID(entity: entity.number, serial: serial), [.string(email), .string("eu"), .int64(number), .null])
        }
        try store.commit([record(1, "a", 1)])
        #expect { try store.commit([record(2, "a", 2)]) } throws: { ($0 as? CairnError)?.code == .conflict }
        #expect { try store.commit([record(2, "b", 1)]) } throws: { ($0 as? CairnError)?.message.contains("region = ") == true }
        #expect(throws: CairnError.self) { try store.commit([record(2, "c", 5), record(3, "c", 6)]) }
        // A record that gives its values up in the same transaction frees them.
        try store.commit([record(1, "moved", 1), record(2, "a", 2)])
        #expect(store.verify().isEmpty)
    }

    @Test func objectTrumpsUpserts() throws {
        var stack = try stack()
        let context = stack.context()
        let original = Account(context: context)
        original.email = "u@x"; original.note = "old"; original.region = "eu"; original.number = 9
        try context.save()
        let other = stack.context()
        other.mergePolicy = .objectTrumps
        let incoming = Account(context: other)
        incoming.email = "u@x"; incoming.note = "new"; incoming.region = "eu"; incoming.number = 10
        try other.save()
        #expect(incoming.objectID == original.objectID, "the new object took the existing record's ID")
        stack = try stack.reopened()
        let reader = stack.context()
        let all = try reader.fetch(Account.self)
        #expect(all.count == 1 && all[0].note == "new" && all[0].number == 10)
    }

    final class Member: ManagedObject {
        @Attribute var handle: String = ""
        @ToMany(inverse: "owner") var pets: [Pet]
        override class var uniqueness: [[String]] { [["handle"]] }
    }
    final class Pet: ManagedObject {
        @Attribute var name: String = ""
        @ToOne(inverse: "pets") var owner: Member?
    }
    final class Team: ManagedObject {
        @Attribute var title: String = ""
        @ToMany var members: [Member]
    }

    /// Upserted duplicates take the stored records' IDs, and every reference to them made
    /// in the saving context follows: to-ones, inverse lists, and lists without an inverse
    /// (a list naming both a duplicate and its record keeps one of them).
    @Test func referencesToUpsertedObjectsFollowThem() throws {
        let stack = try Stack(model: try Model(Member.self, Pet.self, Team.self))
        let first = stack.context()
        let ann = Member(context: first), bob = Member(context: first)
        ann.handle = "ann"; bob.handle = "bob"
        try first.save()
        let second = stack.context()
        second.mergePolicy = .objectTrumps
        let newAnn = Member(context: second), newBob = Member(context: second), cat = Member(context: second)
        newAnn.handle = "ann"; newBob.handle = "bob"; cat.handle = "cat"
        let pets = (0..<3).map { index -> Pet in
            let pet = Pet(context: second)
            pet.name = "pet\(index)"
            return pet
        }
        pets[0].owner = newAnn; pets[1].owner = newAnn; pets[2].owner = newBob
        let team = Team(context: second)
        team.title = "t"
        let storedBob = try #require(try second.existingObject(with: bob.objectID) as? Member)
        team.members = [newBob, cat, newAnn, storedBob]
        try second.save()
        let reader = stack.context()
        let owners = try reader.fetch(Pet.self).sorted { $0.name < $1.name }.map { $0.owner?.objectID }
        #expect(owners == [ann.objectID, ann.objectID, bob.objectID])
        let readTeam = try #require(try reader.fetch(Team.self).first)
        #expect(readTeam.members.map(\.handle) == ["bob", "cat", "ann"])
        #expect(try reader.fetch(Member.self).count == 3)
        let readAnn = try #require(try reader.existingObject(with: ann.objectID) as? Member)
        #expect(readAnn.pets.map(\.name).sorted() == ["pet0", "pet1"])
    }

    @Test func storeTrumpsKeepsTheExistingValues() throws {
        let stack = try stack()
        let context = stack.context()
        let original = Account(context: context)
        original.email = "s@x"; original.note = "kept"; original.number = 1
        try context.save()
        let other = stack.context()
        other.mergePolicy = .storeTrumps
        let incoming = Account(context: other)
        incoming.email = "s@x"; incoming.note = "ignored"; incoming.number = 2
        try other.save()
        let reader = stack.context()
        let all = try reader.fetch(Account.self)
        #expect(all.count == 1 && all[0].note == "kept" && incoming.note == "kept")
    }
}
