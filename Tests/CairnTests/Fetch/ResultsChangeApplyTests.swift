import Foundation
import Testing
import Cairn

/// A list kept by applying each `ResultsChange` as ApplyingResultsChanges.md shows (the
/// article's `PeopleList`) stays equal to the live results, whatever the changes: inserts,
/// deletes, renames that move rows within and across sections (and empty or open
/// sections), in-place updates, saved here or merged from a background context.
@Suite struct ResultsChangeApplyTests {
    typealias Person = GettingStartedExample.Person
    typealias PeopleList = ApplyingResultsChangesExample.PeopleList

    /// A small deterministic generator (SplitMix64), so a failure replays.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static func expected(_ list: PeopleList) -> [[String]] {
        list.results.sections.map { $0.objects.map(PeopleList.row) }
    }

    @MainActor @Test(arguments: [1, 2, 3]) func aListAppliedChangeByChangeEqualsTheResults(seed: UInt64) async throws {
        let container = try Container(name: "Apply\(seed)", entities: [Person.self, GettingStartedExample.DVD.self], storage: .inMemory)
        let context = container.mainContext
        var random = Generator(state: seed)
        let letters = Array("abcdef")
        var serial = 0  // usernames are unique: each name is new
        func name() -> String {
            serial += 1
            return String(letters.randomElement(using: &random) ?? "a") + String(Int.random(in: 0..<100, using: &random)) + "-\(serial)"
        }
        for _ in 0..<12 { Person(context: context).username = name() }
        try context.save()
        let list = try PeopleList(context: context)
        #expect(list.sections == Self.expected(list))

        for round in 0..<60 {
            let people = try context.fetch(Person.self)
            if Int.random(in: 0..<4, using: &random) == 0 {
                // A save in another context, merged into the main one on the main actor.
                let ids = people.map(\.objectID).shuffled(using: &random).prefix(3)
                let names = (0..<4).map { _ in name() }
                let inserted = "\(names[0]) (?)"
                func shown() -> Int { list.results.sections.reduce(0) { $0 + $1.objects.map(PeopleList.row).filter { $0 == inserted }.count } }
                let before = shown()
                try await container.newBackgroundContext().perform { other in
                    for (index, id) in ids.enumerated() {
                        guard let person = try other.existingObject(Person.self, with: id) else { continue }
                        if index == 0 { other.delete(person) } else { person.username = names[index] }
                    }
                    Person(context: other).username = names[0]
                    try other.save()
                }
                // No call: the main actor takes the save in as soon as it is free.
                var waited = 0
                while shown() == before && waited < 10_000 {
                    await Task.yield()
                    waited += 1
                }
                #expect(shown() > before, "seed \(seed), round \(round): the background save reached the results")
            } else {
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    switch Int.random(in: 0..<4, using: &random) {
                    case 0: Person(context: context).username = name()
                    case 1: if let victim = people.randomElement(using: &random), !victim.isDeleted { context.delete(victim) }
                    case 2: people.randomElement(using: &random).map { if !$0.isDeleted { $0.username = name() } }
                    default: people.randomElement(using: &random).map { if !$0.isDeleted { $0.name = name() } }
                    }
                }
                try context.save()
            }
            #expect(list.sections == Self.expected(list), "seed \(seed), round \(round)")
            if list.sections != Self.expected(list) { break }
        }
    }
}
