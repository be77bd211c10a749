import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

struct Stamp: Codable, Equatable, Sendable {
    var at: Double
    var note: String
}

@Suite struct ContainerTests {
    @Test func inMemoryAndOnDiskBehaveAlike() async throws {
        let path = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        for storage in [Container.Storage.inMemory, .onDisk(URL(fileURLWithPath: path + "/c.cairn"))] {
            let container = try Container(name: "t", entities: [Person.self, DVD.self, Shelf.self, Box.self], storage: storage)
            let context = Context(coordinator: container.coordinator, model: container.model)
            let person = Person.create(in: context)
            person.username = "ann"
            try context.save()
            #expect(try Person.count(in: context) == 1)
            try container.close()
        }
        // On disk, a second container sees the data.
        let again = try Container(name: "t", entities: [Person.self, DVD.self, Shelf.self, Box.self],
                                  storage: .onDisk(URL(fileURLWithPath: path + "/c.cairn")))
        let background = again.newBackgroundContext()
        let count = try await background.perform { try Person.count(in: $0) }
        #expect(count == 1)
        try again.close()
    }

    @Test func activeRecordHelpers() throws {
        let container = try Container(entities: [Person.self, DVD.self, Shelf.self, Box.self], storage: .inMemory)
        let context = Context(coordinator: container.coordinator, model: container.model)
        for (name, age) in [("a", 30), ("b", 12), ("c", 45)] {
            let person = Person.create(in: context)
            person.username = name
            person.age = age
        }
        try context.save()
        #expect(try Person.all(in: context).map(\.username) == ["a", "b", "c"])
        #expect(try Person.all(where: #Predicate { $0.age > 20 }, sortBy: [SortDescriptor(\Person.age, order: .reverse)], in: context).map(\.username) == ["c", "a"])
        #expect(try Person.first(format: "username == %@", "b", in: context)?.age == 12)
        #expect(try Person.first(where: #Predicate { $0.username == "c" }, in: context)?.age == 45)
        #expect(try Person.count(format: "age < 40", in: context) == 2)
        // The first match only is made an object (typed and string predicates alike).
        let fresh = Context(coordinator: container.coordinator, model: container.model)
        #expect(try Person.first(where: #Predicate { $0.age > 0 }, in: fresh)?.username == "a")
        #expect(try Person.first(format: "age > 0", in: fresh)?.username == "a")
        #expect(fresh.registeredObjects.count == 1)
        let other = Context(coordinator: container.coordinator, model: container.model)
        let a = try #require(try Person.first(format: "username == 'a'", in: context))
        let moved = try #require(try a.inContext(other))
        #expect(moved !== a && moved.objectID == a.objectID && moved.context === other)
        a.delete(in: context)
        try Person.deleteAll(format: "age < 20", in: context)
        try context.save()
        #expect(try Person.all(in: context).map(\.username) == ["c"])
        try Person.deleteAll(in: context)
        try context.save()
        #expect(try Person.count(in: context) == 0)
    }
}

@MainActor @Suite struct DataServiceTests {
    func make() throws -> DataService {
        DataService(container: try Container(entities: [Person.self, DVD.self, Shelf.self, Box.self], storage: .inMemory))
    }

    @Test func writeSyncReadAndChaining() async throws {
        let data = try make()
        var seen = -1
        data.writeSync { context in
            let person = Person.create(in: context)
            person.username = "ann"
        }.writeSync { context in
            let person = Person.create(in: context)
            person.username = "bob"
        }.read { context in
            seen = try Person.count(in: context)
        }
        #expect(seen == 2, "writes are in the main context as soon as writeSync returns")
        try await data.save()
        let reader = Context(coordinator: data.container.coordinator, model: data.container.model)
        #expect(try Person.count(in: reader) == 2, "and persisted")
    }

    @Test func completionsReportSuccessAndFailure() async throws {
        let data = try make()
        var errors: [CairnError] = []
        data.errorHandler = { errors.append($0) }
        let outcome: CairnError?? = await withCheckedContinuation { continuation in
            data.writeSync({ context in
                let person = Person.create(in: context)
                person.username = "ok"
            }, completion: { continuation.resume(returning: $0) })
        }
        #expect(outcome == .some(nil))
        // A write that fails validation: the completion gets the error; main is untouched.
        let failed: CairnError? = await withCheckedContinuation { continuation in
            data.writeSync({ context in
                _ = Person.create(in: context)  // empty username: validateForInsert refuses it
            }, completion: { continuation.resume(returning: $0) })
        }
        #expect(failed?.message.contains("must not be empty") == true)
        #expect(errors.count == 1)
        #expect(!data.mainContext.hasChanges)
        #expect(try Person.count(in: data.mainContext) == 1)
        // A body that throws.
        struct Oops: Error {}
        let thrown: CairnError? = await withCheckedContinuation { continuation in
            data.writeSync({ _ in throw Oops() }, completion: { continuation.resume(returning: $0) })
        }
        #expect(thrown != nil)
    }

