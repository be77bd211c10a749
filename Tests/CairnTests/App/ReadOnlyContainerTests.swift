import Foundation
import Observation
import Testing
@testable import Cairn

/// A read-only container beside the container that writes the store (as a widget beside
/// its app): it reads one committed state until it advances, and an advance reaches its
/// views as another context's save does.
@Suite struct ReadOnlyContainerTests {
    static func open(_ directory: String, readOnly: Bool) throws -> Container {
        try Container(name: "People", entities: [Person.self, DVD.self], storage: .onDisk(URL(fileURLWithPath: directory)),
                      compaction: .manual, readOnly: readOnly)
    }

    /// The widget's view model (an object, live results) does not move while the app
    /// saves; `advance()` brings the app's saves: the change sets name what changed, the
    /// object's `age` observers fire and its `name` observers do not, the live results
    /// hold the new person. Across the app's compaction the same.
    @MainActor @Test func anAdvanceReachesTheViewsOfAReadOnlyContainer() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let app = try Self.open(directory, readOnly: false)
        let pat = Person(context: app.mainContext)
        pat.username = "pat"
        try app.mainContext.save()

        let widget = try Self.open(directory, readOnly: true)
        let main = widget.mainContext
        let shown = try #require(try main.fetch(FetchQuery(Person.self)).first)
        let results = try LiveResults(request: FetchQuery(Person.self), context: main)
        let ageChanged = AutomaticMergeTests.track { _ = shown.age }
        let nameChanged = AutomaticMergeTests.track { _ = shown.name }
        let listChanged = AutomaticMergeTests.track { _ = results.objects }

        pat.age = 41
        Person(context: app.mainContext).username = "bo"
        try app.mainContext.save()
        #expect(try main.fetch(FetchQuery(Person.self)).count == 1, "the widget reads the state of its open until it advances")
        #expect(shown.age == 0)

        let changes = try widget.advance()
        #expect(changes.count == 1)
        #expect(changes.first?.updated == [shown.objectID: ["age"]] && changes.first?.inserted.count == 1)
        #expect(await AutomaticMergeTests.yields(ageChanged, within: 10))
        #expect(await AutomaticMergeTests.yields(listChanged, within: 10))
        #expect(shown.age == 41)
        #expect(results.objects.map(\.username).sorted() == ["bo", "pat"])
        #expect(!(await AutomaticMergeTests.yields(nameChanged, within: 0.2)), "name did not change")
        #expect(try widget.advance().isEmpty)

        let renamed = AutomaticMergeTests.track { _ = shown.name }
        pat.name = "Pat"
        try app.mainContext.save()
        try app.compact()
        let across = try widget.advance()
        #expect(across.count == 1 && across.first?.updated[shown.objectID] == ["name"])
        #expect(await AutomaticMergeTests.yields(renamed, within: 10))
        #expect(shown.name == "Pat")
        #expect(throws: CairnError.self) { try app.advance() }
    }

    /// `changes(every:)` follows the app's saves without a call, until cancelled.
    @MainActor @Test func theChangeStreamFollowsTheWriter() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let app = try Self.open(directory, readOnly: false)
        try app.mainContext.save()
        let widget = try Self.open(directory, readOnly: true)
        var seen: [Int] = []
        let follow = Task {
            var counts: [Int] = []
            for try await changes in widget.changes(every: .milliseconds(5)) {
                counts.append(changes.inserted.count)
                if counts.reduce(0, +) >= 3 { break }
            }
            return counts
        }
        for name in ["a", "b", "c"] {
            Person(context: app.mainContext).username = name
            try app.mainContext.save()
            try await Task.sleep(for: .milliseconds(20))
        }
        seen = try await follow.value
        #expect(seen.reduce(0, +) == 3)
        #expect(try widget.mainContext.fetch(FetchQuery(Person.self)).map(\.username).sorted() == ["a", "b", "c"])
    }
}
