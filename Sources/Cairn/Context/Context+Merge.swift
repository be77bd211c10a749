import CairnStorage
import Observation

/// Merging other contexts' saves: at a context's next use, or as soon as they happen on
/// the executor the context runs on (the main actor for a container's main context, a
/// ``BackgroundContext``'s own), telling observers of exactly the properties that changed.
extension Context {
    /// Has every save of another context reach this one as it happens, merged by a job on
    /// `executor` (the isolation this context is used in), when it merges automatically
    /// (``automaticallyMergesChangesFromParent``): its objects take the new values, its
    /// live results deliver their changes, and observers hear of the properties that
    /// changed, with no fetch or call. Children made after take their parent's executor.
    /// The container's main context and a ``BackgroundContext`` are set up so.
    func mergeAutomatically(on executor: any Actor) {
        mergeExecutor = executor
        let target = MergeTarget(context: self)
        inbox.setWake { [weak executor] in
            guard let executor else { return }
            Task { await Self.mergePosted(target, on: executor) }
        }
    }

    /// The job a post schedules, on the context's executor.
    private static func mergePosted(_ target: MergeTarget, on executor: isolated any Actor) {
        guard let context = target.context else { return }
        context.inbox.jobRan()
        context.mergeExternalChangesIfAutomatic()
    }

    /// Merges saves made by other contexts on the same coordinator (for a child, by its
    /// parent and siblings, see ``automaticallyMergesChangesFromParent``) now, whether or
    /// not the context merges automatically: objects without local changes are refreshed
    /// (they re-read on next access) or, if deleted there, forgotten; objects with local
    /// changes take in the attributes they did not change, and clashes are left for the
    /// merge policy at save.
    ///
    /// A context pinned to a query generation moves to the newest committed state first
    /// (see ``setQueryGenerationFrom(_:)``).
    public func processExternalChanges() {
        if pinnedGeneration != nil { return moveGenerationToNewest() }
        guard inbox.hasPending else { return }
        defer { processPendingChanges() }
        mergeExternal(inbox.drain())
    }

    /// Takes in `changeSets`, other saves' change sets, oldest first.
    func mergeExternal(_ changeSets: [ChangeSet]) {
        for changes in changeSets {
            var forgotten = Set<UInt64>()
            for id in changes.deleted where forgetDeleted(id.recordID) { forgotten.insert(id.recordID.rawValue) }
            dropReferences(to: forgotten)
            for id in changes.updated.keys { refreshUpdated(id.recordID) }
            // (A record inserted again under an ID this context found gone: see `refreshUpdated`.)
            for id in changes.inserted { refreshUpdated(id.recordID) }
            onExternalChanges?(changes)
        }
    }

    /// After record `id` was deleted in the store: its registered object drops the row a
    /// fetch read for it and, if it has no unsaved changes, leaves this context. Returns
    /// whether the record is gone here too (not kept for an unsaved change).
    @discardableResult
    func forgetDeleted(_ id: RecordID) -> Bool {
        guard let object = registered[id] else { return true }
        object.dropPrefetched()
        guard !object.hasUnsavedChanges else { return false }
        registered[id] = nil
        dirty[id] = nil
        object.exists = false
        object.inStore = false
        object.context = nil
        return true
    }

