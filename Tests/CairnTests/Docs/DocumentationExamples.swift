import Foundation
import Testing
import Cairn

// The code of the DocC articles (Sources/Cairn/Cairn.docc), compiled and run here.
// `DocumentationTests` checks that every Swift block of every article appears in this
// file as written, so an article cannot show code that does not compile.

/// README.md
enum ReadmeExample {
    final class Person: ManagedObject {
        @Attribute var username: String = ""
        @Attribute var name: String? = nil
        @ToMany(inverse: \DVD.owner, deleteRule: .cascade) var dvds: [DVD]
        override class var uniqueKeyPaths: [[AnyKeyPath]] { [[\Person.username]] }
    }

    final class DVD: ManagedObject {
        @Attribute var title: String = ""
        @ToOne var owner: Person?                        // the inverse is declared once, on dvds
    }

    @MainActor static func run() async throws {
        // The whole stack in one line (DVD joins the model through Person.dvds).
        let container = try Container(name: "Demo", entities: [Person.self],
                                      storage: .onDisk(URL(fileURLWithPath: "/tmp/demo.cairn")))
        let data = DataService(container: container)          // on the main actor

        try await data.write { context in                   // a scratch child of the main context
            let ann = Person.create(in: context)
            ann.username = "ann"
            let dvd = DVD.create(in: context)
            dvd.title = "Alien"
            dvd.owner = ann                                 // ann.dvds follows
        }

        let main = data.mainContext                         // views read it; saves anywhere reach it
        let ann = try Person.first(where: #Predicate { $0.username == "ann" }, in: main)
        main.delete(ann!)                                   // cascades to her DVDs
        main.undo()                                         // and back

        let stamps = try container.queue(named: "stamps", of: Date.self)
        try stamps.push(Date())                             // a durable FIFO, in the same store
        try await data.close()
    }
}

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

/// ContextsAndUndo.md: undo across launches.
enum KeptUndoExample {
    typealias Person = GettingStartedExample.Person

    /// The name after an undo in a second launch, and the refusal of a step another
    /// writer overtook.
    static func run(in url: URL) throws -> (name: String?, refused: Bool) {
        var container = try Container(name: "Undo", entities: [Person.self], storage: .onDisk(url))
        var editor = Context(coordinator: container.coordinator, model: container.model)
        try editor.keepUndo(named: "editor")
        let ann = Person(context: editor)
        ann.username = "ann"
        try editor.save()
        editor.undoGroup(named: "Rename") { ann.name = "Ann" }
        editor.undoGroup(named: "Rename again") { ann.name = "Ann Lee" }
        try editor.save()
        try container.close()

        container = try Container(name: "Undo", entities: [Person.self], storage: .onDisk(url))
        editor = Context(coordinator: container.coordinator, model: container.model)
        try editor.keepUndo(named: "editor")    // at launch: takes back what was kept
        editor.undo()                           // the last step before the relaunch
        if let refusal = editor.undoManager.refusal { print(refusal.message) }
        try editor.save()
        let name = try editor.fetch(Person.self).first?.name
        // Another writer renames ann: the step before is refused.
        let other = Context(coordinator: container.coordinator, model: container.model)
        try other.fetch(Person.self).first?.name = "Annie"
        try other.save()
        editor.undo()
        let refused = editor.undoManager.refusal?.code == .conflict
        try container.close()
        return (name, refused)
    }
}

/// FetchingAndLiveResults.md
enum FetchingExample {
    typealias Person = GettingStartedExample.Person
    typealias DVD = GettingStartedExample.DVD

