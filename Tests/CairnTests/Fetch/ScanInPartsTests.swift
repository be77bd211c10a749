import CairnCollections
import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A scan whose test runs on several threads at once must give what the scan on one
/// thread gives: the same records, versions and bytes, in ID order, with the log's
/// changes between the snapshot's records wherever the runs are cut.
@Suite struct ScanInPartsTests {
    /// A store of `people` records: a compacted snapshot, then updates, deletions and
    /// inserts in the log; `kept` says which records the test keeps.
    static func store(_ fs: MemoryFileSystem, seed: UInt64) throws -> Store {
        let store = try Store.open(at: "/db", schema: TestSchemas.people, options: memoryOptions(fs))
        var random = SplitMix64(seed: seed)
        var ids: [RecordID] = []
        for _ in 0..<3 {
            var changes: [Change] = []
            for _ in 0..<200 {
                let id = try store.allocateID(entity: 1)
                ids.append(id)
                changes.append(.put(id, [.string("p\(ids.count)"), .int64(Int64(random.next() % 100)), .references([])]))
            }
            try store.commit(changes)
        }
        try store.compact()
        for _ in 0..<20 {
            var changes: [Change] = []
            for _ in 0..<10 {
                switch random.next() % 3 {
                case 0:
                    let id = try store.allocateID(entity: 1)
                    ids.append(id)
                    changes.append(.put(id, [.string("new"), .int64(Int64(random.next() % 100)), .references([])]))
                case 1: changes.append(.put(ids[Int(random.next() % UInt64(ids.count))], [.string("again"), .int64(Int64(random.next() % 100)), .references([])]))
                default: changes.append(.delete(ids[Int(random.next() % UInt64(ids.count))]))
                }
            }
            try store.commit(changes)
        }
        return store
    }

    static func kept(_ record: borrowing StoredRecord) throws -> Bool {
        guard case .int64(let x) = try record.values()[1] else { return false }
        return x % 3 != 0
    }

    @Test(arguments: Seeds.list([61, 62, 63]))
    func runsAtOnceGiveWhatOneRunGives(seed: UInt64) throws {
        let fs = MemoryFileSystem()
        let store = try Self.store(fs, seed: seed)
        defer { try? store.close() }
        var expected: [(RecordID, UInt64, [UInt8])] = []
        try store.scanVersioned(entity: 1) { id, version, body in
            if try Self.kept(body) { expected.append((id, version, Array(body.bytes))) }
        }
        #expect(expected.count > 300)
        for (parts, minimum) in [(1, 1), (2, 1), (3, 1), (5, 16), (8, 1), (64, 1), (4, 10_000)] {
            let runsSeen = Protected(Set<Int>())
            var found: [(RecordID, UInt64, [UInt8])] = []
            try store.scanVersioned(entity: 1, parts: parts, minimumPerRun: minimum, where: { run in
                { _, body in
                    runsSeen.withLock { _ = $0.insert(run) }
                    return try Self.kept(body)
                }
            }) { id, version, body in found.append((id, version, Array(body.bytes))) }
            #expect(found.count == expected.count, "\(parts) parts")
            #expect(zip(found, expected).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 && $0.2 == $1.2 }, "\(parts) parts")
            // 600 records in the snapshot: runs of whole groups of 16, at least `minimum` each.
            let runs = min(parts, 600 / minimum, 600 / SnapshotIndex.groupSize + 1)
            #expect(runsSeen.withLock { $0 } == Set(0..<(runs >= 2 ? runs : 1)), "\(parts) parts")
        }
    }

