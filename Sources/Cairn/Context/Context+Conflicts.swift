import CairnStorage
/// Resolving a save's conflicts by the merge policy (what each keeps: ``MergePolicy``):
/// each conflicting object is merged with what the store now holds, then the graph is
/// made whole again around it, against related records read as the store has them now.
extension Context {
    /// One object in conflict: the values the store now holds (nil if deleted there) and
    /// their version.
    struct Conflict {
        let object: ManagedObject
        let stored: [Value]?
        let version: UInt64
    }

    /// Applies the merge policy to `objects` whose record changed since they were read.
    func resolveConflicts(in objects: [ManagedObject]) throws {
        let store = coordinator
        var conflicts: [Conflict] = []
        for object in objects where object.inStore {
            let current = store.version(of: object.recordID)
            guard current != object.baseVersion else { continue }
            let stored = try store.getVersioned(object.recordID)
            conflicts.append(Conflict(object: object, stored: stored?.record.values, version: stored?.version ?? current))
        }
        if mergePolicy == .error, !conflicts.isEmpty { throw conflictError(conflicts) }
        // What others saved: unchanged objects read it again, and changed ones let go of
        // records deleted there (a save naming one conflicts, whether or not its own record did).
        processExternalChanges()
        // Objects an earlier repair left as the store had them are repaired again, as the
        // store has them now (a commit expecting their versions failed if they moved).
        let earlierReads = repairReads
        repairReads = []
        guard !conflicts.isEmpty || !earlierReads.isEmpty else { return }
        // Merged values are set without a write: what was built on the changed objects'
        // values (the pending lookup) must see them, even if the save then fails.
        changeGeneration &+= 1
        var formerTargets: [ObjectIdentifier: [[UInt64]]] = [:]
        var forgotten = Set<UInt64>()
        for conflict in conflicts {
            let object = conflict.object
            formerTargets[ObjectIdentifier(object)] = Self.relationshipTargets(of: object, conflict.stored)
            if !merge(conflict) { forgotten.insert(object.recordID.rawValue) }
        }
        dropReferences(to: forgotten)
        undoManager.withGroup(in: self) {
            for conflict in conflicts {
                let object = conflict.object
                guard object.belongs(to: self), let former = formerTargets[ObjectIdentifier(object)] else { continue }
                if object.exists {
                    repair(object, formerly: former)
                } else {
                    releaseAll(ofDeleted: object, formerly: former)
                }
            }
            for (object, former, _) in earlierReads where object.belongs(to: self) && formerTargets[ObjectIdentifier(object)] == nil {
                repair(object, formerly: former)
            }
        }
    }

    /// The `.conflict` error listing what changed where, with each conflict's values.
    private func conflictError(_ conflicts: [Conflict]) -> CairnError {
        var reports: [MergeConflict] = []
        let lines = conflicts.map { conflict -> String in
            let object = conflict.object
            let names = object.layout.names
            let base = object.base ?? object.values
            func named(_ values: [Value]) -> [String: Value] {
                Dictionary(uniqueKeysWithValues: zip(names, values).map { ($0, $1) })
            }
            let here = object.exists ? names.indices.filter { $0 < base.count && $0 < object.values.count && !Value.same(object.values[$0], base[$0]) }
                .map { names[$0] } : []
            let there = conflict.stored.map { stored in
                names.indices.filter { $0 < stored.count && $0 < base.count && !Value.same(stored[$0], base[$0]) }.map { names[$0] }
            } ?? []
            reports.append(MergeConflict(entityName: object.entity.name, recordID: object.recordID, cachedValues: named(base),
                                         newValues: object.exists ? named(object.values) : nil, storedValues: conflict.stored.map(named),
                                         cachedVersion: object.baseVersion, storedVersion: conflict.version,
                                         changedHere: here, changedElsewhere: there))
            let label = "\(object.entity.name) \(object.recordID)"
            let hereText = object.exists ? here.joined(separator: ", ") : "deleted"
            guard conflict.stored != nil else { return "\(label) (deleted elsewhere; changed here: \(hereText))" }
            return "\(label) (changed here: \(hereText); changed elsewhere: \(there.joined(separator: ", ")))"
        }
        var error = CairnError(.conflict, "save conflicts with changes saved elsewhere: " + lines.joined(separator: "; "))
        error.conflicts = reports
        return error
    }

