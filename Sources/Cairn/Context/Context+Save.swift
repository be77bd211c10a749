import CairnCollections
import CairnStorage
/// Saving: validation, one store transaction (or a push into the parent), conflict
/// resolution by merge policy. (Merging other contexts' saves: Context+Merge.swift.)
extension Context {
    /// Saves every change atomically: into the store for a root context (durably, as
    /// the store's durability option says), into the parent for a child. If it throws,
    /// the store and this context are as they were before the call.
    public func save() throws {
        try save(durability: nil)
    }

    /// Saves with a durability other than the store's: `.deferred` returns without
    /// waiting for the disk (``Container/sync()`` or a later durable save makes it durable).
    public func save(durability: Durability?) throws {
        undoManager.endEvent()  // a save ends the undo event
        processExternalChanges()
        try throwDeferredError()
        try throwRefusedWrite()
        let generation = changeGeneration
        var (changed, items, lettingGo) = try validateChanges(preparing: parent == nil)
        guard !changed.isEmpty else {
            clearChanges(saved: 0)
            return
        }
        // A validation hook may have changed objects; what it changed is saved too.
        if changeGeneration != generation {
            changed = objectsToSave()
            items = nil
            lettingGo = nil
        }
        let saved: ChangeSet?
        if let parent {
            saved = wantsDidSave ? didSaveChanges(of: changed, sequence: 0) : nil
            push(changed, into: parent)
            parent.processPendingChanges()
        } else {
            try refuseWritesToThePast()
            saved = try saveToStore(changed, prepared: items, lettingGo: lettingGo, durability: durability)
            // A pinned context reads on at the state just after its save.
            moveGenerationToNewest()
        }
        processPendingChanges()
        if let saved { announceDidSave(saved) }
    }

    /// The changed objects that have unsaved changes, in one walk of the changed set.
    private func objectsToSave() -> [ManagedObject] {
        var objects: [ManagedObject] = []
        objects.reserveCapacity(dirty.count)
        for (_, object) in dirty where object.hasUnsavedChanges { objects.append(object) }
        return objects
    }

    // MARK: Validation

    /// Validates the objects with unsaved changes in record-ID order (so the errors are the
    /// same on every run) and, for a save into the store, makes each one's part of the
    /// transaction in the same step. Everything a save reads of an object (its state, its
    /// saved and current values) is read here once, while it is in cache: on a large save
    /// each separate pass over the objects (finding the changed ones, sorting, validating,
    /// encoding) missed the cache again on every object.
    ///
    /// - Returns: the objects with changes, in ID order, their save items, and those among
    ///   them that may have let go of a partner: the stored ones deleted or with a changed
    ///   relationship (nil unless `preparing`).
    private func validateChanges(preparing: Bool) throws
        -> (changed: [ManagedObject], items: [Coordinator.SaveItem]?, lettingGo: [ManagedObject]?) {
        // A copy: a validation hook may change the set, and the places stay those of this one.
        let pending = dirty
        var changed: [ManagedObject] = []
        changed.reserveCapacity(pending.count)
        var items: [Coordinator.SaveItem] = []
        var preparer = coordinator.makePreparer()
        if preparing { items.reserveCapacity(pending.count) }
        // Every failure is collected, so that a form can mark every invalid field at once.
        var failures: [CairnError] = []
        var lettingGo: [ManagedObject] = []
        try forEachChangedInIDOrder(pending) { _, object in
            guard object.hasUnsavedChanges else { return }
            if preparing && !object.entity.relationships.isEmpty && object.mayHaveLetGo { lettingGo.append(object) }
            if !object.layout.derivations.isEmpty, object.exists {
                undoManager.withGroup(in: self) { updateDerivations(of: object) }
            }
            let found = validationFailures(of: object)
            guard found.isEmpty else { failures += found; return }
            changed.append(object)
            if preparing && failures.isEmpty { items.append(try saveItem(for: object, preparer: &preparer)) }
        }
        if !failures.isEmpty { throw CairnError.validationFailed(failures) }
        return (changed, preparing ? items : nil, preparing ? lettingGo : nil)
    }