    /// A write whose save fails in the main context (a uniqueness violation, found only
    /// there) leaves the main context as it was before it, and the next write works.
    /// (The failed write's changes stayed in the main context, and every later write and
    /// close threw its error.)
    @Test func aFailedWriteLeavesTheMainContextAsItWas() async throws {
        let data = try make()
        func write(_ username: String) async -> CairnError? {
            await withCheckedContinuation { continuation in
                data.writeSync({ context in
                    let person = Person.create(in: context)
                    person.username = username
                }, completion: { continuation.resume(returning: $0) })
            }
        }
        #expect(await write("ann") == nil)
        let failed = await write("ann")
        #expect(failed?.message.contains("uniqueness") == true, "\(String(describing: failed))")
        #expect(!data.mainContext.hasChanges)
        #expect(try Person.count(in: data.mainContext) == 1)
        #expect(!data.mainContext.undoManager.canRedo, "the failed write is not left to redo")
        #expect(await write("bo") == nil)
        try await data.close()
    }

    @Test func writeAsyncAndAwaitForms() async throws {
        let data = try make()
        let done: CairnError?? = await withCheckedContinuation { continuation in
            data.writeAsync({ context in
                let person = Person.create(in: context)
                person.username = "later"
            }, completion: { continuation.resume(returning: $0) })
            #expect(data.mainContext.insertedObjects.isEmpty, "the body has not run yet")
        }
        #expect(done == .some(nil))
        let id = try await data.write { context -> ObjectID in
            let person = Person.create(in: context)
            person.username = "awaited"
            return person.objectID
        }
        let reader = Context(coordinator: data.container.coordinator, model: data.container.model)
        #expect(try reader.existingObject(Person.self, with: id)?.username == "awaited")
        await #expect(throws: CairnError.self) {
            try await data.write { context in _ = Person.create(in: context) }
        }
    }

    /// Interval autosave fires with no run loop (here, a test on the main actor that only
    /// awaits): the write reaches the store without a save. (A `Timer` never fired.)
    @Test func intervalAutosaveFiresWithoutARunLoop() async throws {
        let data = DataService(container: try Container(entities: [Person.self, DVD.self, Shelf.self, Box.self], storage: .inMemory),
                             autosave: .interval(0.05))
        data.writeSync { context in
            let person = Person.create(in: context)
            person.username = "autosaved"
        }
        let reader = Context(coordinator: data.container.coordinator, model: data.container.model)
        var stored = 0
        for _ in 0..<100 where stored == 0 {
            try await Task.sleep(nanoseconds: 20_000_000)
            stored = try Person.count(in: reader)
        }
        #expect(stored == 1)
        try await data.close()
    }

    @Test func closeFlushesAndReleasesTheLock() async throws {
        let path = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let url = URL(fileURLWithPath: path + "/s.cairn")
        let data = DataService(container: try Container(entities: [Person.self, DVD.self, Shelf.self, Box.self], storage: .onDisk(url)),
                             autosave: .manual)
        data.writeSync { context in
            let person = Person.create(in: context)
            person.username = "kept"
        }
        try await data.close()
        let reopened = try Container(entities: [Person.self, DVD.self, Shelf.self, Box.self], storage: .onDisk(url))
        #expect(try Person.count(in: reopened.mainContext) == 1)
        try reopened.close()
    }
}

@Suite struct ObjectQueueTests {
    @Test func fifoAcrossAReopen() throws {
        let path = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let url = URL(fileURLWithPath: path + "/q.cairn")
        do {
            let container = try Container(entities: [], storage: .onDisk(url))
            let queue = try container.queue(named: "stamps", of: Stamp.self)
            #expect(try queue.isEmpty)
            for i in 0..<5 { try queue.push(Stamp(at: Double(i), note: "n\(i)")) }
            let other = try container.queue(named: "other", of: String.self)
            try other.push("x")
            #expect(try queue.popFirst() == Stamp(at: 0, note: "n0"))
            #expect(try queue.peek() == Stamp(at: 1, note: "n1"))
            #expect(try queue.remove(at: 1) == Stamp(at: 2, note: "n2"))
            #expect(throws: CairnError.self) { try queue.remove(at: 10) }
            try container.close()
        }
        let container = try Container(entities: [], storage: .onDisk(url))
        let queue = try container.queue(named: "stamps", of: Stamp.self)
        #expect(try queue.count == 3)
        #expect(try queue.elements().map(\.note) == ["n1", "n3", "n4"])
        #expect(try container.queue(named: "other", of: String.self).elements() == ["x"])
        try queue.removeAll()
        #expect(try queue.popFirst() == nil)
        // A value JSON cannot hold (a NaN) is refused, and the queue left as it was.
        try queue.push(Stamp(at: 1, note: "one"))
        #expect(throws: CairnError.self) { try queue.push(Stamp(at: .nan, note: "nan")) }
        #expect(try queue.elements() == [Stamp(at: 1, note: "one")])
        try container.close()
    }