    /// Merges one conflicting object by the policy. Returns false if the object left this
    /// context (deleted in the store, and the policy keeps that).
    private func merge(_ conflict: Conflict) -> Bool {
        let object = conflict.object
        let base = object.base ?? object.values
        // An object without changes here (one a repair read) takes the store's state whole.
        let policy = object.hasUnsavedChanges ? mergePolicy : .rollback
        guard let stored = conflict.stored else {
            // Deleted elsewhere: the trumping policies save it again under the same ID,
            // unless it was deleted here too.
            if object.exists && (policy == .objectTrumps || policy == .overwrite) {
                // Inserted again, expecting the record as the delete left it: another context
                // that brought it back first makes this a conflict, not an overwrite.
                object.inStore = false
                reinserted[object.recordID] = conflict.version
                return true
            }
            object.exists = false
            object.inStore = false
            registered[object.recordID] = nil
            dirty[object.recordID] = nil
            object.context = nil
            return false
        }
        var merged = object.values
        let attributes = object.entity.attributes.count
        for index in merged.indices where index < stored.count && index < base.count {
            let changedHere = !Value.same(merged[index], base[index])
            let changedThere = !Value.same(stored[index], base[index])
            let isRelationship = index >= attributes
            // Overwrite replaces attributes; a relationship it treats as object-trumps does.
            let slotPolicy = isRelationship && policy == .overwrite ? .objectTrumps : policy
            // A to-many list changed on both sides takes both sides' edits (the trumping
            // side's where they clash): one side's whole list dropped the other's edits.
            if changedHere && changedThere && isRelationship && object.entity.relationships[index - attributes].isToMany
                && (slotPolicy == .objectTrumps || slotPolicy == .storeTrumps) {
                let deletedHere = { (raw: UInt64) in self.registered[RecordID(rawValue: raw)].map { !$0.exists } ?? false }
                merged[index] = slotPolicy == .objectTrumps
                    ? Self.mergedReferences(read: base[index], child: merged[index], parent: stored[index], dropping: deletedHere)
                    : Self.mergedReferences(read: base[index], child: stored[index], parent: merged[index], dropping: deletedHere)
                continue
            }
            switch slotPolicy {
            case .storeTrumps: if changedThere || !changedHere { merged[index] = stored[index] }
            case .objectTrumps: if !changedHere { merged[index] = stored[index] }
            case .overwrite, .error: break
            case .rollback: merged[index] = stored[index]
            }
        }
        if policy == .rollback || policy == .storeTrumps { object.exists = true }
        object.values = merged
        object.base = stored
        object.baseVersion = conflict.version
        return true
    }

    /// Per relationship, every record `object` was related to in any version the merge
    /// saw: as read, as changed here, and as the store holds it.
    private static func relationshipTargets(of object: ManagedObject, _ stored: [Value]?) -> [[UInt64]] {
        let attributes = object.entity.attributes.count
        return object.entity.relationships.indices.map { offset in
            let slot = attributes + offset
            var targets: [UInt64] = []
            for version in [object.base, object.values, stored] {
                if let version, slot < version.count { targets += version[slot].referencedIDs }
            }
            return targets
        }
    }

    /// The object of record `raw` if it exists, loaded (read again if stale, see
    /// ``refreshIfStale(_:)``).
    private func liveCurrent(_ raw: UInt64) -> ManagedObject? {
        guard let target = object(for: RecordID(rawValue: raw)) else { return nil }
        refreshIfStale(target)
        willRead(target)
        return target.exists ? target : nil
    }

    /// Makes a merged object's relationships whole (``relink(_:formerly:)``). One left as
    /// the store had it (the policy dropped every change here) is taken as the store has
    /// it now, which may be later than the merge read; the commit then expects its version,
    /// as its partners were made to agree with it.
    private func repair(_ object: ManagedObject, formerly former: [[UInt64]]) {
        refreshIfStale(object)
        willRead(object)
        // (The values relinked, and their version, before relinking: a partner's refresh
        // may read the object again meanwhile, and the commit must expect what was used.)
        let version = object.baseVersion, used = Self.relationshipTargets(of: object, nil)
        relink(object, formerly: former)
        if object.exists && object.inStore && !object.hasUnsavedChanges {
            repairReads.append((object, zip(former, used).map { $0 + $1 }, version))
        }
    }

    /// Makes a merged object's relationships whole (inside an undo group): targets that no
    /// longer exist are dropped, every target points back, and every record it was related
    /// to in `former` but no longer is lets go of it.
    private func relink(_ object: ManagedObject, formerly former: [[UInt64]]) {
        willRead(object)
        guard object.exists else { return }  // (read again: deleted since)
        let attributes = object.entity.attributes.count
        let raw = object.recordID.rawValue
        for (offset, relationship) in object.entity.relationships.enumerated() where attributes + offset < object.values.count {
            let slot = attributes + offset
            let targets = object.values[slot].referencedIDs
            let live = targets.filter { liveCurrent($0) != nil }
            if live.count != targets.count {
                setPrimitive(object, slot, relationship.isToMany ? .references(live) : .null)
            }
            guard let inverse = relationship.inverse else { continue }
            let kept = Set(live)
            for gone in former[offset] where !kept.contains(gone) {
                if let target = liveCurrent(gone) { unlink(target, inverse, from: raw) }
            }
            // (Read again: linking an earlier target to this object may have moved a later one.)
            for target in object.values[slot].referencedIDs.compactMap(liveCurrent) { link(target, inverse, to: object) }
        }
    }

