import Foundation
import Testing
@testable import Cairn
import CairnTesting
@testable import CairnStorage

@Suite struct ChildFetchTests {
    /// A child of a child, each level (and the root, unsaved) changing ranks, inserting and
    /// deleting: a fetch in the grandchild by the indexed rank (an index lookup plus the
    /// records the ancestors changed) finds what the same fetch by the unindexed copy of
    /// the rank (every record read) finds, with and without a limit and an offset.
    @Test(arguments: [5, 6, 7])
    func aChildsIndexedFetchFindsWhatAScanFinds(seed: UInt64) throws {
        let fixture = try FetchFixture(seed: seed, count: 150)
        var random = SplitMix64(seed: seed)
        let root = fixture.context
        let child = Context(parent: root), grandchild = Context(parent: child)
        func mess(_ context: Context) throws {
            let items = try context.fetch(Item.self)
            for _ in 0..<12 {
                let item = items[Int(random.next() % UInt64(items.count))]
                if item.isDeleted { continue }
                switch random.next() % 4 {
                case 0: context.delete(item)
                case 1:
                    let made = Item(context: context)
                    made.rank = Int(random.next() % 40) - 10
                    made.rankPlain = made.rank
                default:
                    item.rank = Int(random.next() % 40) - 10
                    item.rankPlain = item.rank
                }
            }
        }
        try mess(root)
        try mess(child)
        try mess(grandchild)
        for rank in -10..<30 {
            for (limit, offset) in [(nil, 0), (3, 0), (2, 1)] as [(Int?, Int)] {
                var indexed = try FetchQuery(Item.self, format: "rank == %@", Int64(Int64(rank)))
                var scanned = try FetchQuery(Item.self, format: "rankPlain == %@", Int64(Int64(rank)))
                indexed.fetchLimit = limit; scanned.fetchLimit = limit
                indexed.fetchOffset = offset; scanned.fetchOffset = offset
                #expect(try grandchild.fetch(indexed).map(\.objectID) == grandchild.fetch(scanned).map(\.objectID), "rank \(rank) limit \(String(describing: limit)) offset \(offset)")
                #expect(try child.fetch(indexed).map(\.objectID) == child.fetch(scanned).map(\.objectID), "rank \(rank)")
            }
        }
        #expect(try grandchild.explain(FetchQuery(Item.self, format: "rank == 3")).access != .fullScan)
    }
}

extension ChildFetchTests {
    /// A root context with many unsaved changes answers fetches by an indexed value from a
    /// lookup of the changed objects kept current by a journal (``PendingLookup``). Fetches
    /// by the indexed rank and label, between single changes of every kind (inserts,
    /// deletes, value changes, undo, redo, a rollback, a refresh, a batch update, another
    /// context's save taken in, a child's save, a save), find what fetches by the unindexed
    /// copies find.
    @Test(arguments: [51, 52, 53])
    func fetchesByAnIndexedValueFollowEveryKindOfUnsavedChange(seed: UInt64) throws {
        let fixture = try FetchFixture(seed: seed, count: 150)  // 150 unsaved inserts to start
        var random = SplitMix64(seed: seed)
        let context = fixture.context
        context.mergePolicy = .objectTrumps
        let other = fixture.stack.context()
        let labels = FetchFixture.labels
        func pick<T>(_ list: [T]) -> T { list[Int(random.next() % UInt64(list.count))] }
        func newRank() -> Int { Int(random.next() % 30) - 10 }
        for step in 0..<300 {
            let items = try context.fetch(Item.self)
            let item = pick(items)
            switch random.next() % 16 {
            // (One undo group per step, so that undo keeps each pair of copies equal.)
            case 0...2:
                let rank = newRank(), label = pick(labels)
                context.undoGroup {
                    let made = Item(context: context)
                    made.rank = rank; made.rankPlain = rank
                    made.label = label; made.labelPlain = label
                }
            case 3: context.delete(item)
            case 4...6: let rank = newRank(); context.undoGroup { item.rank = rank; item.rankPlain = rank }
            case 7: let label = pick(labels); context.undoGroup { item.label = label; item.labelPlain = label }
            case 8: context.undo()
            case 9: context.redo()
            case 10 where step % 50 == 0: context.rollback()
            case 11: context.refresh(item, mergeChanges: random.next() % 2 == 0)
            case 12 where step % 4 == 0:
                let rank = newRank()
                _ = try context.batchUpdate(FetchQuery(Item.self, format: "rankPlain == %@", Int64(Int64(rank)))) {
                    $0.rank = rank + 1; $0.rankPlain = rank + 1
                }
            case 13:
                if let theirs = try other.fetch(Item.self).randomElement(using: &random) {
                    theirs.rank = newRank(); theirs.rankPlain = theirs.rank
                    try other.save()
                    context.processExternalChanges()
                }
            case 14:
                let child = Context(parent: context)
                if let mine = try child.fetch(Item.self).randomElement(using: &random) {
                    mine.rank = newRank(); mine.rankPlain = mine.rank
                }
                let made = Item(context: child)
                made.rank = newRank(); made.rankPlain = made.rank
                try child.save()
            case 15 where step % 60 == 0: try context.save()
            default: break
            }
            // Now and then a value change right after (say, after an undo, which the lookup
            // sees only through the generation), before the fetches.
            if random.next() % 3 == 0, let other = try context.fetch(Item.self).randomElement(using: &random) {
                let rank = newRank()
                context.undoGroup { other.rank = rank; other.rankPlain = rank }
            }
            // A few fetches, each after the next change, and several in a row.
            for _ in 0..<3 {
                // Mostly by rank (the lookup serves one attribute at a time: asking by label
                // builds it again), now and then by label.
                let rank = newRank()
                var pairs: [(String, String, [Value])] = [
                    ("rank == %@", "rankPlain == %@", [.int64(Int64(rank))]),
                    ("rank IN {%@, %@}", "rankPlain IN {%@, %@}", [.int64(Int64(rank)), .int64(Int64(rank + 2))]),
                ]
                if step % 10 == 0 { pairs.append(("label == %@", "labelPlain == %@", [pick(labels).map { .string($0) } ?? .null])) }
                for (indexed, plain, arguments) in pairs {
                    let found = try context.fetch(FetchQuery(Item.self, fetchPredicate: FetchPredicate(format: indexed, arguments: arguments)))
                    let scanned = try context.fetch(FetchQuery(Item.self, fetchPredicate: FetchPredicate(format: plain, arguments: arguments)))
                    #expect(found.map(\.objectID) == scanned.map(\.objectID), "seed \(seed) step \(step): \(indexed) \(arguments)")
                }
            }
        }
        #expect(context.lookupAnswers > 400, "the lookup answered most fetches")
    }