    /// Calls `body` with every object of `changed` (``dirty``, or a copy of it) in ID order.
    /// The order is sorted once for the walks that follow while the set does not change: a
    /// save walks it twice (validation, uniqueness), and each query that sees unsaved
    /// changes walks it once.
    func forEachChangedInIDOrder(_ changed: IDMap<RecordID, ManagedObject>,
                                 _ body: (RecordID, ManagedObject) throws -> Void) rethrows {
        let order: KeyOrderedValues<ManagedObject>
        if let kept = changedInIDOrder, kept.storage === changed.storage, kept.changes == changed.changeCount {
            order = kept.order
        } else {
            order = changed.valuesInKeyOrder()
            // (A short set is sorted again each time rather than kept.)
            if order.count >= ChangedOrder.minimumCount {
                changedInIDOrder = ChangedOrder(storage: changed.storage, changes: changed.changeCount, order: order)
            }
        }
        // (A copy of the set, held for the walk: its storage, which no write to the
        // context's set changes, holds every object the walk hands out unretained.)
        let holder = changed
        try withExtendedLifetime(holder) {
            try order.forEach { key, object in try body(RecordID(rawValue: key), object) }
        }
    }

    // MARK: Root save

    /// Commits `validated` (the changed objects) as one store transaction, resolving
    /// conflicts by the merge policy and retrying. `prepared` are their items, if made,
    /// and `lettingGo` those among them that may have let go of a partner, if known.
    /// Returns what the save changed if anyone listens for it (see ``onDidSave``).
    private func saveToStore(_ validated: [ManagedObject], prepared: [Coordinator.SaveItem]?, lettingGo: [ManagedObject]?,
                             durability: Durability?) throws -> ChangeSet? {
        var changed = validated
        var prepared = prepared
        defer { repairReads = []; reinserted = [:] }
        for attempt in 0..<16 {
            let generation = changeGeneration
            // (What the store held when the save's unique values were checked: the commit
            // checks them again only if something committed since.)
            let uniquenessCheckedAt = coordinator.lastSequence
            try enforceUniqueness()
            // (The save's walks in ID order are done: the kept order goes before the commit.)
            changedInIDOrder = nil
            // Conflict resolution and upserts (an adopted record changes the changed set,
            // which moves the generation) change what there is to save.
            var lettingGoNow = lettingGo
            if attempt > 0 || changeGeneration != generation {
                changed = objectsToSave()
                prepared = nil
                lettingGoNow = nil
            }
            // Just before the commit, when upserts and merges have settled what it saves: a
            // partner a delete or a change here missed, which still points back in the store,
            // lets go (see ``mayHaveStrayPartners(_:)``).
            let strays = (lettingGoNow ?? changed).filter { $0.mayHaveLetGo && mayHaveStrayPartners($0) }
            if !strays.isEmpty {
                settleStrayPartners(of: strays)
                changed = objectsToSave()
                prepared = nil
            }
            // A merge changed values the first validation saw: what it made is checked too.
            if attempt > 0 || !strays.isEmpty {
                let failures = inIDOrder(changed).flatMap(validationFailures(of:))
                if !failures.isEmpty { throw CairnError.validationFailed(failures) }
            }
            let items = try prepared ?? saveItems(for: changed)
            prepared = nil
            do {
                let reads = repairReads.compactMap { object, _, version in
                    object.hasUnsavedChanges ? nil : ExpectedVersion(id: object.recordID, version: version)
                }
                // The undo stacks this context keeps, written with its changes.
                let undo = try keptUndoWrite(for: items)
                let changes = try coordinator.save(items, from: inbox, durability: durability,
                                                   uniquenessCheckedAt: uniquenessCheckedAt, reads: reads, author: transactionAuthor,
                                                   keptOnDeletion: keptOnDeletion(of: items.indices.lazy.filter { items[$0].kind == .delete }
                                                       .map { items[$0].id.entity }),
                                                   also: undo.map { [$0.operation] } ?? [])
                if let undo, let kept = keptUndo { (kept.recordID, kept.expected) = (undo.id, undo.expected) }
                let saved = wantsDidSave ? didSaveChanges(of: changed, sequence: changes.sequence) : nil
                didSave(changed, sequence: changes.sequence)
                return saved
            } catch let error as CairnError where error.code == .conflict {
                try resolveConflicts(in: changed)
            }
        }
        throw CairnError(.conflict, "save kept conflicting with concurrent saves; try again")
    }

    private func saveItems(for objects: [ManagedObject]) throws -> [Coordinator.SaveItem] {
        var items: [Coordinator.SaveItem] = []
        items.reserveCapacity(objects.count)
        var preparer = coordinator.makePreparer()
        for object in objects { items.append(try saveItem(for: object, preparer: &preparer)) }
        return items
    }