    /// Whether `object`, deleted or changed here, may have a partner that still points back
    /// at it in the store after the save: a partner it was related to as read, and is not
    /// now (every one, for a delete), through a relationship with an inverse (and, for a
    /// delete, a nullify or cascade rule), that this save neither deletes nor changes.
    /// Asked just before each commit attempt, once upserts and merges (which may take a
    /// partner's changes away) have settled what the save holds.
    ///
    /// An edit reaches the partners as this context has them when it is made; a partner
    /// this context read before another save linked it to `object` (or one with changes
    /// here whose list another save changed, which keeps its own list until its save)
    /// does not name `object` here, and the edit leaves it as it is, though the store's
    /// list names `object`: the save would leave it pointing at a record that is gone, or
    /// that points elsewhere.
    func mayHaveStrayPartners(_ object: ManagedObject) -> Bool {
        !strayLinks(of: object, firstOnly: true).isEmpty
    }

    /// The relationships (by offset) and the partners as read that ``mayHaveStrayPartners(_:)``
    /// finds, or the first of them.
    private func strayLinks(of object: ManagedObject, firstOnly: Bool) -> [(offset: Int, raw: UInt64)] {
        let relationships = object.entity.relationships
        guard !relationships.isEmpty, object.inStore else { return [] }
        let attributes = object.entity.attributes.count
        let deleted = !object.exists
        var found: [(offset: Int, raw: UInt64)] = []
        for (offset, relationship) in relationships.enumerated() where relationship.inverse != nil
            && (!deleted || relationship.deleteRule == .nullify || relationship.deleteRule == .cascade) {
            let slot = attributes + offset
            // (No saved value past the last slot.)
            guard deleted || !object.savedValueUnchanged(at: slot),
                  let read = object.savedValue(at: slot)?.referencedIDs, !read.isEmpty else { continue }
            let now = deleted ? [] : object.currentValue(at: slot).referencedIDs
            let kept = now.count > 8 ? Set(now) : nil
            for raw in read where !(kept?.contains(raw) ?? now.contains(raw)) {
                let partner = registered[RecordID(rawValue: raw)]
                guard partner.map({ $0.exists && !$0.hasUnsavedChanges }) ?? true else { continue }
                found.append((offset, raw))
                if firstOnly { return found }
            }
        }
        return found
    }

    /// Makes the partners ``mayHaveStrayPartners(_:)`` finds for `objects` let go of them,
    /// inside an undo group, as the store has them now: a deleted object's delete rules
    /// reach them again; a changed one's partners that still name it lose it.
    func settleStrayPartners(of objects: [ManagedObject]) {
        undoManager.withGroup(in: self) {
            for object in objects {
                guard object.exists else {
                    releaseAll(ofDeleted: object, formerly: Self.relationshipTargets(of: object, nil))
                    continue
                }
                // (A partner gone from the store meanwhile has nothing to let go of.)
                for (offset, partnerRaw) in strayLinks(of: object, firstOnly: false) where liveCurrent(partnerRaw) != nil {
                    unlinkInverse(of: object, slot: object.entity.attributes.count + offset, at: partnerRaw)
                }
            }
        }
    }

    /// A delete that stands after a merge (inside an undo group): its delete rules reach
    /// the records related to it here or in the store that still point back at it (not one
    /// this context moved elsewhere). A `deny` relationship keeps its live targets, for
    /// the save's validation to refuse.
    private func releaseAll(ofDeleted object: ManagedObject, formerly former: [[UInt64]]) {
        let attributes = object.entity.attributes.count
        let raw = object.recordID.rawValue
        for (offset, relationship) in object.entity.relationships.enumerated() where attributes + offset < object.values.count {
            var seen = Set<UInt64>()
            let targets = former[offset].filter { seen.insert($0).inserted }.compactMap(liveCurrent).filter { target in
                guard let inverse = relationship.inverse, let slot = target.layout.index(of: inverse),
                      slot < target.values.count else { return true }
                return target.values[slot].referencedIDs.contains(raw)
            }
            switch relationship.deleteRule {
            case .cascade:
                for target in targets { delete(target) }
            case .nullify:
                if let inverse = relationship.inverse { for target in targets { unlink(target, inverse, from: raw) } }
            case .deny:
                let live = targets.map { $0.recordID.rawValue }
                object.setValue(relationship.isToMany ? .references(live) : live.first.map(Value.reference) ?? .null,
                                at: attributes + offset)
            case .noAction:
                break
            }
        }
    }
}

