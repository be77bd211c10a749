import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A note with a transient selection flag and a transient draft, as a Core Data model
/// would declare transient attributes.
final class Note: ManagedObject {
    @Attribute var title: String = ""
    @Transient var isSelected = false
    @Transient var draft: [String] = []
}

/// Transient properties: change-tracked, undoable, cleared by a refresh that drops
/// changes, never stored (Core Data's transient attributes).
@Suite struct TransientTests {
    func stack() throws -> Stack {
        try Stack(model: Model(Note.self))
    }

    func savedNote(_ context: Context) throws -> Note {
        let note = Note(context: context)
        note.title = "groceries"
        try context.save()
        return note
    }

    @Test func aTransientIsNotPartOfTheEntity() throws {
        let model = try Model(Note.self)
        let entity = try #require(model.schema.entities.first { $0.name == "Note" })
        #expect(entity.attributes.map(\.name) == ["title"])
    }

    @Test func aSetIsTrackedAndSavingStoresNothing() throws {
        let stack = try stack()
        let context = stack.context()
        let note = try savedNote(context)
        #expect(!note.hasChanges && !context.hasChanges)
        note.isSelected = true
        note.draft.append("milk")
        #expect(note.isSelected && note.draft == ["milk"])
        #expect(note.hasChanges && context.hasChanges, "a transient change is a change")
        try context.save()
        #expect(!note.hasChanges && !context.hasChanges, "the save counts it as saved")
        #expect(note.isSelected, "and keeps the value")

        // Another context reads the record: nothing transient was stored.
        let other = stack.context()
        let read = try #require(try other.existingObject(Note.self, with: note.objectID))
        #expect(read.title == "groceries" && !read.isSelected && read.draft.isEmpty)
    }

    @Test func undoAndRedoPutTransientValuesBack() throws {
        let context = try stack().context()
        let note = try savedNote(context)
        note.isSelected = true
        note.title = "shopping"
        context.undo()
        #expect(!note.isSelected && note.title == "groceries", "one event, undone whole")
        context.redo()
        #expect(note.isSelected && note.title == "shopping")
        context.undoManager.endEvent()
        note.isSelected = false
        context.undo()
        #expect(note.isSelected)
    }

    @Test func refreshWithoutMergingClearsThemAndMergingKeepsThem() throws {
        let context = try stack().context()
        let note = try savedNote(context)
        note.isSelected = true
        context.refresh(note, mergeChanges: true)
        #expect(note.isSelected && note.hasChanges, "a merging refresh keeps transient changes")
        context.refresh(note, mergeChanges: false)
        #expect(!note.isSelected && !note.hasChanges && !context.hasChanges)
    }

    @Test func rollbackClearsThem() throws {
        let context = try stack().context()
        let note = try savedNote(context)
        note.draft = ["eggs"]
        context.rollback()
        #expect(note.draft.isEmpty && !context.hasChanges)
    }

    @Test func anotherContextsSaveKeepsThem() throws {
        let stack = try stack()
        let context = stack.context()
        let note = try savedNote(context)
        note.isSelected = true
        try context.save()
        let other = stack.context()
        try #require(try other.existingObject(Note.self, with: note.objectID)).title = "errands"
        try other.save()
        _ = try context.fetch(FetchQuery(Note.self))  // merges the other save
        #expect(note.title == "errands" && note.isSelected)
    }

    @Test func aNewObjectTakesItsValueBeforeAndAfterInsert() throws {
        let context = try stack().context()
        let note = Note()
        note.isSelected = true
        #expect(note.isSelected)
        context.insert(note)
        #expect(note.isSelected)
        note.draft = ["x"]
        context.undo()
        #expect(note.draft.isEmpty && note.isSelected)
    }

    @Test func aDeletedOrInvalidatedObjectRefusesTheWrite() throws {
        let context = try stack().context()
        let note = try savedNote(context)
        context.delete(note)
        note.isSelected = true
        #expect(!note.isSelected)
        #expect(throws: CairnError.self) { try context.save() }

        let kept = try savedNote(context)
        context.reset()
        kept.isSelected = true
        #expect(kept.isInvalidated && !kept.isSelected)
    }
}
