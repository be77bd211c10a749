import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A class with a plain stored property, which Cairn would not store.
final class Draft: ManagedObject {
    @Attribute var title: String = ""
    var wordCount = 0
}

/// The same, the plain property in a superclass of its own, and a lazy one.
class Memo: ManagedObject {
    @Attribute var text: String = ""
    var cachedLength: Int? = nil
}

final class StickyMemo: Memo {
    @Attribute var color: String = "yellow"
    lazy var rendered: String = text.uppercased()
}

/// Every way to keep a Swift property the store should not hold.
final class Sketch: ManagedObject {
    @Attribute var title: String = ""
    @Transient var isSelected = false
    @Ignored var thumbnail: [UInt8]? = nil
    let createdBy = "app"
    weak var delegate: AnyObject?
    lazy var formatter: NumberFormatter = NumberFormatter()

    override class var ignoredProperties: Set<String> { ["createdBy", "delegate", "formatter"] }
}

/// A graph reached from one class: shelves hold boxes, boxes hold items; an item also
/// points back at its shelf.
final class Rack: ManagedObject {
    @Attribute var label: String = ""
    @ToMany(inverse: \Crate.shelf, deleteRule: .cascade) var boxes: [Crate]
}

final class Crate: ManagedObject {
    @Attribute var code: Int = 0
    @ToOne var shelf: Rack?
    @ToMany(inverse: \Gadget.box) var items: [Gadget]
}

final class Gadget: ManagedObject {
    @Attribute var name: String = ""
    @ToOne var box: Crate?
    @ToOne var homeShelf: Rack?
}

/// What a model refuses and what it takes in without being told.
@Suite struct ModelTrapTests {
    /// A stored property declared with none of Cairn's wrappers is refused at model build
    /// time, naming it, its type and where it was declared, with what to do instead.
    @Test func aPlainStoredPropertyIsRefusedNamingIt() throws {
        #expect {
            try Model(Draft.self)
        } throws: { error in
            let message = (error as? CairnError)?.message ?? ""
            return message.contains("Draft.wordCount (Int)") && message.contains("@Attribute") && message.contains("@Ignored")
        }
        #expect {
            try Container(entities: [StickyMemo.self], storage: .inMemory)
        } throws: { error in
            let message = (error as? CairnError)?.message ?? ""
            return message.contains("StickyMemo.cachedLength (Optional<Int>, declared in Memo)")
                && message.contains("StickyMemo.rendered") && message.contains("are stored properties")
        }
    }

    /// `@Transient`, `@Ignored` and `ignoredProperties` keep a Swift property out of the
    /// store, on purpose: the model takes the class, and only `title` is stored.
    @Test func ignoredPropertiesAreKeptOutOfTheStore() throws {
        let model = try Model(Sketch.self)
        let sketch = try #require(model.schema.entities.first)
        #expect(sketch.attributes.map(\.name) == ["title"])
        let container = try Container(entities: [Sketch.self], storage: .inMemory)
        let context = Context(coordinator: container.coordinator, model: container.model)
        let made = Sketch.create(in: context)
        made.title = "a"
        made.thumbnail = [1, 2]
        #expect(made.thumbnail == [1, 2])
        try context.save()
        #expect(try context.count(for: FetchQuery(Sketch.self)) == 1)
    }

    /// Listing one class of a graph brings in every class its relationships reach, in a
    /// schema the same as listing them all (so a store made either way opens the other way);
    /// objects of the reached classes are of their own classes.
    @Test func classesReachedThroughRelationshipsJoinTheModel() throws {
        let reached = try Model(Rack.self)
        let listed = try Model(Rack.self, Crate.self, Gadget.self)
        #expect(reached.schema.entities.map(\.name) == ["Rack", "Crate", "Gadget"])
        #expect(reached.schema == listed.schema)
        #expect(reached.schema.versionHash == listed.schema.versionHash)
        #expect(reached.objectClass(for: "Gadget") == Gadget.self)
        #expect(try #require(reached.schema.entity(named: "Gadget")).relationships.first { $0.name == "box" }?.inverse == "items")

        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var container = try Container(entities: [Rack.self], storage: .onDisk(URL(fileURLWithPath: directory)))
        var context = Context(coordinator: container.coordinator, model: container.model)
        let shelf = Rack.create(in: context)
        shelf.label = "top"
        let box = Crate.create(in: context)
        box.shelf = shelf
        let item = Gadget.create(in: context)
        item.name = "pen"
        item.box = box
        item.homeShelf = shelf
        try context.save()
        try container.close()
        // Opened with the classes listed in another order: the same store, no migration.
        container = try Container(entities: [Gadget.self, Crate.self, Rack.self], storage: .onDisk(URL(fileURLWithPath: directory)),
                                  migration: .refuse)
        defer { try? container.close() }
        context = Context(coordinator: container.coordinator, model: container.model)
        let items = try context.fetch(FetchQuery(Gadget.self))
        #expect(items.count == 1)
        #expect(items.first?.box?.shelf?.label == "top")
        #expect(try context.fetch(FetchQuery(Rack.self)).first?.boxes.count == 1)
    }
}