    /// The same in a child context (as `DataService.write` makes): its own many changes are
    /// looked up, its parent's found apart; between single changes in the child and in the
    /// parent, fetches by the indexed rank find what fetches by the unindexed copy find.
    @Test(arguments: [54, 55])
    func aChildsFetchesByAnIndexedValueFollowItsChanges(seed: UInt64) throws {
        let fixture = try FetchFixture(seed: seed, count: 40)
        var random = SplitMix64(seed: seed)
        let root = fixture.context
        try root.save()
        let child = Context(parent: root)
        func newRank() -> Int { Int(random.next() % 30) - 10 }
        for _ in 0..<100 {
            let made = Item(context: child)
            made.rank = newRank(); made.rankPlain = made.rank
        }
        for step in 0..<200 {
            let context = random.next() % 5 == 0 ? root : child
            let items = try context.fetch(Item.self)
            let item = items[Int(random.next() % UInt64(items.count))]
            switch random.next() % 8 {
            case 0...1:
                let rank = newRank()
                context.undoGroup { let made = Item(context: context); made.rank = rank; made.rankPlain = rank }
            case 2: context.delete(item)
            case 3...5: let rank = newRank(); context.undoGroup { item.rank = rank; item.rankPlain = rank }
            case 6: context.undo()
            default: if item.objectID.recordID.rawValue % 2 == 0 { context.refresh(item, mergeChanges: true) }
            }
            for _ in 0..<3 {
                let rank = newRank()
                let found = try child.fetch(FetchQuery(Item.self, format: "rank == %@", Int64(Int64(rank)))).map(\.objectID)
                let scanned = try child.fetch(FetchQuery(Item.self, format: "rankPlain == %@", Int64(Int64(rank)))).map(\.objectID)
                #expect(found == scanned, "seed \(seed) step \(step): rank \(rank)")
            }
        }
        #expect(child.lookupAnswers > 200, "the child's lookup answered most fetches")
    }