    /// Random pushes, pops, removals at any index, peeks and counts, long enough that
    /// the popped front is dropped from memory many times over, with reopens between:
    /// the queue answers as an array does.
    @Test func aQueueAnswersAsAnArray() throws {
        let fs = MemoryFileSystem()
        let model = try Model(entities: [Container.queueEntity])
        var coordinator = try Coordinator(path: "/q", schema: model.schema, options: memoryOptions(fs))
        var queue = ObjectQueue<Int>(storage: try ObjectQueueStorage(name: "q", coordinator: coordinator, elementType: "Int"))
        var expected: [Int] = []
        var generator = ValueGenerator(random: SplitMix64(seed: 7))
        for step in 0..<3_000 {
            // A thousand steps that mostly push, a thousand that mostly pop, then as many of each.
            let pushes = [6, 2, 4][step / 1_000]
            switch generator.int(10) {
            case 0..<pushes: try queue.push(step); expected.append(step)
            case pushes..<8: #expect(try queue.popFirst() == (expected.isEmpty ? nil : expected.removeFirst()))
            case 8:
                if expected.isEmpty { continue }
                let index = generator.int(expected.count)
                #expect(try queue.remove(at: index) == expected.remove(at: index))
            default:
                #expect(try queue.peek() == expected.first)
                #expect(try queue.count == expected.count)
            }
            if step % 1_000 == 999 {
                #expect(try queue.elements() == expected)
                try coordinator.close()
                coordinator = try Coordinator(path: "/q", schema: model.schema, options: memoryOptions(fs))
                queue = ObjectQueue<Int>(storage: try ObjectQueueStorage(name: "q", coordinator: coordinator, elementType: "Int"))
            }
        }
        #expect(try queue.elements() == expected)
        try queue.removeAll()
        #expect(try queue.isEmpty)
        try coordinator.close()
    }

    /// An element that does not decode as the queue's type (the type changed since it was
    /// pushed) throws from a pop or a removal and stays queued: decoded after its removal
    /// was committed, it was gone for good.
    /// An element pushed as another type (by an earlier run) does not decode: a mismatch,
    /// not damage, and it stays queued. In one container, a queue opened for one type
    /// refuses another, naming both.
    @Test func anElementThatDoesNotDecodeStaysQueued() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let url = URL(fileURLWithPath: directory + "/q.cairn")
        do {
            let container = try Container(entities: [], storage: .onDisk(url))
            try container.queue(named: "q", of: String.self).push("not a stamp")
            #expect { try container.queue(named: "q", of: Stamp.self) } throws: { error in
                let message = (error as? CairnError)?.message ?? ""
                return (error as? CairnError)?.code == .schemaMismatch && message.contains("String") && message.contains("Stamp")
            }
            try container.close()
        }
        do {
            let container = try Container(entities: [], storage: .onDisk(url))
            let stamps = try container.queue(named: "q", of: Stamp.self)
            #expect { try stamps.popFirst() } throws: { ($0 as? CairnError)?.code == .schemaMismatch }
            #expect { try stamps.remove(at: 0) } throws: { ($0 as? CairnError)?.message.contains("Stamp") == true }
            #expect(try stamps.count == 1)
            try container.close()
        }
        let container = try Container(entities: [], storage: .onDisk(url))
        #expect(try container.queue(named: "q", of: String.self).popFirst() == "not a stamp")
        try container.close()
    }

    @Test func concurrentPushersAndPoppers() throws {
        let container = try Container(entities: [], storage: .inMemory)
        let queue = try container.queue(named: "work", of: Int.self)
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for i in 0..<50 { try? queue.push(worker * 1000 + i) }
        }
        #expect(try queue.count == 200)
        let popped = Locked<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            while let value = try? queue.popFirst() { popped.withLock { $0.append(value) } }
        }
        #expect(popped.value.count == 200 && Set(popped.value).count == 200)
        // Each pusher's fifty elements came out, each once. (Not their order: a popper
        // notes what it popped after the pop, so `popped` is not the order of the pops.)
        for worker in 0..<4 {
            let mine = popped.value.filter { $0 / 1000 == worker }
            #expect(Set(mine).count == 50)
        }
    }

    @Test func aCrashKeepsWholeElements() throws {
        let fs = MemoryFileSystem()
        let model = try Model(entities: [Container.queueEntity])
        let coordinator = try Coordinator(path: "/q", schema: model.schema, options: memoryOptions(fs))
        let queue = ObjectQueue<String>(storage: try ObjectQueueStorage(name: "q", coordinator: coordinator, elementType: "String"))
        let captured = Locked<[MemoryFileSystem]>([])
        fs.onSync = { fs, _ in captured.withLock { $0.append(fs.crashImage(.random(seed: UInt64($0.count)))) } }
        for i in 0..<10 { try queue.push("element \(i)") }
        _ = try queue.popFirst()
        fs.onSync = nil
        for image in captured.value {
            let reopened = try Coordinator(path: "/q", schema: model.schema, options: memoryOptions(image))
            let elements = try ObjectQueue<String>(storage: try ObjectQueueStorage(name: "q", coordinator: reopened, elementType: "String")).elements()
            #expect(elements.allSatisfy { $0.hasPrefix("element ") })
            let numbers = elements.map { Int($0.dropFirst(8))! }
            #expect(numbers == numbers.sorted() && (numbers.first ?? 0) <= 1)
            try reopened.close()
        }
        #expect(captured.value.count >= 11)
    }
}
