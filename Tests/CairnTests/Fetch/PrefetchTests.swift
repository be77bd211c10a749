import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A fetch loads the objects its results hold through the relationships the query names
/// (``FetchQuery/relationshipKeyPathsForPrefetching``), so that reading them makes no fault.
@Suite struct PrefetchTests {
    /// A store of `people` people with `dvds` DVDs each, every other DVD borrowed by the
    /// next person.
    func store(people: Int = 4, dvds: Int = 5) throws -> Stack {
        let stack = try Stack()
        let context = stack.context()
        let all = (0..<people).map { index -> Person in
            let person = Person(context: context)
            person.username = "p\(index)"
            person.age = index
            return person
        }
        for (index, person) in all.enumerated() {
            for number in 0..<dvds {
                let dvd = DVD(context: context)
                dvd.title = "\(person.username) dvd \(number)"
                dvd.owner = person
                if number % 2 == 0 { dvd.borrower = all[(index + 1) % people] }
            }
        }
        try context.save()
        return stack
    }

    /// The objects registered in `context` for the records of `entity`, by ID.
    func registered(_ context: Context, _ entity: String) -> [ManagedObject] {
        context.registered.values.filter { $0.entity.name == entity }
    }

    @Test func aToManyRelationshipIsLoadedWithItsFetch() throws {
        let stack = try store()
        // Without prefetching, the DVDs are not read: a check that the test can fail.
        let plain = stack.context()
        for person in try plain.fetch(FetchQuery(Person.self)) { _ = person.dvds }
        #expect(registered(plain, "DVD").count == 20)
        #expect(registered(plain, "DVD").allSatisfy { $0.isFault })

        let context = stack.context()
        var query = FetchQuery(Person.self, sortBy: [SortDescriptor(\.username)])
        query.relationshipKeyPathsForPrefetching = [\.dvds]
        let people = try context.fetch(query)
        let dvds = registered(context, "DVD")
        #expect(dvds.count == 20)
        #expect(dvds.allSatisfy { !$0.isFault }, "every DVD loaded by the fetch")
        for person in people {
            #expect(person.dvds.map(\.title) == (0..<5).map { "\(person.username) dvd \($0)" })
            #expect(person.dvds.allSatisfy { $0.owner === person })
        }
    }

    @Test func aToOneRelationshipAndAPathOfThemAreLoaded() throws {
        let stack = try store()
        let context = stack.context()
        var query = FetchQuery(DVD.self, sortBy: [SortDescriptor(\.title)])
        query.relationshipKeyPathsForPrefetching = [\.owner]
        let dvds = try context.fetch(query)
        #expect(registered(context, "Person").count == 4)
        #expect(registered(context, "Person").allSatisfy { !$0.isFault })
        #expect(dvds.allSatisfy { $0.owner?.username == String($0.title.prefix(2)) })

        // By name, two hops: each person's borrowed DVDs, then their owners.
        let second = stack.context()
        var byName = FetchQuery(Person.self)
        byName.fetchPredicate = try FetchPredicate(format: "username == %@", "p0")
        byName.relationshipNamesForPrefetching = ["borrowed.owner"]
        let p0 = try #require(try second.fetch(byName).first)
        let borrowed = registered(second, "DVD")
        #expect(borrowed.count == 3, "p0 borrowed p3's DVDs 0, 2 and 4")
        #expect(borrowed.allSatisfy { !$0.isFault })
        let owners = registered(second, "Person").filter { $0 !== p0 }
        #expect(owners.count == 1 && !owners[0].isFault)
        #expect(p0.borrowed.allSatisfy { $0.owner?.username == "p3" })
    }

    @Test func aKeyPathOrNameThatIsNoRelationshipIsRefusedNamingIt() throws {
        let stack = try store(people: 1, dvds: 1)
        let context = stack.context()
        var query = FetchQuery(Person.self)
        query.relationshipKeyPathsForPrefetching = [\.dvds, \.age]
        let error = #expect(throws: CairnError.self) { try context.fetch(query) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.contains("relationshipKeyPathsForPrefetching[1]") == true)

        var byName = FetchQuery(Person.self)
        byName.relationshipNamesForPrefetching = ["dvds.shelf"]
        let named = #expect(throws: CairnError.self) { try context.fetch(byName) }
        #expect(named?.message.contains("DVD has no relationship \"shelf\"") == true)
    }

