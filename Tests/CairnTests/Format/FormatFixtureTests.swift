import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

final class V1Author: ManagedObject {
    @Attribute(indexed: true) var name: String = ""
    @Attribute(indexed: true) var born: Int64 = 0
    @Attribute var note: String? = nil
    @ToMany(inverse: "author", deleteRule: .cascade) var books: [V1Book]
}

final class V1Book: ManagedObject {
    @Attribute var title: String = ""
    @Attribute(indexed: true) var year: Int32 = 0
    @ToOne(inverse: "books") var author: V1Author?
}

/// Stores written by earlier format versions (Tests/Fixtures/format-vN, see each README)
/// open, read, query through their indexes, take new commits and compact into the
/// current version, with the same contents before and after. All fixtures hold the same
/// contents, written by `writeFixture` with the Cairn of their version.
@Suite struct FormatFixtureTests {
    static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures").path

    /// A copy of the fixture of `version` (opening a store may write to it).
    static func copy(version: Int) throws -> String {
        let directory = NSTemporaryDirectory() + "cairn-v\(version)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // (The store's files: from version 5 on, a history file too.)
        for name in try FileManager.default.contentsOfDirectory(atPath: fixtures + "/format-v\(version)") where name != "README.md" {
            try FileManager.default.copyItem(atPath: fixtures + "/format-v\(version)/" + name, toPath: directory + "/" + name)
        }
        return directory
    }

