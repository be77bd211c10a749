import Foundation
import Testing
import Cairn
import CairnStorage

// The code of the DocC articles (Sources/Cairn/Cairn.docc), compiled and run here.
// `DocumentationTests` checks that every Swift block of every article appears in this
// file as written, so an article cannot show code that does not compile.

/// GettingStarted.md
enum GettingStartedExample {
    final class Person: ManagedObject {
        @Attribute var username: String = ""
        @Attribute var name: String? = nil
        @ToMany(inverse: \DVD.owner, deleteRule: .cascade) var dvds: [DVD]
        override class var uniqueKeyPaths: [[AnyKeyPath]] { [[\Person.username]] }
    }

    final class DVD: ManagedObject {
        @Attribute var title: String = ""
        @Attribute var purchaseDate: Date? = nil
        @ToOne var owner: Person?
    }

    @MainActor static func run() throws -> [String] {
        let container = try Container(name: "Library", entities: [Person.self, DVD.self], storage: .inMemory)
        let context = container.mainContext

        let ann = Person(context: context)
        ann.username = "ann"
        let alien = DVD(context: context)
        alien.title = "Alien"
        alien.owner = ann                       // ann.dvds follows
        try context.save()

        let found = try context.fetch(FetchQuery(Person.self, predicate: #Predicate { $0.username == "ann" }))
        return found.first?.dvds.map(\.title) ?? []
    }
}

/// Modeling.md
enum ModelingExample {
    struct Settings: Codable, Equatable {
        var theme = "light"
    }

    final class Account: ManagedObject {
        @Attribute(indexed: true) var email: String = ""
        @Attribute var id: UUID = UUID()                      // a new value for each object
        @Attribute var joined: Date? = nil                    // optional
        @Archived var settings: Settings = Settings()         // any Codable, stored as JSON
        @Transient var isSelected = false                     // tracked and undoable, never stored
        @Derived({ (account: Account) in account.email.lowercased() }, indexed: true) var key: String
        @ToMany(inverse: \Device.account, deleteRule: .cascade) var devices: [Device]

        override class var uniqueKeyPaths: [[AnyKeyPath]] { [[\Account.email]] }
    }

    final class Device: ManagedObject {
        @Attribute var name: String = ""
        @ToOne var account: Account?
    }

    @MainActor static func run() throws -> (key: String, devices: Int, afterDelete: Int) {
        let container = try Container(name: "Accounts", entities: [Account.self, Device.self], storage: .inMemory)
        let context = container.mainContext
        let account = Account(context: context)
        account.email = "Ann@Example.com"
        let phone = Device(context: context)
        phone.name = "phone"
        account.devices.append(phone)
        try context.save()
        let key = account.key
        let devices = try context.count(Device.self)
        context.delete(account)                               // cascades to its devices
        try context.save()
        return (key, devices, try context.count(Device.self))
    }
}

/// ContextsAndUndo.md
enum ContextsExample {
    typealias Person = GettingStartedExample.Person

    @MainActor static func run() throws -> [String] {
        let container = try Container(name: "Undo", entities: [Person.self, GettingStartedExample.DVD.self], storage: .inMemory)
        let context = container.mainContext
        let ann = Person(context: context)
        ann.username = "ann"
        try context.save()
        var seen: [String] = []

        ann.name = "Ann"
        ann.username = "annie"
        context.undo()                          // both changes: one event, one undo step
        seen.append(ann.username)

        context.undoGroup(named: "Rename") { ann.name = "A." }
        context.rollback()                      // drops every unsaved change
        seen.append(ann.name ?? "no name")

        let editor = Context(parent: context)   // a scratch pad: saves into its parent
        let draft = try editor.existingObject(Person.self, with: ann.objectID)
        draft?.name = "Ann Lee"
        try editor.save()                       // into `context`, not the store
        try context.save()                      // now the store
        seen.append(ann.name ?? "no name")
        return seen
    }
}

/// FetchingAndLiveResults.md
enum FetchingExample {
    typealias Person = GettingStartedExample.Person
    typealias DVD = GettingStartedExample.DVD

    @MainActor static func run() throws -> (adults: [String], byFormat: Int, sections: [String], changes: Int) {
        let container = try Container(name: "Fetch", entities: [Person.self, DVD.self], storage: .inMemory)
        let context = container.mainContext
        for name in ["bo", "ann", "cy"] { Person(context: context).username = name }
        try context.save()

        var query = FetchQuery(Person.self, predicate: #Predicate { $0.username != "cy" },
                               sortBy: [SortDescriptor(\Person.username)])
        query.fetchLimit = 10
        let adults = try context.fetch(query).map(\.username)

        let byFormat = try context.count(for: FetchQuery(Person.self, format: "username IN %@", ["ann", "bo"]))

        let results = try LiveResults(request: FetchQuery(Person.self, sortBy: [SortDescriptor(\Person.username)]),
                                      context: context) { String($0.username.prefix(1)) }
        var changes = 0
        results.onChange = { _ in changes += 1 }
        Person(context: context).username = "al"
        try context.save()                      // the results follow, with a diff
        return (adults, byFormat, results.sections.map(\.name), changes)
    }
}

/// Concurrency.md
enum ConcurrencyExample {
    typealias Person = GettingStartedExample.Person

    @MainActor static func run() async throws -> String {
        let container = try Container(name: "Work", entities: [Person.self, GettingStartedExample.DVD.self], storage: .inMemory)
        let background = container.newBackgroundContext()
        let id = try await background.perform { context in
            let bo = Person(context: context)
            bo.username = "bo"
            try context.save()
            return bo.objectID                  // an ObjectID crosses isolations; objects do not
        }
        let main = container.mainContext
        return try main.existingObject(Person.self, with: id)?.username ?? "missing"
    }
}

/// SavesReachTheUI.md
enum SavesReachTheUIExample {
    typealias Person = GettingStartedExample.Person
    typealias DVD = GettingStartedExample.DVD

    @MainActor static func run() async throws -> (String, Int) {
        let container = try Container(name: "Live", entities: [Person.self, DVD.self], storage: .inMemory)
        let main = container.mainContext
        let ann = Person(context: main)
        ann.username = "ann"
        try main.save()
        let list = try LiveResults(request: FetchQuery(Person.self), context: main)

        let id = ann.objectID
        try await container.newBackgroundContext().perform { context in
            try context.existingObject(Person.self, with: id)?.name = "Ann"
            Person(context: context).username = "bo"
            try context.save()
        }
        // No fetch, no call: the main actor runs the merge as soon as it is free.
        while list.objects.count < 2 { await Task.yield() }
        return (ann.name ?? "", list.objects.count)
    }
}

/// DataService.md
enum DataServiceExample {
    typealias Person = GettingStartedExample.Person

    @MainActor static func run() async throws -> Int {
        let container = try Container(name: "Service", entities: [Person.self, GettingStartedExample.DVD.self], storage: .inMemory)
        let data = DataService(container: container)
        try await data.write { context in       // a scratch child of the main context, saved
            Person(context: context).username = "ann"
        }
        let count = try data.read { context in try context.count(Person.self) }
        try await data.close()
        return count
    }
}

/// Migration.md
enum MigrationExample {
    enum Version1 {
        final class Note: ManagedObject {
            @Attribute var text: String = ""
        }
    }

    enum Version2 {
        final class Note: ManagedObject {
            @Attribute(renamingIdentifier: "text") var body: String = ""
            @Attribute var pinned: Bool = false
        }
    }

    static func run() throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("cairn-docs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: url) }
        do {
            let container = try Container(name: "Notes", entities: [Version1.Note.self], storage: .onDisk(url))
            let context = Context(coordinator: container.coordinator, model: container.model)
            Version1.Note(context: context).text = "milk"
            try context.save()
            try container.close()
        }
        let container = try Container(name: "Notes", entities: [Version2.Note.self], storage: .onDisk(url),
                                      modelVersion: 2, migration: .lightweight)
        let context = Context(coordinator: container.coordinator, model: container.model)
        let notes = try context.fetch(FetchQuery(Version2.Note.self))
        try container.close()
        return notes.map(\.body).joined()
    }
}

/// ObjectQueue.md
enum ObjectQueueExample {
    struct Upload: Codable, Sendable, Equatable {
        var path: String
    }

    static func run() throws -> [String] {
        let container = try Container(name: "Jobs", entities: [], storage: .inMemory)
        let uploads = try container.queue(named: "uploads", of: Upload.self)
        try uploads.push(Upload(path: "a.jpg"))
        try uploads.push(Upload(path: "b.jpg"))
        var done: [String] = []
        while let next = try uploads.popFirst() {   // oldest first; durable across launches
            done.append(next.path)
        }
        return done
    }
}

@Suite struct DocumentationExampleTests {
    @MainActor @Test func gettingStarted() throws {
        #expect(try GettingStartedExample.run() == ["Alien"])
    }

    @MainActor @Test func modeling() throws {
        let result = try ModelingExample.run()
        #expect(result.key == "ann@example.com" && result.devices == 1 && result.afterDelete == 0)
    }

    @MainActor @Test func contextsAndUndo() throws {
        #expect(try ContextsExample.run() == ["ann", "no name", "Ann Lee"])
    }

    @MainActor @Test func fetchingAndLiveResults() throws {
        let result = try FetchingExample.run()
        #expect(result.adults == ["ann", "bo"])
        #expect(result.byFormat == 2)
        #expect(result.sections == ["a", "b", "c"])
        #expect(result.changes == 1)
    }

    @MainActor @Test func concurrency() async throws {
        #expect(try await ConcurrencyExample.run() == "bo")
    }

    @MainActor @Test func savesReachTheUI() async throws {
        let (name, count) = try await SavesReachTheUIExample.run()
        #expect(name == "Ann" && count == 2)
    }

    @MainActor @Test func dataService() async throws {
        #expect(try await DataServiceExample.run() == 1)
    }

    @Test func migration() throws {
        #expect(try MigrationExample.run() == "milk")
    }

    @Test func objectQueue() throws {
        #expect(try ObjectQueueExample.run() == ["a.jpg", "b.jpg"])
    }
}
