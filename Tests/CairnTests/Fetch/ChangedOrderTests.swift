import Foundation
import Testing
@testable import Cairn
import CairnTesting
@testable import CairnStorage

/// A context sorts its changed objects into ID order once for the walks that follow while
/// they do not change (``Context/forEachChangedInIDOrder(_:_:)``): queries that see unsaved
/// changes, and a save's validation and uniqueness checks. These tests change the set in
/// every way between such walks, with more changed objects than the least that is kept.
@Suite struct ChangedOrderTests {
    /// Random steps (inserts, deletes, changed values, undo, a rollback, a save) between
    /// fetches by an unindexed value, which walk the changed objects: each fetch finds the
    /// registered items that exist and match, in ID order, as a walk of them all finds them.
    @Test(arguments: [71, 72, 73])
    func fetchesOverUnsavedChangesFollowEveryStep(seed: UInt64) throws {
        let stack = try Stack(model: try Model(Item.self, Group.self))
        let context = stack.context()
        context.undoManager.groupsByEvent = false
        var random = SplitMix64(seed: seed)
        var live: [Item] = []
        func insert(_ count: Int) {
            for _ in 0..<count {
                let item = Item(context: context)
                item.rankPlain = Int(random.next() % 40)
                live.append(item)
            }
        }
        func expected(below bound: Int) -> [ObjectID] {
            context.registeredObjects.compactMap { $0 as? Item }
                .filter { $0.exists && $0.rankPlain < bound }
                .sorted { $0.recordID < $1.recordID }.map(\.objectID)
        }
        insert(ChangedOrder.minimumCount + 200)
        for step in 0..<40 {
            live.removeAll { $0.isDeleted || $0.context == nil }
            switch random.next() % 8 {
            case 0: insert(Int(random.next() % 50) + 1)
            case 1:
                for _ in 0..<5 where !live.isEmpty { context.delete(live.remove(at: Int(random.next() % UInt64(live.count)))) }
            case 2, 3:
                for _ in 0..<20 where !live.isEmpty { live[Int(random.next() % UInt64(live.count))].rankPlain = Int(random.next() % 40) }
            case 4:
                context.undoManager.beginGrouping()
                live.first?.rankPlain = 39 - (live.first?.rankPlain ?? 0)
                insert(3)
                context.undoManager.endGrouping()
                context.undo()
            case 5 where step % 10 == 9:
                context.rollback()
                live = []
                insert(ChangedOrder.minimumCount + 10)
            case 6 where step % 7 == 6:
                try context.save()
                insert(ChangedOrder.minimumCount + 10)
            default: break
            }
            for bound in [5, 20, 40] {
                let found = try context.fetch(FetchQuery(Item.self, format: "rankPlain < %@", Int64(bound))).map(\.objectID)
                let wanted = expected(below: bound)
                if found != wanted { Issue.record("seed \(seed), step \(step), rankPlain < \(bound): \(found.count) found, \(wanted.count) wanted; found only \(Set(found).subtracting(wanted).sorted { $0.recordID < $1.recordID }.prefix(5)), wanted only \(Set(wanted).subtracting(found).sorted { $0.recordID < $1.recordID }.prefix(5))") }
            }
        }
    }

    /// A save of more new objects than the least whose order is kept, two of which claim
    /// one unique value, is refused; with the duplicate's value changed after the refusal
    /// (the changed set the same, one value not), the save goes through.
    @Test func aLargeSaveChecksUniquenessOnTheKeptOrder() throws {
        let stack = try Stack(model: try Model(UniquenessTests.Account.self))
        let context = stack.context()
        var accounts: [UniquenessTests.Account] = []
        for number in 0..<(ChangedOrder.minimumCount + 100) {
            let account = UniquenessTests.Account(context: context)
            account.email = "a\(number)@x"; account.region = "eu"; account.number = number
            accounts.append(account)
        }
        accounts[700].email = "a3@x"
        #expect { try context.save() } throws: { error in
            (error as? CairnError)?.code == .validation && (error as? CairnError)?.message.contains("a3@x") == true
        }
        accounts[700].email = "a700@x"
        try context.save()
        #expect(try stack.context().count(for: FetchQuery(UniquenessTests.Account.self)) == accounts.count)
    }
}