    @Test func inBatchesEachBatchLoadsItsRelationshipsWhenItLoads() throws {
        let stack = try store()
        let context = stack.context()
        var query = FetchQuery(Person.self, sortBy: [SortDescriptor(\.username)])
        query.fetchBatchSize = 2
        query.relationshipKeyPathsForPrefetching = [\.dvds]
        let people = try context.fetch(query)
        #expect(registered(context, "DVD").isEmpty, "nothing read before a batch loads")

        _ = people[0].username
        let loaded = registered(context, "DVD").filter { !$0.isFault }
        #expect(Set(loaded.compactMap { ($0 as? DVD)?.owner?.username }) == ["p0", "p1"])
        #expect(people[2].isFault && people[3].isFault)

        _ = people[3].age
        #expect(registered(context, "DVD").count == 20)
        #expect(registered(context, "DVD").allSatisfy { !$0.isFault })
    }

    @Test func aChildContextPrefetchesThroughItsParent() throws {
        let stack = try store()
        let parent = stack.context()
        let first = try #require(try parent.fetch(FetchQuery(Person.self)).first)
        let added = DVD(context: parent)
        added.title = "new"
        added.owner = first  // unsaved in the parent

        let child = Context(parent: parent)
        var query = FetchQuery(Person.self)
        query.relationshipKeyPathsForPrefetching = [\.dvds]
        let people = try child.fetch(query)
        #expect(registered(child, "DVD").count == 21)
        #expect(registered(child, "DVD").allSatisfy { !$0.isFault })
        let childFirst = try #require(people.first { $0.objectID == first.objectID })
        #expect(childFirst.dvds.contains { $0.title == "new" })
    }

    @Test func targetsDeletedHereOrGoneFromTheStoreAreLeftOut() throws {
        let stack = try store(people: 2, dvds: 3)
        let context = stack.context()
        context.automaticallyMergesChangesFromParent = false
        let people = try context.fetch(FetchQuery(Person.self, sortBy: [SortDescriptor(\.username)]))
        _ = people.map(\.age)  // loaded, their lists as read

        // One DVD deleted by another context's save, one deleted here and not saved.
        let other = stack.context()
        let victim = try #require(try other.fetch(FetchQuery(DVD.self, sortBy: [SortDescriptor(\.title)])).first)
        other.delete(victim)
        try other.save()
        let mine = try #require(try context.fetch(FetchQuery(DVD.self, sortBy: [SortDescriptor(\.title)])).last)
        context.delete(mine)

        var query = FetchQuery(Person.self, sortBy: [SortDescriptor(\.username)])
        query.relationshipKeyPathsForPrefetching = [\.dvds]
        let again = try context.fetch(query)
        let loaded = registered(context, "DVD").filter { !$0.isFault }
        #expect(loaded.filter(\.exists).count == 4, "the four left loaded by the fetch")
        #expect(again[0].dvds.map(\.title) == ["p0 dvd 1", "p0 dvd 2"])
        #expect(again[1].dvds.map(\.title) == ["p1 dvd 0", "p1 dvd 1"])
    }

    @Test func liveResultsPrefetchToo() throws {
        let stack = try store()
        let context = stack.context()
        var query = FetchQuery(Person.self, sortBy: [SortDescriptor(\.username)])
        query.relationshipKeyPathsForPrefetching = [\.dvds]
        let results = try LiveResults(request: query, context: context)
        #expect(results.objects.count == 4)
        #expect(registered(context, "DVD").count == 20)
        #expect(registered(context, "DVD").allSatisfy { !$0.isFault })
    }

    /// Prefetching changes what is read when, never what a read finds: random stores,
    /// fetched with and without prefetching, read alike.
    @Test(arguments: 0..<4) func prefetchedObjectsReadAsFaultsDo(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let stack = try Stack()
        let context = stack.context()
        let people = (0..<8).map { index -> Person in
            let person = Person(context: context)
            person.username = "u\(index)"
            return person
        }
        for number in 0..<60 {
            let dvd = DVD(context: context)
            dvd.title = "t\(number)"
            if random.next() % 4 != 0 { dvd.owner = people[Int(random.next() % 8)] }
            if random.next() % 3 == 0 { dvd.borrower = people[Int(random.next() % 8)] }
        }
        try context.save()

        func read(_ prefetching: [String]) throws -> [String] {
            let reader = stack.context()
            var query = FetchQuery(Person.self, sortBy: [SortDescriptor(\.username)])
            query.relationshipNamesForPrefetching = prefetching
            return try reader.fetch(query).map { person in
                let owned = person.dvds.map { "\($0.title)<\($0.borrower?.username ?? "-")" }
                let borrowed = person.borrowed.map { "\($0.title)>\($0.owner?.username ?? "-")" }
                return "\(person.username): \(owned) \(borrowed)"
            }
        }
        let expected = try read([])
        #expect(try read(["dvds"]) == expected)
        #expect(try read(["dvds.borrower", "borrowed.owner"]) == expected)
        #expect(try read(["borrowed", "dvds.owner.dvds"]) == expected)
    }
}