    static func version(of file: String) throws -> UInt32 {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        return bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt32.self)) }
    }

    /// Writes the fixture contents (the READMEs' recipe) with this build's format, into
    /// `Tests/Fixtures/format-vN` for the current N. Run it once, before the format
    /// version is bumped, and keep its files: `CAIRN_WRITE_FIXTURE=1 swift test --filter FormatFixtureTests`.
    @Test func writeFixture() throws {
        guard ProcessInfo.processInfo.environment["CAIRN_WRITE_FIXTURE"] == "1" else { return }
        let path = Self.fixtures + "/format-v\(FileHeader.currentVersion)"
        try? FileManager.default.removeItem(atPath: path)
        let model = try Model(V1Author.self, V1Book.self)
        var options = StoreOptions(compaction: .manual, preallocationBytes: 4096)
        options.history = .unlimited  // (version 5 on: the history notes and the history file)
        let coordinator = try Coordinator(path: path, schema: model.schema, options: options)
        defer { try? coordinator.close() }
        let context = Context(coordinator: coordinator, model: model)
        context.transactionAuthor = "fixture"
        var authors: [V1Author] = []
        for i in 0..<50 {
            let author = V1Author.create(in: context)
            author.name = "author-\(i)"
            author.born = Int64(1900 + i % 40)
            author.note = i % 2 == 0 ? "even" : nil
            author.books = (0..<3).map { j in
                let book = V1Book.create(in: context)
                book.title = "book-\(i)-\(j)"
                book.year = Int32(1950 + (3 * i + j) % 60)
                return book
            }
            authors.append(author)
        }
        try context.save()
        try coordinator.store.compact()
        for (i, author) in authors.enumerated() where i % 10 == 0 {
            author.name = "renamed-\(i)"
            author.born = 2000
        }
        context.delete(authors[7])
        try context.save()
        // (Version 6 on: the history file keeps the renames' and deletes' past values.)
        try coordinator.store.compact()
        let late = V1Author.create(in: context)
        late.name = "author-100"
        late.born = 1999
        let book = V1Book.create(in: context)
        book.title = "book-100-0"
        book.year = 2024
        late.books = [book]
        try context.save()
    }
    /// Checks what the fixture's README says the store holds.
    static func check(_ context: Context) throws {
        let authors = try context.fetch(FetchQuery(V1Author.self))
        #expect(authors.count == 50)
        #expect(try context.count(for: FetchQuery(V1Book.self)) == 148)
        for author in authors {
            if author.name == "author-100" {
                #expect(author.born == 1999)
                #expect(author.books.map(\.title) == ["book-100-0"])
                #expect(author.books.first?.year == 2024)
                continue
            }
            let renamed = author.name.hasPrefix("renamed-")
            let i = try #require(Int(author.name.split(separator: "-")[1]))
            #expect(i != 7)
            #expect(renamed == (i % 10 == 0))
            #expect(author.born == (renamed ? 2000 : Int64(1900 + i % 40)))
            #expect(author.note == (i % 2 == 0 ? "even" : nil))
            #expect(author.books.map(\.title).sorted() == (0..<3).map { "book-\(i)-\($0)" })
            for book in author.books {
                let j = try #require(Int(book.title.split(separator: "-")[2]))
                #expect(book.year == Int32(1950 + (i * 3 + j) % 60))
                #expect(book.author === author)
            }
        }
        // Indexed queries, on attributes changed in the log and not.
        let renamed = try context.fetch(FetchQuery(V1Author.self, format: "born == 2000")).map(\.name).sorted()
        #expect(renamed == ["renamed-0", "renamed-10", "renamed-20", "renamed-30", "renamed-40"])
        #expect(try context.fetch(FetchQuery(V1Author.self, format: "name == 'author-10'")).isEmpty)
        #expect(try context.fetch(FetchQuery(V1Author.self, format: "name == 'author-11'")).map(\.born) == [1911])
        let years = try context.fetch(FetchQuery(V1Book.self, format: "year >= 2005 AND year < 2010"))
        // 3i + j ≡ 55…59 (mod 60) over i in 0..<50 without 7, j in 0..<3, plus none of author-100.
        var expected = 0
        for i in 0..<50 where i != 7 { for j in 0..<3 where (55..<60).contains((i * 3 + j) % 60) { expected += 1 } }
        #expect(years.count == expected)
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6])
    func anOlderStoreOpensReadsAndCompactsIntoTheCurrentVersion(version: Int) throws {
        let path = try Self.copy(version: version)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let original = try Store.readManifest(in: path, fileSystem: POSIXFileSystem())
        #expect(try Self.version(of: path + "/" + StoreFileName.snapshot(original.snapshotNumber)) == UInt32(version))
        let model = try Model(V1Author.self, V1Book.self)
        let options = StoreOptions(compaction: .manual)
        do {
            let coordinator = try Coordinator(path: path, schema: model.schema, options: options)
            defer { try? coordinator.close() }
            try Self.check(Context(coordinator: coordinator, model: model))
            #expect(coordinator.store.verify().isEmpty)
            try coordinator.store.compact()
            try Self.check(Context(coordinator: coordinator, model: model))
        }
        let manifest = try Store.readManifest(in: path, fileSystem: POSIXFileSystem())
        #expect(try Self.version(of: path + "/" + StoreFileName.snapshot(manifest.snapshotNumber)) == FileHeader.currentVersion)
        let coordinator = try Coordinator(path: path, schema: model.schema, options: options)
        defer { try? coordinator.close() }
        try Self.check(Context(coordinator: coordinator, model: model))
    }

    /// Version 5's fixture kept history: its three transactions (the first from the
    /// history file written by the compaction, the others from the log's notes) with
    /// their author, kinds and changed keys; and older fixtures report their log's
    /// transactions, with kinds found by replay.
    @Test func theHistoryOfVersionFiveReadsBack() throws {
        let path = try Self.copy(version: 5)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let model = try Model(V1Author.self, V1Book.self)
        let coordinator = try Coordinator(path: path, schema: model.schema, options: StoreOptions(compaction: .manual))
        defer { try? coordinator.close() }
        let history = try coordinator.history(after: nil)
        #expect(history.map(\.token.sequence) == [1, 2, 3])
        #expect(history.allSatisfy { $0.author == "fixture" })
        #expect(history[0].inserted.count == 200 && history[0].updated.isEmpty)
        #expect(history[1].updated.count == 5 && history[1].updated.values.allSatisfy { $0 == ["name", "born"] })
        #expect(history[1].deleted.count == 4, "author 7 and its three books")
        #expect(history[2].inserted.count == 2)
        let older = try Self.copy(version: 4)
        defer { try? FileManager.default.removeItem(atPath: older) }
        let four = try Coordinator(path: older, schema: model.schema, options: StoreOptions(compaction: .manual))
        defer { try? four.close() }
        let logged = try four.history(after: nil)
        #expect(logged.map(\.author) == [nil, nil] && logged[0].updated.count == 5 && logged[0].updated.values.allSatisfy(\.isEmpty))
    }

    /// Past states of the fixtures that keep history: each transaction's state, rebuilt
    /// from version 6's past values (before its snapshot) and version 5's log.
    @Test(arguments: [5, 6])
    func pastStatesOfAFixtureReadBack(version: Int) throws {
        let path = try Self.copy(version: version)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let model = try Model(V1Author.self, V1Book.self)
        let coordinator = try Coordinator(path: path, schema: model.schema, options: StoreOptions(compaction: .manual))
        defer { try? coordinator.close() }
        func context(asOf sequence: UInt64) throws -> Context {
            let context = Context(coordinator: coordinator, model: model)
            try context.setQueryGenerationFrom(coordinator.queryGeneration(asOf: HistoryToken(storeID: coordinator.storeID, sequence: sequence)))
            return context
        }
        #expect(try context(asOf: 0).fetch(FetchQuery(V1Author.self)).isEmpty)
        let first = try context(asOf: 1)
        let authors = try first.fetch(FetchQuery(V1Author.self))
        #expect(authors.count == 50 && authors.allSatisfy { $0.name.hasPrefix("author-") && $0.books.count == 3 })
        #expect(try first.count(for: FetchQuery(V1Book.self)) == 150)
        #expect(try first.fetch(FetchQuery(V1Author.self, format: "born == 2000")).isEmpty)
        let second = try context(asOf: 2)
        #expect(try second.fetch(FetchQuery(V1Author.self, format: "born == 2000")).count == 5)
        #expect(try second.count(for: FetchQuery(V1Author.self)) == 49 && second.count(for: FetchQuery(V1Book.self)) == 147)
        try Self.check(try context(asOf: 3))
    }
}