    /// Takes the records `raws`, deleted elsewhere and gone here, out of the relationships
    /// of the objects with unsaved changes, as the delete took them out of the stored
    /// records: the other objects re-read theirs, but a changed object keeps its values
    /// until its save, and its save failed on a list still naming a deleted record. They
    /// leave the values as read too: the store dropped them, not this context, and a merge
    /// policy that later meets them in the store again (a save that brought one back)
    /// must not take their absence here for an edit.
    func dropReferences(to raws: Set<UInt64>) {
        guard !raws.isEmpty else { return }
        for (_, object) in dirty where object.exists && !object.isFault && object.hasUnsavedChanges {
            let attributes = object.entity.attributes.count
            for slot in attributes..<max(attributes, min(object.values.count, attributes + object.entity.relationships.count)) {
                let value = object.values[slot]
                let targets = value.referencedIDs
                guard targets.contains(where: raws.contains) else { continue }
                let isToMany = object.entity.relationships[slot - attributes].isToMany
                let kept = targets.filter { !raws.contains($0) }
                changeGeneration &+= 1
                object.setValue(isToMany ? .references(kept) : .null, at: slot)
                if var base = object.base, slot < base.count, base[slot].referencedIDs.contains(where: raws.contains) {
                    let read = base[slot].referencedIDs.filter { !raws.contains($0) }
                    base[slot] = isToMany ? .references(read) : .null
                    object.base = base
                }
            }
        }
    }

    /// After another save changed the record of `object`, which has changes here: the
    /// attributes it did not change take the new values, and its changes stay, as Core
    /// Data's merge does. If nothing changed there clashes with a change here (the same
    /// attribute, or any relationship, changed on both sides), the object now stands on
    /// the new version, and its save is no conflict; otherwise it keeps its old version,
    /// and its save conflicts for the merge policy to resolve.
    private func mergeIntoChanged(_ object: ManagedObject) {
        guard object.exists, object.inStore, let base = object.base,
              let (stored, version) = try? sourceValues(for: object.recordID) else { return }
        let attributes = object.entity.attributes.count
        var values = object.values, newBase = base, clash = false, refreshed: [Int] = []
        for slot in values.indices where slot < base.count && slot < stored.count && !Value.same(stored[slot], base[slot]) {
            if slot >= attributes || !Value.same(values[slot], base[slot]) {
                clash = true
                continue
            }
            values[slot] = stored[slot]
            newBase[slot] = stored[slot]
            refreshed.append(slot)
        }
        guard !refreshed.isEmpty || !clash else { return }
        changeGeneration &+= 1  // its values change without a write
        if !refreshed.isEmpty { object.setValues(values, changed: refreshed) }
        if clash {
            object.base = newBase
        } else {
            object.base = stored
            object.baseVersion = version
        }
    }

    /// After record `id` changed in the store: its registered object drops the row a fetch
    /// read for it and, if loaded and without unsaved changes, reads the new values: at
    /// once if observed, telling the observers of the properties that changed only, else
    /// as a fault, on its next read.
    ///
    /// An object a read found gone (its record deleted elsewhere, see
    /// ``ManagedObject/markGone()``) whose record another save brought back (a merge policy
    /// that saves a changed object deleted elsewhere again, under the same ID) exists again,
    /// as a fault: a fetch that finds the record hands it out, and it must take writes.
    func refreshUpdated(_ id: RecordID) {
        guard let object = registered[id] else { return }
        object.dropPrefetched()
        if !object.exists && !object.inStore && dirty[id] == nil {
            changeGeneration &+= 1
            relatedListsChanged()
            object.inStore = true
            object.exists = true
            object.isFault = true
            object.values = []
            return
        }
        guard !object.isFault else { return }
        if object.hasUnsavedChanges {
            mergeIntoChanged(object)
            return
        }
        // Read at the record's newest version already (by a fetch since that save): nothing to take in.
        if parent == nil, coordinator.version(of: id, at: readGeneration) == object.baseVersion { return }
        changeGeneration &+= 1  // it may be in `dirty`, unchanged: its values change without a write
        relatedListsChanged()  // a list read loads it again, and leaves it out if its record is gone
        if object.isObservable, let (values, version) = try? sourceValues(for: id), values.count == object.values.count {
            object.reload(values)
            object.baseVersion = version
            return
        }
        object.isFault = true
        object.values = []
    }
}

/// A context for the merge job its executor runs.
private struct MergeTarget: @unchecked Sendable {
    // @unchecked: the context is only dereferenced inside the job, on the executor the
    // context is confined to (``Context/mergeAutomatically(on:)``), as all its other uses.
    weak var context: Context?
}