    @MainActor static func run() throws -> (adults: [String], byFormat: Int, sections: [String], changes: Int, shelves: [String]) {
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

        let alien = DVD(context: context)
        alien.title = "Alien"
        alien.owner = try context.fetch(FetchQuery(Person.self, format: "username == %@", "bo")).first
        var withDVDs = FetchQuery(Person.self, sortBy: [SortDescriptor(\Person.username)])
        withDVDs.relationshipKeyPathsForPrefetching = [\.dvds]
        withDVDs.relationshipNamesForPrefetching = ["dvds.owner"]  // by name, hop by hop
        let shelves = try context.fetch(withDVDs).map { "\($0.username): \($0.dvds.count)" }
        return (adults, byFormat, results.sections.map(\.name), changes, shelves)
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

/// UndoInAsyncCode.md
enum UndoInAsyncCodeExample {
    typealias Person = GettingStartedExample.Person

    /// Stands for a network call: it suspends, and the main actor runs other jobs.
    static func lookUpNickname() async -> String {
        try? await Task.sleep(for: .milliseconds(1))
        return "annie"
    }

    @MainActor static func run() async throws -> [String] {
        let container = try Container(name: "AsyncUndo", entities: [Person.self, GettingStartedExample.DVD.self], storage: .inMemory)
        let context = container.mainContext
        let ann = Person(context: context)
        ann.username = "ann"
        try context.save()
        var seen: [String] = []

        ann.name = "Ann"                        // one event…
        let nickname = await lookUpNickname()   // …ends here: the main actor ran other jobs
        ann.username = nickname                 // a second event
        context.undo()                          // undoes the username only
        seen.append("\(ann.name ?? "-") \(ann.username)")
        context.undo()
        seen.append("\(ann.name ?? "-") \(ann.username)")

        try await context.undoGroup(named: "Import profile") {
            ann.name = "Ann"
            ann.username = await lookUpNickname()
        }
        context.undo()                          // undoes both
        seen.append(context.undoManager.redoActionName ?? "-")
        seen.append("\(ann.name ?? "-") \(ann.username)")
        return seen
    }
}

/// ApplyingResultsChanges.md
enum ApplyingResultsChangesExample {
    typealias Person = GettingStartedExample.Person

    /// A list's rows, kept in step with live results by their changes alone.
    final class PeopleList {
        private(set) var sections: [[String]] = []
        let results: LiveResults<Person>

        init(context: Context) throws {
            results = try LiveResults(request: FetchQuery(Person.self, sortBy: [SortDescriptor(\Person.username)]),
                                      context: context) { String($0.username.prefix(1)) }
            sections = results.sections.map { $0.objects.map(Self.row) }
            results.onChange = { [unowned self] change in self.apply(change) }
        }

        static func row(_ person: Person) -> String { "\(person.username) (\(person.name ?? "?"))" }

        func apply(_ change: ResultsChange) {
            // Remove at the old positions, the last first: rows, then the sections they emptied.
            for index in (change.deleted + change.moved.map(\.from)).sorted(by: >) {
                sections[index.section].remove(at: index.item)
            }
            for section in change.deletedSections.sorted(by: >) { sections.remove(at: section) }
            // Insert at the new positions, the first first: sections, then rows.
            for section in change.insertedSections.sorted() { sections.insert([], at: section) }
            for index in (change.inserted + change.moved.map(\.to)).sorted() {
                sections[index.section].insert(row(at: index), at: index.item)
            }
            // Rows whose object changed in place, at their new positions.
            for index in change.updated { sections[index.section][index.item] = row(at: index) }
        }

        private func row(at index: ResultIndex) -> String {
            Self.row(results.sections[index.section].objects[index.item])
        }
    }

    @MainActor static func run() throws -> [[String]] {
        let container = try Container(name: "Rows", entities: [Person.self, GettingStartedExample.DVD.self], storage: .inMemory)
        let context = container.mainContext
        for name in ["ann", "bo", "cy"] { Person(context: context).username = name }
        try context.save()
        let list = try PeopleList(context: context)
        let bo = try context.fetch(Person.self, where: #Predicate { $0.username == "bo" })[0]
        bo.username = "al"                      // a move within section "a", into a new one
        Person(context: context).username = "dee"
        try context.save()
        return list.sections
    }
}

/// ResolvingMergeConflicts.md
enum ResolvingMergeConflictsExample {
    typealias Person = GettingStartedExample.Person

    @MainActor static func run() async throws -> [String] {
        let container = try Container(name: "Conflicts", entities: [Person.self, GettingStartedExample.DVD.self], storage: .inMemory)
        let context = container.mainContext
        context.automaticallyMergesChangesFromParent = false    // keep what it read
        let ann = Person(context: context)
        ann.username = "ann"
        try context.save()
        let id = ann.objectID
        try await container.newBackgroundContext().perform { other in
            try other.existingObject(Person.self, with: id)?.name = "Ann (work)"
            try other.save()
        }
        ann.name = "Ann (home)"                 // the same property, changed here too

        do {
            try context.save()                  // the default policy, .error, refuses it
        } catch let error as CairnError where error.code == .conflict {
            for conflict in error.conflicts {
                guard let person = try context.existingObject(Person.self, with: conflict.objectID) else { continue }
                let mine = person.name ?? ""
                context.refresh(person, mergeChanges: false)     // take in what the store holds
                if conflict.changedElsewhere.contains("name"), case .string(let theirs)? = conflict.storedValues?["name"] {
                    person.name = "\(theirs) + \(mine)"        // both edited the name: keep both
                }
            }
            try context.save()                  // read at the stored version now: no conflict
        }
        let merged = ann.name ?? ""

        try await container.newBackgroundContext().perform { other in
            try other.existingObject(Person.self, with: id)?.name = "Ann (work, later)"
            try other.save()
        }
        ann.name = "Ann"
        context.mergePolicy = .objectTrumps     // this context's changes win, property by property
        try context.save()
        return [merged, ann.name ?? ""]
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

    @MainActor static func run() throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("cairn-docs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: url) }
        do {
            let container = try Container(name: "Notes", entities: [Version1.Note.self], storage: .onDisk(url))
            let context = container.mainContext
            Version1.Note(context: context).text = "milk"
            try context.save()
            try container.close()
        }
        let forecast = try Container.migrationForecast(at: url, entities: [Version2.Note.self], modelVersion: 2)
        precondition(forecast.isNeeded && forecast.losses.isEmpty)   // `text` is renamed, not dropped
        let container = try Container(name: "Notes", entities: [Version2.Note.self], storage: .onDisk(url),
                                      modelVersion: 2, migration: .lightweight)
        let context = container.mainContext
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

/// ReadingFromOtherProcesses.md
enum ReadingFromOtherProcessesExample {
    typealias Person = GettingStartedExample.Person
    typealias DVD = GettingStartedExample.DVD

    @MainActor static func run(in url: URL) async throws -> (first: Int, advanced: Int, followed: Int) {
        // In the app, the container that writes:
        let app = try Container(name: "Team", entities: [Person.self, DVD.self], storage: .onDisk(url))
        // In its widget or extension, a reader of the same directory:
        let widget = try Container(name: "Team", entities: [Person.self, DVD.self], storage: .onDisk(url), readOnly: true)
        let people = try widget.mainContext.fetch(FetchQuery(Person.self))

        for name in ["ann", "bo"] {
            Person(context: app.mainContext).username = name
            try app.mainContext.save()
        }
        let changes = try widget.advance()   // what the app saved since; the views update

        Person(context: app.mainContext).username = "cy"
        try app.mainContext.save()
        var shown = people.count + changes.reduce(0) { $0 + $1.inserted.count }
        for try await change in widget.changes() {
            shown += change.inserted.count    // each save of the app's, as it is taken in
            if shown >= 3 { break }
        }
        return (people.count, try widget.mainContext.fetch(FetchQuery(Person.self)).count - people.count, shown)
    }
}

/// QueryGenerations.md
enum QueryGenerationsExample {
    typealias Person = GettingStartedExample.Person
    typealias DVD = GettingStartedExample.DVD

    /// The counts a pinned main context sees before and after other saves and its move,
    /// and the generations listed while pinned.
    @MainActor static func run() async throws -> (before: Int, pinned: Int, moved: Int, listed: Int) {
        let container = try Container(name: "Library", entities: [Person.self, DVD.self], storage: .inMemory)
        Person(context: container.mainContext).username = "ann"
        try container.mainContext.save()

        let report = container.newBackgroundContext()
        try await report.perform { context in
            try context.setQueryGenerationFrom(.current)   // the newest committed state, held
            // Every fetch, count, fault and relationship read below sees that one state.
        }

        for pinned in container.pinnedGenerations {
            print("\(pinned.pinnedBy) holds generation \(pinned.sequence): \(pinned.retainedBytes) bytes")
        }
        let listed = container.pinnedGenerations.count

        let context = container.mainContext
        try context.setQueryGenerationFrom(.current)
        let before = try context.fetch(FetchQuery(Person.self)).count
        try await report.perform { other in               // another context saves
            Person(context: other).username = "bo"
            try other.save()
        }
        let still = try context.fetch(FetchQuery(Person.self)).count    // still `before`
        context.processExternalChanges()                  // now at the newest state
        try context.setQueryGenerationFrom(nil)           // unpinned: reads the newest, as by default
        return (before, still, try context.fetch(FetchQuery(Person.self)).count, listed)
    }
}

/// HistoryAndSync.md
enum HistoryAndSyncExample {
    final class Note: ManagedObject {
        @Attribute var text: String = ""
        @Attribute var serverID: String? = nil
        override class var preservedInHistoryOnDeletion: Set<String> { ["serverID"] }
    }

    /// What a consumer saw: the rows it mirrored, the transactions the feed uploaded, and
    /// the tombstone of the deleted note.
    @MainActor static func run(in url: URL) async throws -> (mirrored: [String], uploaded: Int, tombstone: [String: Value]?,
                                                             then: [String]) {
        let container = try Container(name: "Notes", entities: [Note.self], storage: .onDisk(url),
                                      history: .transactions(10_000))
        container.mainContext.transactionAuthor = "app"     // who made this context's saves

        var mirror: [ObjectID: String] = [:]
        func remove(_ id: ObjectID) { mirror[id] = nil }
        func upsert(_ id: ObjectID, _ values: [String: Value]) {
            if case .string(let text)? = values["text"] { mirror[id] = text }
        }
        var lastToken = container.historyToken
        let first = Note(context: container.mainContext), second = Note(context: container.mainContext)
        first.text = "milk"
        second.text = "eggs"
        second.serverID = "s2"
        try container.mainContext.save()
        let beforeEdits = container.historyToken
        first.text = "oat milk"
        container.mainContext.delete(second)
        try container.mainContext.save()
        try container.compact()   // the history is kept across it

        let changes = try container.changes(since: lastToken)
        for transaction in changes.transactions {
            for id in transaction.deleted { remove(id) }                     // gone since
            for id in transaction.inserted + Array(transaction.updated.keys) {
                if let values = changes.current[id] { upsert(id, values) }   // as it is now
            }
        }
        lastToken = changes.token                                            // resume from here
        let tombstone = changes.transactions.last?.tombstones[second.objectID]

        let past = try container.context(asOf: beforeEdits)   // reads that state, cannot save
        let then = try past.fetch(FetchQuery(Note.self)).map(\.text).sorted()

        let uploaded = Locked(0)
        func upload(_ transaction: HistoryTransaction) async throws { uploaded.withLock { $0 += 1 } }
        let feed = Task { @MainActor [lastToken] in
            var lastToken = lastToken
            for try await transaction in container.transactions(after: lastToken) {
                if transaction.author == "sync" { continue }          // our own sync's writes
                try await upload(transaction)
                lastToken = transaction.token
            }
        }
        let sync = container.newBackgroundContext()
        try await sync.perform { context in
            context.transactionAuthor = "sync"
            Note(context: context).text = "from the server"
            try context.save()
        }
        Note(context: container.mainContext).text = "bread"
        try container.mainContext.save()
        while uploaded.value < 1 { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(100))
        feed.cancel()
        _ = try await feed.value
        return (mirror.values.sorted(), uploaded.value, tombstone, then)
    }
}

@Suite struct DocumentationExampleTests {
    /// The README's example, run where it says: in /tmp/demo.cairn (removed first and after).
    @MainActor @Test func readme() async throws {
        try? FileManager.default.removeItem(atPath: "/tmp/demo.cairn")
        defer { try? FileManager.default.removeItem(atPath: "/tmp/demo.cairn") }
        try await ReadmeExample.run()
        // Reopened: the delete was undone before the close saved; the stamp is queued.
        let container = try Container(name: "Demo", entities: [ReadmeExample.Person.self],
                                      storage: .onDisk(URL(fileURLWithPath: "/tmp/demo.cairn")))
        let ann = try ReadmeExample.Person.first(where: #Predicate { $0.username == "ann" }, in: container.mainContext)
        #expect(ann?.dvds.map(\.title) == ["Alien"])
        #expect(try container.queue(named: "stamps", of: Date.self).count == 1)
        try container.close()
    }

    @MainActor @Test func gettingStarted() throws {
        #expect(try GettingStartedExample.run() == ["Alien"])
    }

    @MainActor @Test func modeling() throws {
        let result = try ModelingExample.run()
        #expect(result.key == "ann@example.com" && result.devices == 1 && result.afterDelete == 0)
    }

    @MainActor @Test func contextsAndUndo() throws {
        #expect(try ContextsExample.run() == ["ann", "no name", "Ann Lee"])
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let kept = try KeptUndoExample.run(in: URL(fileURLWithPath: directory))
        #expect(kept.name == "Ann" && kept.refused)
    }

    @MainActor @Test func fetchingAndLiveResults() throws {
        let result = try FetchingExample.run()
        #expect(result.adults == ["ann", "bo"])
        #expect(result.byFormat == 2)
        #expect(result.sections == ["a", "b", "c"])
        #expect(result.changes == 1)
        #expect(result.shelves == ["al: 0", "ann: 0", "bo: 1", "cy: 0"])
    }

    @MainActor @Test func concurrency() async throws {
        #expect(try await ConcurrencyExample.run() == "bo")
    }

    @MainActor @Test func savesReachTheUI() async throws {
        let (name, count) = try await SavesReachTheUIExample.run()
        #expect(name == "Ann" && count == 2)
    }

    @MainActor @Test func undoInAsyncCode() async throws {
        #expect(try await UndoInAsyncCodeExample.run() == ["Ann ann", "- ann", "Import profile", "- ann"])
    }

    @MainActor @Test func applyingResultsChanges() throws {
        #expect(try ApplyingResultsChangesExample.run() == [["al (?)", "ann (?)"], ["cy (?)"], ["dee (?)"]])
    }

    @MainActor @Test func resolvingMergeConflicts() async throws {
        // Only the conflict's handler writes both names.
        #expect(try await ResolvingMergeConflictsExample.run() == ["Ann (work) + Ann (home)", "Ann"])
    }

    @MainActor @Test func dataService() async throws {
        #expect(try await DataServiceExample.run() == 1)
    }

    @MainActor @Test func migration() throws {
        #expect(try MigrationExample.run() == "milk")
    }

    @MainActor @Test func readingFromOtherProcesses() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let seen = try await ReadingFromOtherProcessesExample.run(in: URL(fileURLWithPath: directory))
        #expect(seen.first == 0 && seen.advanced == 3 && seen.followed == 3)
    }

    @MainActor @Test func queryGenerations() async throws {
        let seen = try await QueryGenerationsExample.run()
        #expect(seen.before == 1 && seen.pinned == 1 && seen.moved == 2 && seen.listed == 1)
    }

    @MainActor @Test func historyAndSync() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let seen = try await HistoryAndSyncExample.run(in: URL(fileURLWithPath: directory))
        #expect(seen.mirrored == ["oat milk"])
        #expect(seen.uploaded == 1, "the app's save, not the sync's")
        #expect(seen.tombstone == ["serverID": .string("s2")])
        #expect(seen.then == ["eggs", "milk"], "the state before the edits, across the compaction")
    }

    @Test func objectQueue() throws {
        #expect(try ObjectQueueExample.run() == ["a.jpg", "b.jpg"])
    }
}
