import Foundation
import Testing
@testable import Cairn
import CairnTesting
@testable import CairnStorage

/// Crash simulation and I/O faults for saves through the object layer: relationships
/// and their inverses, cascading deletes, child and grandchild contexts pushing into
/// their parent, and compaction, on the Person ↔ DVD model.
@Suite struct ObjectCrashTests {
    /// Everything the objects say, sorted: each person's username, age and DVD titles;
    /// each DVD's owner.
    static func state(_ context: Context) throws -> String {
        let people = try context.fetch(Person.self).map { "\($0.username):\($0.age):[\($0.dvds.map(\.title).sorted().joined(separator: ","))]" }
        let dvds = try context.fetch(DVD.self).map { "\($0.title)->\($0.owner?.username ?? "-")" }
        return (people.sorted() + dvds.sorted()).joined(separator: " ")
    }

    /// A seeded workload of object saves. `saved` is called with the state after each
    /// save of the root context; the first error ends the run (rethrown).
    static func workload(_ fs: any FileSystem, seed: UInt64, saves: Int, saved: (String) throws -> Void) throws {
        var random = SplitMix64(seed: seed)
        func pick(_ count: Int) -> Int { Int(random.next() % UInt64(count)) }
        let stack = try Stack(fs: fs)
        defer { try? stack.coordinator.close() }
        let context = stack.context()
        var counter = 0
        for round in 0..<saves {
            let people = try context.fetch(Person.self)
            switch round < 3 ? 0 : pick(6) {
            case 0:  // a person with DVDs (inverse maintained)
                counter += 1
                let person = Person(context: context)
                person.username = "u\(counter)"
                person.age = pick(90)
                for index in 0..<(1 + pick(3)) {
                    let dvd = DVD(context: context)
                    dvd.title = "t\(counter).\(index)"
                    dvd.owner = person
                }
            case 1:  // a child context edits and adds, pushes, then the root saves
                let child = Context(parent: context)
                let target = try child.fetch(Person.self)
                guard !target.isEmpty else { continue }
                let person = target[pick(target.count)]
                person.age += 1
                let dvd = DVD(context: child)
                counter += 1
                dvd.title = "c\(counter)"
                dvd.owner = person
                try child.save()
            case 2:  // a grandchild chain
                let child = Context(parent: context)
                let grandchild = Context(parent: child)
                let target = try grandchild.fetch(DVD.self)
                guard !target.isEmpty else { continue }
                let others = try grandchild.fetch(Person.self)
                target[pick(target.count)].owner = others.isEmpty ? nil : others[pick(others.count)]
                try grandchild.save()
                try child.save()
            case 3:  // a cascading delete
                guard !people.isEmpty else { continue }
                context.delete(people[pick(people.count)])
            case 4:  // move a DVD to another owner
                let dvds = try context.fetch(DVD.self)
                guard !dvds.isEmpty, !people.isEmpty else { continue }
                dvds[pick(dvds.count)].owner = people[pick(people.count)]
            default:
                try stack.coordinator.store.compact()
                continue
            }
            try context.save()
            try saved(try state(context))
        }
    }

    /// The state of the store in `fs`, as a fresh context sees it.
    static func reopenedState(_ fs: MemoryFileSystem) throws -> String {
        let stack = try Stack(fs: fs)
        defer { try? stack.coordinator.close() }
        #expect(stack.coordinator.store.verify().isEmpty)
        return try state(stack.context())
    }

    /// Crashed at every sync point (kept, dropped, garbled writes): a fresh context sees
    /// exactly the state after the last acknowledged save, or after the one in flight.
    @Test func everySyncPointOfObjectSavesReopensToASavedState() throws {
        let fs = MemoryFileSystem()
        var states = [""]
        let images = Locked<[(image: MemoryFileSystem, saved: Int)]>([])
        let savedCount = Locked(0)
        fs.onSync = { fs, _ in
            let saved = savedCount.value
            images.withLock { list in
                list.append((fs.crashImage(.dropAll), saved))
                list.append((fs.crashImage(.keepAll), saved))
                list.append((fs.crashImage(.random(seed: UInt64(list.count))), saved))
            }
        }
        try Self.workload(fs, seed: 21, saves: 80) { state in
            states.append(state)
            savedCount.withLock { $0 += 1 }
        }
        fs.onSync = nil
        var checked = 0
        for (index, entry) in images.value.enumerated() {
            let found = try Self.reopenedState(entry.image)
            let allowed = states[entry.saved...].prefix(2)
            #expect(allowed.contains(found), "image \(index) after \(entry.saved) saves: \(found)")
            checked += 1
        }
        #expect(checked > 300, "crash states: \(checked)")
        print("object-layer crash simulation: \(checked) crash states, \(states.count - 1) saves")
    }

    /// For every N, call N of the same workload fails (EIO or ENOSPC). The save that
    /// hit it throws, and the store — as left, and after a power loss — holds the state
    /// after the last save that returned, or after the failed one (its commit may have
    /// reached the disk before a later call failed), never anything else.
    @Test func aFailingCallDuringObjectSavesLeavesASavedState() throws {
        var reference = [""]
        try Self.workload(MemoryFileSystem(), seed: 22, saves: 16) { reference.append($0) }
        var n = 1
        var injected = 0
        while true {
            let base = MemoryFileSystem()
            let faulty = FaultInjectingFileSystem(base: base, failingCalls: [n], errno: n % 2 == 1 ? 5 : 28)
            var saved = 0
            var failed = false
            do {
                try Self.workload(faulty, seed: 22, saves: 16) { state in
                    #expect(state == reference[saved + 1], "N=\(n): the run diverged from the reference")
                    saved += 1
                }
            } catch {
                failed = true
            }
            if !failed { break }  // the workload finished before call N
            injected += 1
            for image in [base.crashImage(.keepAll), base.crashImage(.dropAll)] where base.exists("/db/MANIFEST") {
                let found = try Self.reopenedState(image)
                #expect(reference[saved...].prefix(2).contains(found), "N=\(n) after \(saved) saves: \(found)")
            }
            n += 1
        }
        #expect(injected > 40, "faults injected: \(injected)")
        print("object-layer I/O faults: \(injected) failing calls")
    }
}
