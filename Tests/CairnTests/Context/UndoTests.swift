import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Undo/redo sequences checked against the expected state after every step.
@Suite struct UndoTests {
    /// A compact picture of a context: each person's name, age and DVD titles; each DVD's owner.
    func state(_ context: Context) throws -> String {
        let people = try context.fetch(Person.self).map { "\($0.username):\($0.age):[\($0.dvds.map(\.title).joined(separator: ","))]" }
        let dvds = try context.fetch(DVD.self).map { "\($0.title)->\($0.owner?.username ?? "-")" }
        return (people + dvds).joined(separator: " ")
    }

    @Test func attributeInsertDeleteAndRelationshipChangesUndoAndRedo() throws {
        let context = try Stack().context()
        context.undoManager.groupsByEvent = false  // each change its own undo step
        let alice = Person(context: context)              // group 1
        #expect(try state(context) == ":0:[]")
        alice.username = "alice"                           // group 2
        alice.age = 30                                     // group 3
        let dvd = DVD(context: context)                    // group 4
        dvd.title = "Alien"                                // group 5
        dvd.owner = alice                                  // group 6 (with the inverse)
        let s6 = try state(context)
        #expect(s6 == "alice:30:[Alien] Alien->alice")
        context.delete(alice)                              // group 7 (cascades to the DVD)
        #expect(try state(context) == "")
        context.undo()
        #expect(try state(context) == s6, "undoing a cascade delete restores both objects and links")
        context.undo()
        #expect(try state(context) == "alice:30:[] Alien->-", "inverse undone too")
        context.undo()
        context.undo()
        #expect(try state(context) == "alice:30:[]", "insert undone")
        context.redo()
        context.redo()
        #expect(try state(context) == "alice:30:[] Alien->-")
        context.redo()
        #expect(try state(context) == s6)
        context.undo()
        alice.age = 31                                     // a new change clears the redo stack
        #expect(!context.undoManager.canRedo)
        context.redo()
        #expect(try state(context) == "alice:31:[] Alien->-")
    }