    /// An object's part of the transaction: its record checked and encoded by `preparer`.
    private func saveItem(for object: ManagedObject, preparer: inout Store.Preparer) throws -> Coordinator.SaveItem {
        let id = object.recordID
        // (The values whole only where the store checks the references.)
        let checked = !object.entity.relationships.isEmpty
        if object.isNewHere {
            // (A base version: a record deleted elsewhere that a merge policy inserts again.)
            let values = object.values
            return .init(id: id, kind: .insert, values: checked ? values : [], baseVersion: reinserted[id] ?? 0,
                         operation: try preparer.put(id, values))
        }
        if object.isDeletedHere {
            return .init(id: id, kind: .delete, values: [], baseVersion: object.baseVersion, operation: try preparer.delete(id))
        }
        if object.holdsKeptRecord {
            return .init(id: id, kind: .update, values: checked ? object.keptValues ?? object.values : [],
                         baseVersion: object.baseVersion, changedKeys: Self.changedKeys(of: object),
                         operation: try Self.put(object, id: id, preparer: &preparer))
        }
        let values = object.values
        return .init(id: id, kind: .update, values: checked ? values : [], baseVersion: object.baseVersion,
                     changedKeys: Self.changedKeys(of: object), operation: try preparer.put(id, values))
    }

    /// The store's put of `object`'s record under `id`, checked and encoded by `preparer`:
    /// from the kept record and the values written over it, left undecoded, if it holds
    /// one; from its values otherwise.
    static func put(_ object: ManagedObject, id: RecordID, preparer: inout Store.Preparer) throws -> RecordOperation {
        guard let (kept, owner, written, mask) = object.writtenOverKept else { return try preparer.put(id, object.values) }
        return try withExtendedLifetime(owner) {
            try preparer.put(id, kept: kept, written: written, mask: mask) { object.keptValues ?? object.values }
        }
    }

    /// The keys an update changed, as a mask over its values (names only when the
    /// object has more than 64 properties, or no list of written slots to read).
    static func changedKeys(of object: ManagedObject) -> Coordinator.ChangedKeys {
        guard !object.isFault, let mask = object.changedSlotMask else { return .names(object.changedKeys) }
        return .mask(mask, names: object.layout.names)
    }

    private func didSave(_ objects: [ManagedObject], sequence: UInt64) {
        for object in objects {
            let id = object.recordID
            if object.exists {
                object.inStore = true
                object.markSaved()
                object.baseVersion = sequence
            } else {
                object.inStore = false
                object.base = nil
                registered[id] = nil
                object.context = nil
            }
        }
        clearChanges(saved: objects.count)
    }

    /// Ends a save that succeeded, `saved` of the changed objects having had changes to
    /// save: the changed set is emptied, and the objects inserted and deleted since the
    /// last save (never in the store, so not saved) leave the context, as deleted stored
    /// objects do. (They are looked for only when some changed object had nothing to save.)
    private func clearChanges(saved: Int) {
        if dirty.count > saved {
            for (_, object) in dirty where !object.exists && !object.inStore && object.belongs(to: self) {
                registered[object.recordID] = nil
                object.context = nil
            }
        }
        clearTransientChanges()
        dirty = [:]
        changedInIDOrder = nil
    }

    // MARK: Child save