    /// A changed object that changes back (in `dirty`, with nothing to save) is refreshed
    /// when a batch update rewrites its record: the lookup of changed objects must not
    /// keep it under its old value.
    @Test func aBatchUpdateOfAChangedObjectReachesTheLookup() throws {
        let fixture = try FetchFixture(seed: 61, count: 100)
        let context = fixture.context
        try context.save()
        let items = try context.fetch(FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("rankPlain")]))
        for (index, item) in items.enumerated() { item.rank = 1_000 + index; item.rankPlain = item.rank }
        try context.save()
        for item in items.dropFirst() { item.rank += 1_000; item.rankPlain = item.rank }  // 99 changed objects
        let target = items[0]
        context.undoGroup { target.rank = 5_000; target.rankPlain = 5_000 }
        context.undo()  // back to 1,000: in the changed set, nothing to save
        #expect(try context.fetch(FetchQuery(Item.self, format: "rank == 1000")).map(\.objectID) == [target.objectID])
        _ = try context.batchUpdate(FetchQuery(Item.self, format: "rankPlain == -10000")) { $0.rank = 0 }  // touches nothing
        // Another context moves the target's stored rank; this one takes the save in.
        let other = fixture.stack.context()
        let theirs = try #require(try other.existingObject(Item.self, with: target.objectID))
        theirs.rank = 7_777; theirs.rankPlain = 7_777
        try other.save()
        context.processExternalChanges()
        _ = try context.batchUpdate(FetchQuery(Item.self, format: "rankPlain == 7777")) { $0.rank = 8_888; $0.rankPlain = 8_888 }
        #expect(try context.fetch(FetchQuery(Item.self, format: "rank == 8888")).map(\.objectID) == [target.objectID])
        #expect(try context.fetch(FetchQuery(Item.self, format: "rank == 1000")).isEmpty)
    }

    /// A record another context deleted, changed here before (so kept with its changes):
    /// a fetch here finds it, and so does a child's fetch, by index or by a full scan.
    @Test func aRecordDeletedElsewhereButChangedHereIsFoundInAChild() throws {
        let fixture = try FetchFixture(seed: 12, count: 20)
        let context = fixture.context
        let items = try context.fetch(FetchQuery(Item.self, fetchPredicate: nil, sortKeys: [SortKey("rankPlain")]))
        let target = items[0]
        target.label = "changed here"
        let other = fixture.stack.context()
        other.delete(try #require(try other.existingObject(Item.self, with: target.objectID)))
        try other.save()
        context.processExternalChanges()
        let child = Context(parent: context)
        let here = try context.fetch(FetchQuery(Item.self)).map(\.objectID)
        #expect(here.contains(target.objectID), "the root's own fetch keeps it")
        #expect(try child.fetch(FetchQuery(Item.self)).map(\.objectID) == here, "a full scan in the child")
        #expect(try child.fetch(FetchQuery(Item.self, format: "rank == %@", Int64(Int64(target.rank)))).map(\.objectID)
                == [target.objectID], "by index in the child")
        #expect(try child.count(for: FetchQuery(Item.self)) == here.count)
    }

    /// A save that meets a conflict merges the stored values into the changed object (no
    /// write, so no entry in the lookup's journal); if its retry then fails, fetches by the
    /// indexed value still find the object by its merged value, not by the one the lookup
    /// was built with (the merge advances the change generation, d052ecb/b75a1e9).
    @Test func valuesMergedBeforeAFailedSaveReachTheLookup() throws {
        let faulty = FaultInjectingFileSystem(base: MemoryFileSystem())
        let stack = try Stack(fs: faulty, model: try Model(Item.self, Group.self))
        let context = stack.context()
        context.mergePolicy = .storeTrumps
        let items = (0..<100).map { index -> Item in
            let item = Item(context: context)
            item.rank = index
            item.rankPlain = index
            return item
        }
        try context.save()
        for item in items.dropFirst() { item.label = "changed" }  // 99 changed objects: the lookup answers
        let target = items[0]
        target.labelPlain = "mine"
        let answers = context.lookupAnswers
        #expect(try context.fetch(FetchQuery(Item.self, format: "rank == 0")).map(\.objectID) == [target.objectID])
        #expect(context.lookupAnswers == answers + 1, "the lookup is built and answers")
        let other = stack.context()
        let theirs = try #require(try other.existingObject(Item.self, with: target.objectID))
        theirs.rank = 555
        theirs.rankPlain = 555
        try other.save()
        // The save meets the conflict and merges (the store's rank wins); its retry cannot write.
        faulty.fail(calls: Set((faulty.callCount + 1)...(faulty.callCount + 100)))
        #expect(throws: CairnError.self) { try context.save() }
        faulty.fail(calls: [])
        #expect(target.rank == 555 && target.labelPlain == "mine", "merged before the write failed")
        #expect(try context.fetch(FetchQuery(Item.self, format: "rank == 555")).map(\.objectID) == [target.objectID])
        #expect(try context.fetch(FetchQuery(Item.self, format: "rank == 0")).isEmpty)
        #expect(try context.fetch(FetchQuery(Item.self, format: "rankPlain == 555")).map(\.objectID) == [target.objectID])
    }

    /// A root context with unsaved inserts, changes and deletes (and undo of some): a fetch
    /// by an indexed attribute (the store's index, plus the changed objects whose value
    /// meets the index's condition) finds what the same fetch by the unindexed copy finds,
    /// for equality, IN, ranges, strings that are equal only canonically or ignoring case,
    /// and nil.
    @Test(arguments: [21, 22, 23])
    func aRootsIndexedFetchWithUnsavedChangesFindsWhatAScanFinds(seed: UInt64) throws {
        let fixture = try FetchFixture(seed: seed, count: 120)
        var random = SplitMix64(seed: seed)
        let context = fixture.context
        let labels = FetchFixture.labels
        func pick<T>(_ list: [T]) -> T { list[Int(random.next() % UInt64(list.count))] }
        var known: [ObjectID: Item] = [:]  // every item there has been, for an answer worked out here
        for round in 0..<4 {
            let items = try context.fetch(Item.self)
            for item in items { known[item.objectID] = item }
            for _ in 0..<40 {
                let item = pick(items)
                if item.isDeleted || !item.exists { continue }
                // One undo group per step, so that undo keeps each pair of copies equal.
                context.undoGroup {
                    switch random.next() % 5 {
                    case 0: context.delete(item)
                    case 1:
                        let made = Item(context: context)
                        known[made.objectID] = made
                        made.rank = Int(random.next() % 40) - 10; made.rankPlain = made.rank
                        let label = pick(labels); made.label = label; made.labelPlain = label
                    case 2:
                        let label = pick(labels); item.label = label; item.labelPlain = label
                    default:
                        item.rank = Int(random.next() % 40) - 10; item.rankPlain = item.rank
                    }
                }
            }
            if round % 2 == 1 { context.undo() }
            var pairs: [(String, String, [Value])] = []
            for rank in stride(from: -10, to: 30, by: 3) {
                pairs.append(("rank == %@", "rankPlain == %@", [.int64(Int64(rank))]))
                pairs.append(("rank BETWEEN {%@, %@}", "rankPlain BETWEEN {%@, %@}", [.int64(Int64(rank)), .int64(Int64(rank + 4))]))
                pairs.append(("rank > %@", "rankPlain > %@", [.int64(Int64(rank))]))
                pairs.append(("rank IN {%@, %@, 3}", "rankPlain IN {%@, %@, 3}", [.int64(Int64(rank)), .int64(Int64(rank + 1))]))
                pairs.append(("rank == %@ AND flag == YES", "rankPlain == %@ AND flag == YES", [.int64(Int64(rank))]))
            }
            for label in labels {
                let value: Value = label.map { .string($0) } ?? .null
                pairs.append(("label == %@", "labelPlain == %@", [value]))
                pairs.append(("label ==[cd] %@", "labelPlain ==[cd] %@", [value]))
            }
            for rank in -10..<30 {
                let expected = known.values.filter { $0.context === context && $0.exists && $0.rank == rank }.map(\.objectID)
                let found = try context.fetch(FetchQuery(Item.self, format: "rank == %@", Int64(Int64(rank)))).map(\.objectID)
                #expect(found == expected.sorted { $0.recordID < $1.recordID }, "round \(round): rank == \(rank)")
            }
            for (indexed, plain, arguments) in pairs {
                let found = try context.fetch(FetchQuery(Item.self, fetchPredicate: FetchPredicate(format: indexed, arguments: arguments))).map(\.objectID)
                let scanned = try context.fetch(FetchQuery(Item.self, fetchPredicate: FetchPredicate(format: plain, arguments: arguments))).map(\.objectID)
                #expect(found == scanned, "round \(round): \(indexed) \(arguments)")
            }
            if round == 2 { try context.save() }
        }
        #expect(try context.explain(FetchQuery(Item.self, format: "rank == 3")).access != .fullScan)
        #expect(try context.explain(FetchQuery(Item.self, format: "label == 'apple'")).access != .fullScan)
    }

    /// A middle context holding an object loaded before its parent changed it again: a
    /// grandchild's fetch by the indexed value sees the middle context's value, as a fetch
    /// by the unindexed copy does.
    @Test func aMiddleContextsOlderValueIsWhatAGrandchildFetches() throws {
        let fixture = try FetchFixture(seed: 3, count: 20)
        let root = fixture.context
        let item = try #require(try root.fetch(Item.self).first)
        item.rank = 105; item.rankPlain = 105                  // unsaved in the root
        let middle = Context(parent: root)
        let held = try #require(try middle.existingObject(with: item.objectID) as? Item)
        #expect(held.rank == 105)                               // loaded in the middle context
        item.rank = 107; item.rankPlain = 107                  // changed again in the root
        let grandchild = Context(parent: middle)
        let indexed = try grandchild.fetch(FetchQuery(Item.self, format: "rank == 105")).map(\.objectID)
        let scanned = try grandchild.fetch(FetchQuery(Item.self, format: "rankPlain == 105")).map(\.objectID)
        #expect(scanned == [item.objectID])
        #expect(indexed == scanned)
    }
}
