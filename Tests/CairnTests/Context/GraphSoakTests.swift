import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Three contexts on one store take turns at MergeSoakTests' random edits (new people and
/// DVDs, moves, renames, deletes with their cascades) and saves, under one merge policy,
/// and the store must stay whole after every step: no reference to a record that does not
/// exist, every relationship answered by its inverse, every unique value held once. A save
/// may fail only as a conflict, or as a uniqueness violation under `.error` (the other
/// policies upsert). One thread, so a failure replays from its seed. (Seeds 3, 4, 7, 11,
/// 14, 20, 23, 24 and each from 68 on broke the store, or failed a save they should not
/// have, before the fixes that came with this test.)
@Suite struct GraphSoakTests {
    @Test(arguments: Array(1...24) + [68, 85, 146, 183, 187, 223, 239] as [UInt64],
          [MergePolicy.error, .storeTrumps, .objectTrumps, .overwrite, .rollback])
    func contextsTakingTurnsKeepTheStoreWhole(seed: UInt64, policy: MergePolicy) throws {
        try Self.takeTurns(seed: seed, policy: policy) { context, random, save in
            if random.next() % 3 == 0 {
                try save(context)
            } else {
                try MergeSoakTests.randomEdit(in: context, &random, throughQueries: seed % 2 == 0)
            }
        }
    }

    /// The same turns, some of them made by a child context that saves into the context
    /// whose turn it is, which saves into the store on a later turn.
    @Test(arguments: Array(1...12) as [UInt64], [MergePolicy.error, .storeTrumps, .objectTrumps, .overwrite, .rollback])
    func childContextsSavingThroughTheirParentsKeepTheStoreWhole(seed: UInt64, policy: MergePolicy) throws {
        try Self.takeTurns(seed: seed, policy: policy) { context, random, save in
            switch random.next() % 4 {
            case 0:
                try save(context)
            case 1:
                let child = Context(parent: context)
                try MergeSoakTests.randomEdit(in: child, &random, throughQueries: false)
                try save(child)
            default:
                try MergeSoakTests.randomEdit(in: context, &random, throughQueries: seed % 2 == 0)
            }
        }
    }

    /// Three contexts under `policy` take 300 turns, each turn given to one at random and
    /// made by `turn`, which saves through `save`: a save that fails as the suite allows
    /// rolls back, any other failure fails the test. The store is verified after each turn.
    static func takeTurns(seed: UInt64, policy: MergePolicy,
                          _ turn: (Context, inout SplitMix64, _ save: (Context) throws -> Void) throws -> Void) throws {
        let stack = try Stack()
        let contexts = (0..<3).map { _ in stack.context() }
        for context in contexts { context.mergePolicy = policy }
        let save = { (context: Context) throws in
            do {
                try context.save()
            } catch let error as CairnError
                        where error.code == .conflict || (policy == .error && error.code == .validation && error.message.contains("uniqueness")) {
                context.rollback()
            }
        }
        var random = SplitMix64(seed: seed)
        for step in 0..<300 {
            try turn(contexts[Int(random.next() % 3)], &random, save)
            let problems = stack.coordinator.store.verify()
            #expect(problems.isEmpty, "seed \(seed), \(policy), step \(step): \(problems.prefix(3))")
            if !problems.isEmpty { return }
        }
    }
}
