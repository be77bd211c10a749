import CairnStorage
import Observation

/// A context's saves, observable through Observation (`withObservationTracking`, or a
/// SwiftUI view reading it): ``lastSave`` changes once per save.
@Observable
public final class SaveActivity {
    /// What the context's last save changed: inserted, updated (with the keys changed)
    /// and deleted objects. Nil before the first save since this was first asked for.
    public internal(set) var lastSave: ChangeSet?
    /// How many saves the context made since this was first asked for.
    public internal(set) var saveCount = 0

    init() {}
}

@available(*, unavailable)
extension SaveActivity: Sendable {}

/// The did-save notification: after each save of a context, into the store or into its
/// parent, one ``ChangeSet`` of what it saved, as a callback (``onDidSave``), an async
/// sequence (``saveChanges()``) and an observable value (``saves``). (A save of nothing
/// sends none.) Nothing is built for a save nobody listens to.
extension Context {
    /// The context's saves, observable (see ``SaveActivity``).
    public var saves: SaveActivity {
        if let saveActivity { return saveActivity }
        let made = SaveActivity()
        saveActivity = made
        return made
    }

    /// The change sets of this context's saves from now on, in order. The sequence ends
    /// when the context is released.
    public func saveChanges() -> AsyncStream<ChangeSet> {
        let (stream, continuation) = AsyncStream.makeStream(of: ChangeSet.self)
        saveContinuations.append(continuation)
        return stream
    }

    /// Whether anyone listens for did-save notifications, or a child or sibling context
    /// merges this context's saves.
    var wantsDidSave: Bool {
        onDidSave != nil || saveActivity != nil || !saveContinuations.isEmpty
            || children.contains { $0.context?.automaticallyMergesChangesFromParent == true }
            || (parent?.children.contains { $0.context !== self && $0.context?.automaticallyMergesChangesFromParent == true } ?? false)
    }

    /// What saving `objects` (the changed ones, before the save marks them saved) changes.
    func didSaveChanges(of objects: [ManagedObject], sequence: UInt64) -> ChangeSet {
        var changes = ChangeSet()
        changes.sequence = sequence
        for object in objects {
            if object.isNewHere {
                changes.inserted.insert(object.objectID)
            } else if object.isDeletedHere {
                changes.deleted.insert(object.objectID)
            } else if object.exists {
                changes.updated[object.objectID] = object.changedKeys
            }
        }
        return changes
    }

    /// Sends the did-save notification of a save that changed `changes`.
    func announceDidSave(_ changes: ChangeSet) {
        guard !changes.isEmpty else { return }
        // Children that merge take in this save; siblings too (their parent changed).
        for child in children + (parent?.children ?? []) {
            guard let context = child.context, context !== self, context.automaticallyMergesChangesFromParent else { continue }
            context.inbox.post(changes)
        }
        onDidSave?(changes)
        if let saveActivity {
            saveActivity.lastSave = changes
            saveActivity.saveCount += 1
        }
        saveContinuations.removeAll { continuation in
            if case .terminated = continuation.yield(changes) { return true }
            return false
        }
    }
}
