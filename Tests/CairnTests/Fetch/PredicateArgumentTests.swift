import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

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
        let some = try Person.all(format: "username IN %@ AND age >= %@", names, 18, sortBy: [SortDescriptor(\Person.username)], in: context)
        #expect(some.map(\.username) == ["ann", "cy"])
        #expect(try Person.count(format: "age BETWEEN %@", [13, 19], in: context) == 1)
        #expect(try Person.count(format: "%K == %@", "username", "bo", in: context) == 1)
        #expect(try Person.count(format: "name == %@", String?.none, in: context) == 4)
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
        #expect(try DVD.count(format: "owner == %@", ann.objectID, in: context) == 1)
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
        #expect(try Person.all(where: #Predicate { $0.age >= 30 }, sortBy: [SortDescriptor(\Person.username, order: .reverse)],
                               in: context).map(\.username) == ["cy", "al", "Ann"])
        #expect(try Person.first(where: #Predicate { $0.age < 40 }, sortBy: [SortDescriptor(\Person.age)], in: context)?.username == "bo")
        #if canImport(Darwin)  // (Foundation on Linux offers only the lexical comparator)
        let folded = try FetchQuery(Person.self, predicate: #Predicate { $0.age >= 12 },
                                      sortBy: [SortDescriptor(\Person.username, comparator: .localizedStandard)])
        #expect(try context.fetch(folded).map(\.username) == ["al", "Ann", "bo", "cy"])
        #endif
        let plain = try FetchQuery(Person.self, sortBy: [SortDescriptor(\Person.username, comparator: .lexical)])
        #expect(try context.fetch(plain).map(\.username) == ["Ann", "al", "bo", "cy"])
        // A key path that reads no attribute is refused by the fetch, naming the descriptor and the class.
        #expect { try context.fetch(FetchQuery(Person.self, sortBy: [SortDescriptor(\Person.username), SortDescriptor(\Person.objectID)])) }
            throws: { ($0 as? CairnError)?.code == .invalidArgument && ($0 as? CairnError)?.message.contains("sortBy[1] of Person") == true }
    }
}

/// One fetch vocabulary, in SwiftData's shape, wherever a fetch is asked for: `predicate:`
/// or `where:` a `#Predicate`, `format:` a format string with plain Swift values, `sortBy:`
/// Foundation's sort descriptors.
@Suite struct FetchVocabularyTests {
    static func library() throws -> Context {
        let context = try Stack().context()
        for (name, age) in [("bo", 12), ("ann", 30), ("cy", 45)] {
            let person = Person(context: context)
            person.username = name
            person.age = age
            for title in ["\(name)-x", "\(name)-a"] {
                let dvd = DVD(context: context)
                dvd.title = title
                dvd.owner = person
            }
        }
        try context.save()
        return context
    }

    @Test func everyFormTakesTheSameLabels() throws {
        let context = try Self.library()
        let adults = #Predicate<Person> { $0.age >= 18 }
        let byName = [SortDescriptor(\Person.username, order: .reverse)]
        let expected = ["cy", "ann"]
        #expect(try context.fetch(FetchQuery(Person.self, predicate: adults, sortBy: byName)).map(\.username) == expected)
        #expect(try context.fetch(Person.self, where: adults, sortBy: byName).map(\.username) == expected)
        #expect(try Person.all(where: adults, sortBy: byName, in: context).map(\.username) == expected)
        #expect(try Person.first(where: adults, sortBy: byName, in: context)?.username == "cy")
        #expect(try context.count(Person.self, where: adults) == 2)
        #expect(try Person.count(where: adults, in: context) == 2)
        let live = try LiveResults(request: FetchQuery(Person.self, predicate: adults, sortBy: byName), context: context)
        #expect(live.objects.map(\.username) == expected)
        // No predicate, a sort: every combination exists.
        #expect(try Person.all(sortBy: byName, in: context).map(\.username) == ["cy", "bo", "ann"])
        #expect(try Person.first(sortBy: [SortDescriptor(\Person.age)], in: context)?.username == "bo")
        #expect(try context.fetch(Person.self, sortBy: byName).count == 3)
        // Format strings take plain values and arrays in every form.
        let names = ["ann", "bo"]
        #expect(try context.count(for: FetchQuery(Person.self, format: "username IN %@", names)) == 2)
        #expect(try context.fetch(FetchQuery(Person.self, format: "age > %@", 20, sortBy: byName)).map(\.username) == expected)
        #expect(try Person.all(format: "username IN %@ AND age < %@", names, 20, in: context).map(\.username) == ["bo"])
        #expect(try Person.count(format: "username BEGINSWITH %@", "a", in: context) == 1)
        // The query says whether the typed predicate runs on stored records.
        #expect(FetchQuery(Person.self, predicate: adults).inMemoryReason == nil)
    }

    /// A sort through a to-one relationship, written as Swift writes it, sorts by the
    /// related object's attribute; a key path Cairn cannot sort by is refused by the fetch,
    /// naming the descriptor's place and the entity.
    @Test func sortDescriptorsReachThroughToOneRelationships() throws {
        let context = try Self.library()
        let query = FetchQuery(DVD.self, sortBy: [SortDescriptor(\DVD.owner?.username, order: .reverse), SortDescriptor(\DVD.title)])
        #expect(try context.fetch(query).map(\.title) == ["cy-a", "cy-x", "bo-a", "bo-x", "ann-a", "ann-x"])
        #expect(try DVD.first(sortBy: [SortDescriptor(\DVD.owner?.age)], in: context)?.owner?.username == "bo")
        #expect {
            try context.fetch(FetchQuery(Person.self, sortBy: [SortDescriptor(\Person.age), SortDescriptor(\Person.description)]))
        } throws: { error in
            let message = (error as? CairnError)?.message ?? ""
            return message.contains("sortBy[1] of Person sorts by") && message.contains("no attribute of Person")
        }
    }
}
