import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Predicates with mistakes in them are errors, not silent non-matches.
@Suite struct PredicateMistakeTests {
    func fetch(_ format: String) throws -> [Person] {
        let stack = try Stack()
        let context = stack.context()
        let p = Person(context: context)
        p.username = "3"
        let d = DVD(context: context)
        d.title = "x"
        p.dvds = [d]
        try context.save()
        return try context.fetch(FetchQuery(Person.self, fetchPredicate: try FetchPredicate(format: format)))
    }

    @Test func aStringAttributeComparedWithANumberIsAnError() throws {
        #expect { try fetch("username == 3") } throws: { error in
            let message = (error as? CairnError)?.message ?? ""
            return message.contains("username") && message.contains("string") && message.contains("3")
        }
        #expect(throws: CairnError.self) { try fetch("age == 'ten'") }
        #expect(throws: CairnError.self) { try fetch("username IN {1, 2}") }
        #expect(throws: CairnError.self) { try fetch("ANY dvds.title == 5") }
        #expect(try fetch("username == '3'").count == 1)
        #expect(try fetch("age == 0.0").count == 1, "numbers compare across kinds")
    }

    @Test func aToManyKeyPathNeedsAQuantifier() throws {
        #expect { try fetch("dvds.title == 'x'") } throws: { error in
            let message = (error as? CairnError)?.message ?? ""
            return message.contains("dvds.title") && message.contains("ANY")
        }
        #expect(try fetch("ANY dvds.title == 'x'").count == 1)
        #expect(try fetch("NONE dvds.title == 'y'").count == 1)
        #expect(try fetch("dvds.@count == 1").count == 1)
    }
}

/// A typed predicate with a part the store cannot test runs on objects, and says so.
@Suite struct InMemoryPredicateTests {
    @Test func explainSaysWhenATypedPredicateRunsInMemory() throws {
        let stack = try Stack()
        let context = stack.context()
        for (index, name) in ["a", "b", "c", "d"].enumerated() {
            let person = Person(context: context)
            person.username = name
            person.age = index
        }
        try context.save()
        let even = FetchQuery(Person.self, predicate: #Predicate { $0.age % 2 == 0 })
        #expect(even.inMemoryReason != nil)
        let plan = try context.explain(even)
        #expect(plan.description.contains("FILTER IN MEMORY"), "\(plan)")
        #expect(try context.fetch(even).map(\.username).sorted() == ["a", "c"])
        let converted = FetchQuery(Person.self, predicate: #Predicate { $0.age >= 2 })
        #expect(converted.inMemoryReason == nil)
        #expect(try !context.explain(converted).description.contains("IN MEMORY"))
    }
}