    /// A one-pass fetch that matches nothing, on one thread, while another thread reads
    /// empty arrays: the fetch's empty result writes nothing shared (it had written its
    /// count into the standard library's one empty array storage, a race the thread
    /// sanitizer reports; CI runs this suite under it).
    @Test func anEmptyOnePassFetchWritesNothingShared() throws {
        let stack = try Stack(model: try Model(Sample.self, Item.self, Group.self))
        defer { try? stack.coordinator.close() }
        let writer = stack.context()
        for index in 0..<20 { Sample(context: writer).big = Int64(index) }
        try writer.save()
        let context = stack.context()
        let request = try FetchQuery(Sample.self, format: "big > 1000")
        let reads = Locked(0), stop = Locked(false)
        let done = DispatchSemaphore(value: 0)
        Thread {
            while !stop.value {
                let empty: [Int] = []
                reads.withLock { $0 += empty.withUnsafeBufferPointer { $0.count } + 1 }
            }
            done.signal()
        }.start()
        for _ in 0..<200 { #expect(try context.fetch(request).isEmpty) }
        stop.withLock { $0 = true }
        done.wait()
        #expect(reads.value > 0)
    }

    @Test func anErrorInOneRunEndsTheScan() throws {
        let fs = MemoryFileSystem()
        let store = try Self.store(fs, seed: 64)
        defer { try? store.close() }
        let ids = store.ids(entity: 1)
        let bad = ids[ids.count * 3 / 4]
        struct Refused: Error, Equatable { let id: RecordID }
        var called = 0
        #expect(throws: Refused(id: bad)) {
            try store.scanVersioned(entity: 1, parts: 4, minimumPerRun: 1, where: { _ in
                { id, _ in
                    if id == bad { throw Refused(id: id) }
                    return true
                }
            }) { _, _, _ in called += 1 }
        }
        #expect(called == 0)  // the runs are tested before any record is handed on
    }

    /// Fetches through the object API: a scan split in four runs of a few records, and
    /// one unsplit, must give the same objects for random predicates, with changes in
    /// the log and unsaved changes in the context.
    @Test(arguments: Seeds.list([65, 66]))
    func fetchesSplitOrNotAgree(seed: UInt64) throws {
        let stack = try Stack(model: try Model(Sample.self, Item.self, Group.self))
        defer { try? stack.coordinator.close() }
        let entity = try #require(stack.model.schema.entity(named: "Sample"))
        var random = SplitMix64(seed: seed)
        func fill(_ object: ManagedObject) throws {
            for attribute in entity.attributes {
                var value = RecordFilterTests.randomValue(for: attribute.type, &random)
                while value.isNull && !attribute.isOptional { value = RecordFilterTests.randomValue(for: attribute.type, &random) }
                try object.setValue(value, forKey: attribute.name)
            }
        }
        let writer = stack.context()
        var objects: [ManagedObject] = []
        for _ in 0..<400 {
            let object = try writer.insertObject(entityName: "Sample")
            try fill(object)
            objects.append(object)
        }
        try writer.save()
        try stack.coordinator.store.compact()
        for object in objects.prefix(100) where random.next() % 2 == 0 { try fill(object) }
        for object in objects.suffix(50) where random.next() % 3 == 0 { writer.delete(object) }
        for _ in 0..<30 { try fill(try writer.insertObject(entityName: "Sample")) }
        try writer.save()
        // Unsaved changes of the same kinds.
        for object in objects[100..<200] where random.next() % 2 == 0 { try fill(object) }
        for _ in 0..<10 { try fill(try writer.insertObject(entityName: "Sample")) }
        writer.delete(objects[250])

        let split = stack.context()
        split.scanSplit = (threads: 4, minimumPerRun: 20)
        let whole = stack.context()
        whole.scanSplit = (threads: 1, minimumPerRun: 20)
        // Every record, sorted, and a window.
        var all = FetchQuery(Sample.self)
        #expect(try split.fetch(all).map(\.objectID) == whole.fetch(all).map(\.objectID))
        #expect(try writer.fetch(all).count == whole.fetch(all).count + 10 - 1)  // its unsaved inserts and deletion
        all.sortKeys = [SortKey("big", ascending: false), SortKey("small")]
        #expect(try split.fetch(all).map(\.objectID) == whole.fetch(all).map(\.objectID))
        all.fetchLimit = 7
        all.fetchOffset = 3
        #expect(try split.fetch(all).map(\.objectID) == whole.fetch(all).map(\.objectID))
        var compared = 0
        for _ in 0..<60 {
            let (format, arguments) = RecordFilterTests.randomPredicate(&random)
            let request = FetchQuery(Sample.self, fetchPredicate: try FetchPredicate(format: format, arguments: arguments))
            let expected = try whole.fetch(request).map(\.objectID)
            #expect(try split.fetch(request).map(\.objectID) == expected, "\(format) \(arguments)")
            #expect(try split.count(for: request) == expected.count, "\(format) \(arguments)")
            // The writer's own unsaved changes count, split or not.
            writer.scanSplit = (threads: 4, minimumPerRun: 20)
            let withChanges = try writer.fetch(request).map(\.objectID)
            writer.scanSplit = (threads: 1, minimumPerRun: 20)
            #expect(try writer.fetch(request).map(\.objectID) == withChanges, "\(format) \(arguments)")
            compared += expected.count
        }
        #expect(compared > 0)
    }
}