    private func push(_ objects: [ManagedObject], into parent: Context) {
        parent.undoManager.withGroup(in: parent) {
            var deletedTargets: [ManagedObject] = []
            // The child's delete rules saw the relationships as it read them: what the parent
            // related a deleted record to since still names it, and lets go of it once the
            // child's own changes are in (first, it made lists the child reordered look
            // changed here, and the merge kept the parent's order).
            defer { for target in deletedTargets { parent.releaseLinks(ofDeleted: target) } }
            for object in inIDOrder(objects) {
                let id = object.recordID
                if object.isDeleted || (!object.exists) {
                    if let target = parent.registered[id] ?? parent.object(for: id) {
                        parent.delete(target, applyingRules: false)
                        deletedTargets.append(target)
                    }
                    continue
                }
                let target: ManagedObject
                if let existing = parent.registered[id] {
                    target = existing
                    parent.willRead(target)
                    if !target.exists { parent.undoManager.record(target, in: parent); target.exists = true }
                } else if object.isInserted {
                    target = object.layout === PropertyLayout.of(type(of: object)) ? type(of: object).init() : parent.dynamicObject(object.entity)
                    target.skipMadeDefaults()  // it takes the child's values
                    target.entity = object.entity
                    target.recordID = object.recordID
                    target.context = parent
                    target.inStore = false
                    target.exists = false
                    target.isFault = false
                    parent.registered[id] = target
                    parent.undoManager.record(target, in: parent)
                    target.exists = true
                    parent.dirty[id] = target
                } else {
                    guard let fault = parent.object(for: id) else { continue }
                    target = fault
                    parent.willRead(target)
                }
                // What the child changed only: a value it did not change stays the parent's,
                // which the parent may have changed since the child read it (copying the
                // child's older value undid that, and a relationship list's older value left
                // the parent's inverses out of step).
                let read = object.base  // nil: new in the child, every value is its own
                for index in object.values.indices where index < target.values.count {
                    var value = object.values[index]
                    if let read, index < read.count {
                        if Value.same(value, read[index]) { continue }
                        let attributes = object.entity.attributes.count
                        if index >= attributes, object.entity.relationships[index - attributes].isToMany {
                            value = Self.mergedReferences(read: read[index], child: value, parent: target.values[index],
                                                          dropping: { _ in false })  // (see `releaseLinks`)
                        } else if index >= attributes, case .reference(let moved) = target.values[index],
                                  !Value.same(target.values[index], read[index]), value.referencedIDs.first != moved {
                            // The parent pointed it elsewhere meanwhile; the child's choice stands, so
                            // that record's inverse loses it.
                            parent.unlinkInverse(of: target, slot: index, at: moved)
                        }
                    }
                    parent.setPrimitive(target, index, value)  // (a value the same as the parent's is no change there)
                }
            }
        }
        for object in objects {
            if object.exists {
                object.inStore = true
                object.markSaved()
            } else {
                registered[object.recordID] = nil
                object.inStore = false
                object.context = nil
            }
        }
        clearChanges(saved: objects.count)
    }

    /// A to-many relationship's value after a child's save: the child's, unless the parent
    /// changed it since the child read it (`read`); then the parent's list without what the
    /// child took out, and with what it added, in the child's order. (Also a save's merge
    /// of a list changed here and in the store: the trumping side's is `child`.) The parent's
    /// additions that `dropping` names (deleted on the child's side) are left out.
    static func mergedReferences(read: Value, child: Value, parent: Value, dropping: (UInt64) -> Bool) -> Value {
        guard !Value.same(parent, read) else { return child }
        let childList = child.referencedIDs, readList = read.referencedIDs, parentList = parent.referencedIDs
        let kept = Set(childList), wasRead = Set(readList)
        var merged = parentList.filter { kept.contains($0) || (!wasRead.contains($0) && !dropping($0)) }
        let present = Set(merged)
        merged += childList.filter { !wasRead.contains($0) && !present.contains($0) }
        return .references(merged)
    }

    /// Deletes without applying delete rules (a child already applied them).
    func delete(_ object: ManagedObject, applyingRules: Bool) {
        if applyingRules { delete(object); return }
        willRead(object)
        guard object.exists else { return }
        undoManager.record(object, in: self)
        object.exists = false
        dirty[object.recordID] = object
    }
}

extension Context {
    /// `objects` in record-ID order (the order saves validate and push in, so errors are
    /// reproducible).
    func inIDOrder(_ objects: [ManagedObject]) -> [ManagedObject] {
        // Sorting plain (ID, position) pairs moves no references (no retain and release
        // per swap), unlike sorting the objects.
        var order = objects.indices.map { (objects[$0].recordID.rawValue, $0) }
        RadixSort.sort(&order) { $0.0 }
        return order.map { objects[$0.1] }
    }
}

/// A context's changed objects in ID order, kept for the walks that follow while the set
/// does not change (``Context/forEachChangedInIDOrder(_:_:)``). The order holds the objects
/// unretained: it is used only while `storage`, held weakly, still holds them unchanged
/// (a set replaced, grown or copied on write has new storage; one changed in place, a new
/// change count).
struct ChangedOrder {
    /// The least number of objects whose order is kept.
    static let minimumCount = 1024
    weak var storage: AnyObject?
    let changes: UInt
    let order: KeyOrderedValues<ManagedObject>
}
