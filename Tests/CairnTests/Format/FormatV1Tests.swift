import Foundation
import Testing
@testable import Cairn

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

/// A store written by format version 1 (Tests/Fixtures/format-v1, see its README) opens,
/// reads, queries through its indexes, takes new commits and compacts into the current
/// version, with the same contents before and after.
@Suite struct FormatV1Tests {
    static let fixture = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/format-v1").path

    /// A copy of the fixture (opening a store may write to it).
    static func copy() throws -> String {
        let directory = NSTemporaryDirectory() + "cairn-v1-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for name in ["MANIFEST", "000003.snapshot", "000004.log"] {
            try FileManager.default.copyItem(atPath: fixture + "/" + name, toPath: directory + "/" + name)
        }
        return directory
    }

    static func version(of file: String) throws -> UInt32 {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        return bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt32.self)) }
    }

    /// Checks what the fixture's README says the store holds.
    static func check(_ context: Context) throws {
        let authors = try context.fetch(FetchRequest(V1Author.self))
        #expect(authors.count == 50)
        #expect(try context.count(for: FetchRequest(V1Book.self)) == 148)
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
        let renamed = try context.fetch(FetchRequest(V1Author.self, format: "born == 2000")).map(\.name).sorted()
        #expect(renamed == ["renamed-0", "renamed-10", "renamed-20", "renamed-30", "renamed-40"])
        #expect(try context.fetch(FetchRequest(V1Author.self, format: "name == 'author-10'")).isEmpty)
        #expect(try context.fetch(FetchRequest(V1Author.self, format: "name == 'author-11'")).map(\.born) == [1911])
        let years = try context.fetch(FetchRequest(V1Book.self, format: "year >= 2005 AND year < 2010"))
        // 3i + j ≡ 55…59 (mod 60) over i in 0..<50 without 7, j in 0..<3, plus none of author-100.
        var expected = 0
        for i in 0..<50 where i != 7 { for j in 0..<3 where (55..<60).contains((i * 3 + j) % 60) { expected += 1 } }
        #expect(years.count == expected)
    }

    @Test func aVersion1StoreOpensReadsAndCompactsIntoTheCurrentVersion() throws {
        let path = try Self.copy()
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try Self.version(of: path + "/000003.snapshot") == 1)
        let model = try Model(V1Author.self, V1Book.self)
        let options = StoreOptions(compaction: .manual)
        do {
            let coordinator = try Coordinator(path: path, schema: model.schema, options: options)
            defer { coordinator.close() }
            try Self.check(Context(coordinator: coordinator, model: model))
            #expect(coordinator.store.verify().isEmpty)
            try coordinator.store.compact()
            try Self.check(Context(coordinator: coordinator, model: model))
        }
        let manifest = try Store.readManifest(in: path, fileSystem: POSIXFileSystem())
        #expect(try Self.version(of: path + "/" + StoreFileName.snapshot(manifest.snapshotNumber)) == FileHeader.currentVersion)
        let coordinator = try Coordinator(path: path, schema: model.schema, options: options)
        defer { coordinator.close() }
        try Self.check(Context(coordinator: coordinator, model: model))
    }
}
