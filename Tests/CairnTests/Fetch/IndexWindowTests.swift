import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

final class WindowItem: ManagedObject {
    @Attribute(indexed: true) var group: Int64 = 0
    @Attribute(indexed: true) var label: String = ""
    @Attribute var n: Int64 = 0
}

/// A fetch with a limit whose predicate an index answers reads only the first stored
/// matches in ID order (``FetchPlan/IndexLookup``): it finds what the same fetch without
/// the limit finds, windowed, whatever the log and the context changed since the index was
/// stored, and whatever the rest of the predicate turns away.
@Suite struct IndexWindowTests {
    @Test(arguments: 0..<6) func aWindowOfAnIndexLookupIsTheWindowOfAllItsMatches(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let stack = try Stack(model: try Model(WindowItem.self))
        let labels = ["a", "b", "c", "d"]
        func add(_ count: Int, to context: Context) {
            for _ in 0..<count {
                let item = WindowItem(context: context)
                item.group = Int64(random.next() % 5)
                item.label = labels[Int(random.next() % 4)]
                item.n = Int64(random.next() % 100)
            }
        }
        let writer = stack.context()
        add(400, to: writer)
        try writer.save()
        _ = try stack.coordinator.compact()  // the indexes stored in the snapshot

        // The log changes some records (values moved, records deleted, records added), and
        // the context that fetches has changes of its own, not saved.
        let changer = stack.context(), context = stack.context()
        for (editor, added) in [(changer, 40), (context, 10)] {
            let stored = try editor.fetch(FetchQuery(WindowItem.self))
            for item in stored where random.next() % 6 == 0 { item.group = Int64(random.next() % 5) }
            for item in stored where random.next() % 10 == 0 { editor.delete(item) }
            add(added, to: editor)
            if editor === changer { try changer.save() }
        }

        var checked = 0
        for _ in 0..<120 {
            let group = Int64(random.next() % 5), other = Int64(random.next() % 5)
            let format: String
            let arguments: [any PredicateArgument]
            switch random.next() % 4 {
            case 0: (format, arguments) = ("group == %@", [group])
            case 1: (format, arguments) = ("group == %@ AND n < %@", [group, Int64(random.next() % 100)])
            case 2: (format, arguments) = ("group IN %@", [[group, other]])
            default: (format, arguments) = ("label == %@", [labels[Int(random.next() % 4)]])
            }
            var all = try FetchQuery(WindowItem.self, fetchPredicate: FetchPredicate(format: format, plain: arguments))
            all.includesPendingChanges = random.next() % 4 != 0
            var window = all
            window.fetchLimit = Int(random.next() % 12)
            window.fetchOffset = Int(random.next() % 4)
            #expect(try context.explain(window).access != .fullScan, "\(format) is answered by an index")

            let expected = try context.fetch(all).map(\.objectID)
            let start = min(window.fetchOffset, expected.count)
            let end = min(expected.count, start + (window.fetchLimit ?? 0))
            let found = try context.fetch(window).map(\.objectID)
            #expect(found == Array(expected[start..<end]), "\(format) \(arguments), limit \(window.fetchLimit ?? 0), offset \(window.fetchOffset)")
            // In a context of its own, with no changes, too.
            let fresh = stack.context()
            let freshAll = try fresh.fetch(all).map(\.objectID)
            let freshEnd = min(freshAll.count, min(window.fetchOffset, freshAll.count) + (window.fetchLimit ?? 0))
            #expect(try fresh.fetch(window).map(\.objectID) == Array(freshAll[min(window.fetchOffset, freshAll.count)..<freshEnd]))
            checked += 1
        }
        #expect(checked == 120)
    }
}
