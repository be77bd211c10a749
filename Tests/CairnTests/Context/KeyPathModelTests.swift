import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// An author and books, their inverses, uniqueness and index named by key path.
final class Author: ManagedObject {
    @Attribute var first: String = ""
    @Attribute var last: String = ""
    @Attribute var born: Int = 0
    @ToMany(inverse: \Book.author, deleteRule: .cascade) var books: [Book]

    override class var uniqueKeyPaths: [[AnyKeyPath]] { [[\Author.first, \Author.last]] }
    override class var indexKeyPaths: [[AnyKeyPath]] { [[\Author.last, \Author.born]] }
}

/// (The inverse is declared on one side, as in SwiftData: the book's side takes it.)
final class Book: ManagedObject {
    @Attribute var title: String = ""
    @ToOne var author: Author?
}

/// A pair whose inverse is declared on the to-one side.
final class Squad: ManagedObject {
    @Attribute var name: String = ""
    @ToMany var recruits: [Recruit]
}

final class Recruit: ManagedObject {
    @Attribute var name: String = ""
    @ToOne(inverse: \.recruits) var squad: Squad?
}

/// A class whose inverse key path names no relationship back to it.
final class Stray: ManagedObject {
    @Attribute var name: String = ""
    @ToOne(inverse: \Book.title) var book: Book?
}

/// Key paths wherever a model names a property: inverses, uniqueness, indexes.
@Suite struct KeyPathModelTests {
    @Test func theModelNamesWhatTheKeyPathsRead() throws {
        let model = try Model(Author.self, Book.self)
        let author = try #require(model.schema.entities.first { $0.name == "Author" })
        let book = try #require(model.schema.entities.first { $0.name == "Book" })
        #expect(author.relationships.first?.inverse == "author")
        #expect(book.relationships.first?.inverse == "books")
        #expect(author.uniqueness == [["first", "last"]])
        let teams = try Model(Squad.self, Recruit.self).schema.entities
        #expect(teams.first { $0.name == "Squad" }?.relationships.first?.inverse == "squad")
        #expect(teams.first { $0.name == "Recruit" }?.relationships.first?.inverse == "recruits")
        #expect(author.indexes == [["last", "born"]])
    }

    @Test func theInversesAndTheRulesHold() throws {
        let stack = try Stack(model: Model(Author.self, Book.self))
        let context = stack.context()
        let ann = Author(context: context)
        ann.first = "Ann"
        ann.last = "Lee"
        let book = Book(context: context)
        book.title = "Tides"
        book.author = ann
        #expect(ann.books == [book], "the inverse follows")
        try context.save()

        let twin = Author(context: context)
        twin.first = "Ann"
        twin.last = "Lee"
        let error = #expect(throws: CairnError.self) { try context.save() }
        #expect(error?.code == .validation)
        context.rollback()

        context.delete(ann)
        try context.save()
        #expect(try context.count(Book.self) == 0, "the cascade named by key path ran")
    }

    @Test func aKeyPathThatReadsNoInverseFailsTheModel() {
        let error = #expect(throws: CairnError.self) { try Model(Stray.self, Book.self, Author.self) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.contains("Stray.book") == true)
    }
}