    /// DVDs moving between people (each person's list gaining and losing one at a time,
    /// as undo records it), whole lists set, DVDs deleted, some changes grouped, a save now
    /// and then, with undo and redo at random: every undo and redo gives back the state
    /// seen before, lists in their order.
    @Test(arguments: [3, 11, 29])
    func relationshipListsUndoAndRedoExactly(seed: UInt64) throws {
        let context = try Stack().context()
        context.undoManager.groupsByEvent = false  // each change its own undo step
        var generator = ValueGenerator(random: SplitMix64(seed: seed))
        let people = (0..<4).map { index -> Person in
            let person = Person(context: context)
            person.username = "p\(index)"
            return person
        }
        let dvds = (0..<12).map { index -> DVD in
            let dvd = DVD(context: context)
            dvd.title = "d\(index)"
            return dvd
        }
        context.undoManager.removeAllActions()
        var log: [String] = []
        var done = [try state(context)]  // the state after each undoable step, oldest first
        var undone: [String] = []        // states redo gives back, next last
        func change() {
            // (A saved delete leaves no context; an insert deleted before any save keeps it.)
            let live = dvds.filter { $0.context === context && $0.exists }
            guard let dvd = live.isEmpty ? nil : live[generator.int(live.count)] else { return }
            switch generator.int(15) {
            case 0...4: let p = people[generator.int(people.count)]; log.append("\(dvd.title).owner=\(p.username)"); dvd.owner = p
            case 5: log.append("\(dvd.title).owner=nil"); dvd.owner = nil
            case 6:
                let person = people[generator.int(people.count)]
                person.dvds = Array(live.shuffled(using: &generator.random).prefix(generator.int(5)))
                log.append("\(person.username).dvds=\(person.dvds.map(\.title))")
            case 7: log.append("delete \(dvd.title)"); context.delete(dvd)
            case 10...14:
                // One target added or taken out, through the list or through `$dvds`: the list
                // changes by that one target, in place (as edits, not a new list).
                let person = people[generator.int(people.count)]
                let before = person.dvds
                let held = before.contains { $0 === dvd }
                var expected = before
                switch generator.int(6) {
                case 0:
                    log.append("\(person.username).dvds.append(\(dvd.title))"); person.dvds.append(dvd)
                    if !held { expected.append(dvd) }
                case 1:
                    log.append("\(person.username).$dvds.append(\(dvd.title))"); person.$dvds.append(dvd)
                    if !held { expected.append(dvd) }
                case 2:
                    let other = live[generator.int(live.count)]
                    log.append("\(person.username).$dvds.append(contentsOf: \(dvd.title), \(other.title), \(dvd.title))")
                    person.$dvds.append(contentsOf: [dvd, other, dvd])
                    if !held { expected.append(dvd) }
                    if !expected.contains(where: { $0 === other }) { expected.append(other) }
                case 3:
                    log.append("\(person.username).$dvds.remove(\(dvd.title))"); person.$dvds.remove(dvd)
                    expected.removeAll { $0 === dvd }
                case 4:
                    // Several taken out at once: every other one.
                    log.append("\(person.username).dvds = every other")
                    expected = before.enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
                    person.dvds = expected
                default:
                    guard !before.isEmpty else { return }
                    let index = generator.int(before.count)
                    log.append("\(person.username).dvds.remove(at: \(index))"); person.dvds.remove(at: index)
                    expected.remove(at: index)
                }
                #expect(person.dvds.map(\.title) == expected.map(\.title), "\(log.suffix(4))")
                #expect(person.$dvds.contains(dvd) == expected.contains { $0 === dvd })
            default:
                log.append("group")
                context.undoGroup {
                    for _ in 0..<3 { live[generator.int(live.count)].owner = people[generator.int(people.count)] }
                }
            }
        }
        // Both sides agree: a DVD is in the list of the person it names, and of no other.
        func inversesAgree() -> Bool {
            people.allSatisfy { person in person.dvds.allSatisfy { $0.owner === person } }
                && dvds.filter { $0.context === context && $0.exists }.allSatisfy { dvd in
                    people.filter { $0.$dvds.contains(dvd) }.map(\.username) == (dvd.owner.map { [$0.username] } ?? [])
                }
        }
        for step in 0..<300 {
            defer { #expect(inversesAgree(), "inverses after step \(step): \(log.suffix(4))") }
            switch generator.int(10) {
            case 0...5:
                let groups = context.undoManager.undoCount
                change()
                let now = try state(context)
                // A step of its own whenever a group was recorded (a group's changes may add up
                // to nothing seen), and never a change seen without one.
                if context.undoManager.undoCount > groups {
                    done.append(now)
                    undone.removeAll()
                } else {
                    #expect(now == done.last, "a change at \(step) with no undo group: \(log.suffix(4))")
                }
            case 6, 7:
                guard done.count > 1, context.undoManager.canUndo else { continue }
                context.undo()
                log.append("undo")
                undone.append(done.removeLast())
                #expect(try state(context) == done.last, "undo at \(step): \(log.suffix(8))")
            case 8:
                guard let next = undone.popLast() else { continue }
                context.redo()
                log.append("redo")
                done.append(next)
                #expect(try state(context) == next, "redo at \(step): \(log.suffix(8))")
            default:
                try context.save()
                log.append("save \(step)")
            }
        }
        _ = log
    }

    /// A saved person owning `count` DVDs titled d0, d1, …, with no undo recorded yet.
    func savedShelf(_ count: Int) throws -> (Context, Person, [DVD]) {
        let context = try Stack().context()
        let person = Person(context: context)
        person.username = "p"
        let shelf = (0..<count).map { index -> DVD in
            let dvd = DVD(context: context)
            dvd.title = "d\(index)"
            return dvd
        }
        person.$dvds.append(contentsOf: shelf)
        try context.save()
        context.undoManager.removeAllActions()
        return (context, person, shelf)
    }

    /// Adding to a long list, through the list (`dvds.append`) or through `$dvds`, and taking
    /// targets out keeps the edits for undo, not a copy of the list per change: undo's
    /// records hold a few references per change, not the list's length. Undo then gives
    /// the list back exactly.
    @Test func listEditsKeepEditsForUndoNotLists() throws {
        let (context, person, shelf) = try savedShelf(1_000)
        let extra = (0..<50).map { index -> DVD in
            let dvd = DVD(context: context)
            dvd.title = "x\(index)"
            return dvd
        }
        let before = context.undoManager.heldReferences
        for (index, dvd) in extra.enumerated() {
            if index % 2 == 0 { person.dvds.append(dvd) } else { person.$dvds.append(dvd) }
        }
        person.dvds.remove(at: 10)
        person.$dvds.remove(shelf[20])
        let stray = DVD()
        person.$dvds.remove(stray)
        #expect(stray.context == nil, "taking out an object in no context does not insert it")
        person.dvds = person.dvds.filter { !$0.title.hasSuffix("7") }
        // About 5 references per change (the edit, and each DVD's owner before and after);
        // a list per change would be over 50,000.
        #expect(context.undoManager.heldReferences - before < 1_000)
        var expected = shelf + extra
        expected.remove(at: 10)
        expected.removeAll { $0 === shelf[20] }
        expected.removeAll { $0.title.hasSuffix("7") }
        #expect(person.dvds.map(\.title) == expected.map(\.title))
        while context.undoManager.canUndo, context.undoManager.undoCount > 0 {
            context.undo()
            if person.dvds.count == 1_000 { break }
        }
        #expect(person.dvds.map(\.title) == shelf.map(\.title))
        #expect(shelf.allSatisfy { $0.owner === person } && extra.allSatisfy { $0.owner == nil })
    }

    /// Clearing a long list is recorded as the list it was (one record, not one removal per
    /// target, which undo put back one shift of the list at a time); undo and redo give the
    /// list back exactly, inverses included.
    @Test func clearingALongListUndoesAsOneList() throws {
        let (context, person, shelf) = try savedShelf(2_000)
        person.dvds = []
        // One record for the list, one for each DVD's owner (per-removal records: 4,000).
        #expect(context.undoManager.recordCount <= 2_001)
        #expect(shelf.allSatisfy { $0.owner == nil })
        context.undo()
        #expect(person.dvds.map(\.title) == shelf.map(\.title) && shelf.allSatisfy { $0.owner === person })
        context.redo()
        #expect(person.dvds.isEmpty && shelf.allSatisfy { $0.owner == nil })
    }

    /// A list that holds a target twice (only damaged data does) and is set without the
    /// second copy keeps the target linked on its side: taking out one copy is not taking
    /// out the target.
    @Test func aDuplicateTakenOutOfADamagedListStaysLinked() throws {
        let context = try Stack().context()
        let person = Person(context: context)
        person.username = "p"
        let a = DVD(context: context), b = DVD(context: context)
        a.title = "a"; b.title = "b"
        a.owner = person; b.owner = person
        let slot = try #require(person.layout.index(of: "dvds"))
        person.setValue(.references([a.recordID.rawValue, b.recordID.rawValue, a.recordID.rawValue]), at: slot)
        #expect(person.dvds.map(\.title) == ["a", "b", "a"])
        person.dvds = [a, b]
        #expect(person.dvds.map(\.title) == ["a", "b"])
        #expect(a.owner === person && b.owner === person)
    }

    /// Undoing a link after another context changed the same list (merged here, with no
    /// undo record) takes out the target this context added, wherever it now is, and never
    /// one the other context added; redo puts it back.
    @Test func undoingALinkTakesOutThatTargetAfterAMergedChange() throws {
        let stack = try Stack()
        let a = stack.context()
        let person = Person(context: a)
        person.username = "p"
        let dvds = (1...4).map { index -> DVD in
            let dvd = DVD(context: a)
            dvd.title = "d\(index)"
            return dvd
        }
        dvds[0].owner = person
        dvds[1].owner = person
        try a.save()
        dvds[2].owner = person                             // p.dvds: d1, d2, d3 (d3 inserted at 2)
        try a.save()
        let b = stack.context()
        let theirs = try #require(try b.existingObject(with: person.objectID) as? Person)
        let d1 = try #require(try b.existingObject(with: dvds[0].objectID) as? DVD)
        let d4 = try #require(try b.existingObject(with: dvds[3].objectID) as? DVD)
        d1.owner = nil
        d4.owner = theirs                                  // stored: d2, d3, d4
        try b.save()
        #expect(try a.fetch(Person.self).first?.dvds.map(\.title) == ["d2", "d3", "d4"])
        a.undo()                                           // d3.owner = person, undone
        #expect(person.dvds.map(\.title) == ["d2", "d4"], "d4, which b added at d3's old place, stays")
        #expect(dvds[2].owner == nil && dvds[3].owner === person)
        a.redo()
        #expect(person.dvds.map(\.title) == ["d2", "d3", "d4"] && dvds[2].owner === person)
    }

    /// The group log against a list of groups, through random opens (named or not),
    /// records, renames, pops and level limits: the same groups, records, names and counts
    /// after every step. (A group's start is a flag in its first record, names are kept by
    /// start, and the starts of the last two groups are cached.)
    @Test(arguments: [1, 2, 3])
    func groupLogKeepsGroupsAsAListOfThemWould(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var log = UndoStack.GroupLog()
        var model: [(name: String?, markers: [Int])] = []
        var lastOpenIsEmpty = false  // the stack never opens a group over an empty one
        var marker = 0
        let object = DVD()
        func markers(_ records: [UndoStack.Record]) -> [Int] {
            records.map { record in
                if case .value(_, .int64(let value)) = record.recorded { return Int(value) }
                return -1
            }
        }
        for step in 0..<3_000 {
            switch random.next() % 100 {
            case 0..<15 where !lastOpenIsEmpty:
                let name: String? = random.next() % 3 == 0 ? "g\(step)" : nil
                log.open(named: name)
                model.append((name, []))
                lastOpenIsEmpty = true
            case 15..<70 where !model.isEmpty:
                marker += 1
                log.append(UndoStack.Record(object: object, recorded: .value(slot: 0, .int64(Int64(marker)))))
                model[model.count - 1].markers.append(marker)
                lastOpenIsEmpty = false
            case 70..<75 where !model.isEmpty:
                let name: String? = random.next() % 2 == 0 ? "r\(step)" : nil
                log.lastName = name
                model[model.count - 1].name = name
            case 75..<90:
                let popped = log.popLast()
                let expected = model.popLast()
                #expect(popped?.name == expected?.name && popped.map { markers($0.records) } == expected?.markers, "step \(step)")
                lastOpenIsEmpty = false
            case 90..<95:
                let limit = Int(random.next() % 6) + 1
                log.keep(atMost: limit)
                if model.count > limit { model.removeFirst(model.count - limit) }
            default:
                continue
            }
            #expect(log.count == model.count && log.isEmpty == model.isEmpty, "step \(step)")
            #expect(log.lastIsEmpty == (model.last?.markers.isEmpty ?? true), "step \(step)")
            #expect(log.recordCount == model.reduce(0) { $0 + $1.markers.count }, "step \(step)")
            #expect(log.name(fromEnd: 0) == model.last?.name, "step \(step)")
            #expect(log.name(fromEnd: 1) == (model.count > 1 ? model[model.count - 2].name : nil), "step \(step)")
        }
        // Everything left pops out as it went in.
        while let expected = model.popLast() {
            let popped = log.popLast()
            #expect(popped?.name == expected.name && popped.map { markers($0.records) } == expected.markers)
        }
        #expect(log.popLast() == nil && log.isEmpty)
    }

    /// Undo's chunked record storage against an array: random appends, suffix removals
    /// and drops of leading chunks, across several 4,096-record chunks.
    @Test func recordChunksKeepRecordsAsAnArrayWould() {
        var random = SplitMix64(seed: 7)
        var chunks = UndoStack.RecordChunks()
        var model: [Int] = []
        var dropped = 0  // records the model has let go of at its front
        var serial = 0
        let object = DVD()
        func serialOf(_ record: UndoStack.Record) -> Int {
            if case .value(_, .int64(let value)) = record.recorded { return Int(value) }
            return -1
        }
        for step in 0..<400 {
            switch random.next() % 10 {
            case 0..<6:
                for _ in 0..<Int(random.next() % 3_000) {
                    serial += 1
                    chunks.append(UndoStack.Record(object: object, recorded: .value(slot: 0, .int64(Int64(serial)))))
                    model.append(serial)
                }
            case 6..<8:
                var start = model.isEmpty ? 0 : Int(random.next() % UInt64(model.count + 1))
                if random.next() % 3 == 0 { start -= start % 4_096 }  // at a chunk's start
                let taken = chunks.removeSuffix(from: start)
                #expect(taken.map(serialOf) == Array(model[start...]), "step \(step)")
                model.removeSubrange(start...)
            default:
                let before = model.isEmpty ? 0 : Int(random.next() % UInt64(model.count + 1))
                let gone = chunks.removeChunks(before: before)
                #expect(gone % 4_096 == 0 && gone <= before, "step \(step)")
                model.removeFirst(gone)
                dropped += gone
            }
            #expect(chunks.count == model.count, "step \(step)")
            if !model.isEmpty {
                for index in [0, model.count / 2, model.count - 1, Int(random.next() % UInt64(model.count))] {
                    #expect(serialOf(chunks[index]) == model[index], "step \(step) index \(index)")
                }
            }
        }
        #expect(dropped > 0 && serial > 20_000, "the walk went past several chunks and dropped some")
    }

    @Test func explicitGroupsNamesAndLevels() throws {
        let context = try Stack().context()
        context.undoManager.groupsByEvent = false  // each change its own undo step
        let p = Person(context: context)
        p.username = "p"
        context.undoGroup(named: "Birthday") {
            p.age += 1
            p.name = "Happy"
        }
        #expect(context.undoManager.undoActionName == "Birthday")
        context.undo()
        #expect(p.age == 0 && p.name == nil)
        #expect(context.undoManager.redoActionName == "Birthday")
        context.redo()
        #expect(p.age == 1 && p.name == "Happy")

        context.undoManager.levelsLimit = 2
        for age in 2...6 { p.age = age }
        context.undo(); context.undo(); context.undo()
        #expect(p.age == 4, "only two levels kept")
        context.undoManager.isEnabled = false
        p.age = 99
        #expect(!context.undoManager.canUndo)
    }

    /// Undo keeps 100 levels unless told otherwise: a long-running program's history is
    /// bounded by default (it kept every group).
    @Test func undoKeepsAHundredLevelsByDefault() throws {
        let stack = try Stack()
        let context = stack.context()
        context.undoManager.groupsByEvent = false  // each change its own undo step
        #expect(context.undoManager.levelsLimit == 100)
        let p = Person(context: context)
        p.username = "p"
        for age in 1...250 { p.age = age }
        var undone = 0
        while context.undoManager.canUndo {
            context.undo()
            undone += 1
        }
        #expect(undone == 100)
        #expect(p.age == 150)
    }

    /// Found by the context_ops fuzz target (input kept in Fuzz/regressions/context_ops):
    /// a cascade delete saved, undone and saved again, then redone and saved, must delete
    /// the records again. The redo restored the state captured while the saved delete had
    /// detached the objects, so they left the context and the save wrote them back.
    @Test func redoingASavedDeleteAfterUndoAndSaveDeletesAgain() throws {
        let stack = try Stack()
        let context = stack.context()
        let alice = Person(context: context)
        alice.username = "alice"
        let dvd = DVD(context: context)
        dvd.title = "Alien"
        dvd.owner = alice
        try context.save()
        context.delete(alice)                              // cascades to the DVD
        try context.save()
        context.undo()
        #expect(try state(context) == "alice:0:[Alien] Alien->alice", "undo brings both back")
        try context.save()
        context.redo()
        #expect(try state(context) == "")
        try context.save()
        let reopened = try stack.reopened().context()
        #expect(try state(reopened) == "", "the redone delete reached the store")
    }

    @Test func undoAfterSaveBecomesAnUnsavedChange() throws {
        var stack = try Stack()
        let context = stack.context()
        let p = Person(context: context)
        p.username = "before"
        try context.save()
        p.username = "after"
        try context.save()
        #expect(!context.hasChanges)
        context.undo()
        #expect(p.username == "before" && context.hasChanges && context.updatedObjects == [p])
        try context.save()
        // Undoing the insert of a saved object deletes it.
        context.undo()
        context.undo()
        #expect(p.isDeleted)
        try context.save()
        stack = try stack.reopened()
        #expect(try stack.context().count(Person.self) == 0)
        // And redo brings it back as a new insert with the same ID.
        context.redo()
        #expect(p.isInserted)
    }

    /// A property set records that value alone; a group that sets values and then deletes
    /// (or otherwise changes the whole object) still undoes to the state before the group,
    /// and one that sets a value twice undoes to the first value and redoes to the last.
    /// A group that records an object whole (its insert) leaves no mark on it for the
    /// next group: each later change records its value again (in each of two contexts).
    @Test func eachGroupRecordsWhatItChanges() throws {
        let stack = try Stack()
        for context in [stack.context(), stack.context()] {
            context.undoManager.groupsByEvent = false  // each change its own undo step
            let person = Person(context: context)
            person.username = "first"
            person.username = "second"
            person.age = 7
            context.undo()
            #expect(person.username == "second" && person.age == 0)
            context.undo()
            #expect(person.username == "first")
            context.undo()
            #expect(person.username == "")
            context.undo()
            #expect(try context.fetch(Person.self).isEmpty)
            context.redo()
            context.redo()
            #expect(person.username == "first" && !person.isDeleted)
        }
    }

    @Test func valuesSetInAGroupUndoWithTheRestOfIt() throws {
        let stack = try Stack()
        let context = stack.context()
        context.undoManager.groupsByEvent = false  // each change its own undo step
        let p = Person(context: context)
        p.username = "p"
        p.age = 1
        try context.save()
        context.undoGroup(named: "set then delete") {
            p.age = 2
            p.name = "Two"
            context.delete(p)
        }
        #expect(p.isDeleted)
        context.undo()
        #expect(!p.isDeleted && p.age == 1 && p.name == nil && p.username == "p")
        context.redo()
        #expect(p.isDeleted)
        context.undo()
        context.undoGroup {
            p.name = "first"
            p.age = 3
            p.name = "second"
        }
        context.undo()
        #expect(p.name == nil && p.age == 1)
        context.redo()
        #expect(p.name == "second" && p.age == 3)
        // A group of many objects (past the few an entry search handles) undoes each one once.
        let others = (0..<20).map { i -> Person in
            let other = Person(context: context)
            other.username = "u\(i)"
            return other
        }
        context.undoGroup {
            for (i, other) in others.enumerated() { other.age = i; other.age = i + 100; other.name = "n\(i)" }
        }
        context.undo()
        #expect(others.allSatisfy { $0.age == 0 && $0.name == nil })
        context.redo()
        #expect(others.enumerated().allSatisfy { $0.element.age == $0.offset + 100 && $0.element.name == "n\($0.offset)" })
        // Each set outside a group is its own step.
        p.age = 7
        p.age = 8
        context.undo()
        #expect(p.age == 7)
        context.undo()
        #expect(p.age == 3)
        // A levels limit keeps the last groups only, however many went before.
        context.undoManager.levelsLimit = 3
        for age in 10..<110 { p.age = age }
        for expected in [108, 107, 106] {
            context.undo()
            #expect(p.age == expected)
        }
        #expect(!context.undoManager.canUndo)
        context.undo()
        #expect(p.age == 106)
        context.redo(); context.redo(); context.redo()
        #expect(p.age == 109 && !context.undoManager.canRedo)
        p.age = 3
        try context.save()
        let reader = try stack.reopened().context()
        #expect(try reader.fetch(Person.self).first { $0.username == "p" }?.age == 3)
    }

    @Test func rollbackClearsUndo() throws {
        let context = try Stack().context()
        let p = Person(context: context)
        p.username = "x"
        context.rollback()
        #expect(!context.undoManager.canUndo && !context.undoManager.canRedo)
    }
}

@Suite struct ChildContextTests {
    @Test func childSavesPushIntoTheParentOnly() throws {
        var stack = try Stack()
        let root = stack.context()
        let p = Person(context: root)
        p.username = "parent-made"
        let child = Context(parent: root)
        let seen = try child.fetch(Person.self)
        #expect(seen.map(\.username) == ["parent-made"], "the child sees the parent's unsaved insert")
        let c = Person(context: child)
        c.username = "child-made"
        seen[0].age = 7
        #expect(try root.count(Person.self) == 1, "nothing reaches the parent before the child saves")
        try child.save()
        #expect(try root.fetch(Person.self).map(\.username) == ["parent-made", "child-made"])
        #expect(p.age == 7)
        #expect(stack.coordinator.store.lastSequence == 0, "nothing reaches the store before the root saves")
        // A grandchild chain.
        let grandchild = Context(parent: Context(parent: root))
        let g = try grandchild.fetch(Person.self).first { $0.username == "child-made" }
        g?.age = 9
        try grandchild.save()
        try grandchild.parent?.save()
        #expect(try root.fetch(Person.self).first { $0.username == "child-made" }?.age == 9)
        try root.save()
        stack = try stack.reopened()
        let reader = stack.context()
        #expect(try reader.fetch(Person.self).map { "\($0.username):\($0.age)" } == ["parent-made:7", "child-made:9"])
    }

    @Test func childDeletesAndRelationshipsPush() throws {
        let stack = try Stack()
        let root = stack.context()
        let owner = Person(context: root)
        owner.username = "o"
        let dvd = DVD(context: root)
        dvd.owner = owner
        try root.save()
        let child = Context(parent: root)
        let childOwner = try #require(try child.existingObject(Person.self, with: owner.objectID))
        let extra = DVD(context: child)
        extra.title = "Extra"
        extra.owner = childOwner
        child.delete(try #require(try child.existingObject(DVD.self, with: dvd.objectID)))
        try child.save()
        #expect(owner.dvds.map(\.title) == ["Extra"])
        #expect(dvd.isDeleted)
        try root.save()
        #expect(try root.count(DVD.self) == 1)
    }
}
