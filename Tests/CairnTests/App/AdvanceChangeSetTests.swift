import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage
import CairnCollections

/// A reader's ``Coordinator/advance()`` that nobody hears (no context, no observer) builds
/// each change set's sets only when they are first read; they must be what a reader that
/// is heard builds at once.
@Suite struct AdvanceChangeSetTests {
    @Test func setsBuiltWhenReadAreThoseBuiltAtOnce() throws {
        let fs = MemoryFileSystem()
        let writer = try Stack(fs: fs)
        let silent = try Coordinator(path: writer.path, schema: writer.model.schema, options: ReaderTests.readerOptions(fs))
        let heard = try Coordinator(path: writer.path, schema: writer.model.schema, options: ReaderTests.readerOptions(fs))
        let observed = Protected<[ChangeSet]>([])
        heard.addObserver { changeSet in observed.withLock { $0.append(changeSet) } }

        let context = writer.context()
        let people = (0..<3).map { n -> Person in
            let person = Person(context: context)
            person.username = "p\(n)"
            return person
        }
        try context.save()
        people[1].age = 40
        try context.save()
        context.delete(people[2])
        try context.save()
        try context.save()  // (nothing to save: no transaction)

        let lazy = try silent.advance(), eager = try heard.advance()
        #expect(lazy.count == 3 && eager.count == 3)
        #expect(lazy == eager)
        #expect(observed.withLock { $0 } == eager)
        #expect(lazy[0].inserted == Set(people.map(\.objectID)) && lazy[0].updated.isEmpty && lazy[0].deleted.isEmpty)
        #expect(lazy[1].updated == [people[1].objectID: ["age"]] && lazy[1].inserted.isEmpty)
        #expect(lazy[2].deleted == [people[2].objectID])
        #expect(lazy.map(\.isEmpty) == [false, false, false])
        #expect(lazy.map(\.sequence) == eager.map(\.sequence))

        // A copy set apart from the one it was copied from, before and after the sets were built.
        let next = try { () throws -> [ChangeSet] in
            people[0].age = 7
            try context.save()
            return try silent.advance()
        }()
        var copy = next[0]
        copy.updated = [:]
        #expect(copy.updated.isEmpty && copy.isEmpty && copy.sequence == next[0].sequence)
        #expect(next[0].updated == [people[0].objectID: ["age"]] && !next[0].isEmpty)
        var later = next[0]
        later.inserted.insert(people[1].objectID)
        #expect(later.inserted == [people[1].objectID] && later.updated == next[0].updated && next[0].inserted.isEmpty)
        #expect(try silent.advance().isEmpty)
    }
}
