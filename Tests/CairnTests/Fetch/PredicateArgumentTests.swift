import Foundation
import Testing
@testable import Cairn
@_spi(Storage) @testable import CairnStorage

/// Format predicates take plain Swift values and arrays (`IN %@` with `[String]`), and
/// the active-record helpers take `#Predicate` everywhere. (Arguments had to be wrapped,
/// `.string("ann")`, `IN %@` took no array, and `count` and `deleteAll` took strings only.)
@Suite struct PredicateArgumentTests {
    func people() throws -> (Stack, Context) {
        let stack = try Stack()
        let context = stack.context()
        for (name, age) in [("ann", 30), ("bo", 12), ("cy", 45), ("dee", 17)] {
            let person = Person(context: context)
            person.username = name
            person.age = age
        }
        try context.save()
        return (stack, context)
    }

    @Test func plainValuesAndArraysAsArguments() throws {
        let (_, context) = try people()
        let names = ["ann", "cy", "nobody"]
        let some = try Person.all(where: try FetchPredicate(format: "username IN %@ AND age >= %@", names, 18),
                                  sortedBy: [SortKey("username")], in: context)
        #expect(some.map(\.username) == ["ann", "cy"])
        #expect(try Person.count(where: try FetchPredicate(format: "age BETWEEN %@", [13, 19]), in: context) == 1)
        #expect(try Person.count(where: try FetchPredicate(format: "%K == %@", "username", "bo"), in: context) == 1)
        #expect(try Person.count(where: try FetchPredicate(format: "name == %@", String?.none), in: context) == 4)
        // The same as the wrapped form.
        #expect(try FetchPredicate(format: "username IN %@", ["ann"]) == (try FetchPredicate(format: "username IN {'ann'}")))
        #expect(try FetchPredicate(format: "age == %@", 3) == (try FetchPredicate(format: "age == %@", .int64(3))))
    }

    @Test func anObjectIDComparesWithAToOneRelationship() throws {
        let (_, context) = try people()
        let ann = try #require(try Person.first(where: #Predicate { $0.username == "ann" }, in: context))
        let dvd = DVD(context: context)
        dvd.title = "Alien"
        dvd.owner = ann
        try context.save()
        #expect(try DVD.count(where: try FetchPredicate(format: "owner == %@", ann.objectID), in: context) == 1)
    }

    @Test func countAndDeleteAllTakeTypedPredicates() throws {
        let (stack, context) = try people()
        #expect(try Person.count(where: #Predicate { $0.age < 18 }, in: context) == 2)
        try Person.deleteAll(where: #Predicate { $0.age < 18 }, in: context)
        try context.save()
        let reader = stack.context()
        #expect(try Person.all(in: reader).map(\.username).sorted() == ["ann", "cy"])
    }

    @Test func aKeyArgumentMustBeAString() throws {
        #expect { try FetchPredicate(format: "%K == 1", 3) } throws: { ($0 as? CairnError)?.message.contains("%K needs a key path") == true }
    }
}

/// Foundation's typed `SortDescriptor` in fetch requests. (Cairn's own type shadowed it:
/// `SortDescriptor(\DVD.title)` did not compile against a fetch.)
@Suite struct TypedSortTests {
    @Test func foundationSortDescriptorsSortFetches() throws {
        let stack = try Stack()
        let context = stack.context()
        for (name, age) in [("bo", 12), ("Ann", 30), ("cy", 30), ("al", 45)] {
            let person = Person(context: context)
            person.username = name
            person.age = age
        }
        try context.save()
        let request = try FetchQuery(Person.self, sortBy: [SortDescriptor(\Person.age, order: .reverse),
                                                            SortDescriptor(\Person.username)])
        #expect(try context.fetch(request).map(\.username) == ["al", "Ann", "cy", "bo"])
        // No qualification beside Foundation: Cairn's string form is `SortKey`.
        #expect(try Person.all(where: #Predicate { $0.age >= 30 }, sortedBy: [SortDescriptor(\Person.username, order: .reverse)],
                               in: context).map(\.username) == ["cy", "al", "Ann"])
        #expect(try Person.first(where: #Predicate { $0.age < 40 }, sortedBy: [SortDescriptor(\Person.age)], in: context)?.username == "bo")
        #if canImport(Darwin)  // (Foundation on Linux offers only the lexical comparator)
        let folded = try FetchQuery(Person.self, where: #Predicate { $0.age >= 12 },
                                      sortBy: [SortDescriptor(\Person.username, comparator: .localizedStandard)])
        #expect(try context.fetch(folded).map(\.username) == ["al", "Ann", "bo", "cy"])
        #endif
        let plain = try FetchQuery(Person.self, sortBy: [SortDescriptor(\Person.username, comparator: .lexical)])
        #expect(try context.fetch(plain).map(\.username) == ["Ann", "al", "bo", "cy"])
        // A key path that reads no attribute is refused, naming the class.
        #expect { try FetchQuery(Person.self, sortBy: [SortDescriptor(\Person.objectID)]) }
            throws: { ($0 as? CairnError)?.code == .invalidArgument && ($0 as? CairnError)?.message.contains("Person") == true }
    }
}
