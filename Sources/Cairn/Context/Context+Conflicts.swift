/// Resolving a save's conflicts by the merge policy: each conflicting object is merged
/// with what the store now holds, then the graph is made whole again around it.
///
/// What each policy keeps, per object (`stored` is the record another context saved):
/// - `.storeTrumps`: attributes and to-one relationships the store changed take the
///   store's value; the others keep this context's. An object deleted here but changed in
///   the store comes back with the store's values.
/// - `.objectTrumps`: what this context changed wins; the rest takes the store's value.
///   A delete made here stands, and its delete rules reach what the store added.
/// - `.overwrite`: every attribute takes this context's value. Relationships behave as
///   under `.objectTrumps`: a link this context never touched is not undone.
/// - `.rollback`: the object takes the store's state whole, deleted here or not.
///
/// To-many lists changed on both sides take both sides' edits (the trumping side's where
/// they clash) under every policy but `.rollback`. Then every conflicting object's
/// relationships are made whole: references to records deleted (here or in the store)
/// are dropped, every target points back, and a record it no longer names lets go of it.
/// A delete that stands applies its delete rules to the relationships the store now
/// holds. What this makes impossible (a `deny` rule now blocked, a required relationship
/// now empty) fails the save with `.validation`.
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
        let store = coordinator.store
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
        guard !conflicts.isEmpty else { return }
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
                    relink(object, formerly: former)
                } else {
                    releaseAll(ofDeleted: object, formerly: former)
                }
            }
        }
    }

    /// The `.conflict` error listing what changed where.
    private func conflictError(_ conflicts: [Conflict]) -> CairnError {
        let lines = conflicts.map { conflict -> String in
            let object = conflict.object
            let here = object.changedKeys.sorted().joined(separator: ", ")
            guard let stored = conflict.stored, let base = object.base else {
                return "\(object.entity.name) \(object.recordID) (deleted elsewhere; changed here: \(here))"
            }
            let there = object.layout.names.indices.filter { $0 < stored.count && !Value.same(stored[$0], base[$0]) }
                .map { object.layout.names[$0] }.joined(separator: ", ")
            return "\(object.entity.name) \(object.recordID) (changed here: \(here.isEmpty ? "deleted" : here); changed elsewhere: \(there))"
        }
        return CairnError(.conflict, "save conflicts with changes saved elsewhere: " + lines.joined(separator: "; "))
    }

    /// Merges one conflicting object by the policy. Returns false if the object left this
    /// context (deleted in the store, and the policy keeps that).
    private func merge(_ conflict: Conflict) -> Bool {
        let object = conflict.object
        let base = object.base ?? object.values
        guard let stored = conflict.stored else {
            // Deleted elsewhere: the trumping policies save it again under the same ID,
            // unless it was deleted here too.
            if object.exists && (mergePolicy == .objectTrumps || mergePolicy == .overwrite) {
                object.inStore = false
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
            let policy = isRelationship && mergePolicy == .overwrite ? .objectTrumps : mergePolicy
            // A to-many list changed on both sides takes both sides' edits (the trumping
            // side's where they clash): one side's whole list dropped the other's edits.
            if changedHere && changedThere && isRelationship && object.entity.relationships[index - attributes].isToMany
                && (policy == .objectTrumps || policy == .storeTrumps) {
                let deletedHere = { (raw: UInt64) in self.registered[RecordID(rawValue: raw)].map { !$0.exists } ?? false }
                merged[index] = policy == .objectTrumps
                    ? Self.mergedReferences(read: base[index], child: merged[index], parent: stored[index], dropping: deletedHere)
                    : Self.mergedReferences(read: base[index], child: stored[index], parent: merged[index], dropping: deletedHere)
                continue
            }
            switch policy {
            case .storeTrumps: if changedThere || !changedHere { merged[index] = stored[index] }
            case .objectTrumps: if !changedHere { merged[index] = stored[index] }
            case .overwrite, .error: break
            case .rollback: merged[index] = stored[index]
            }
        }
        if mergePolicy == .rollback || mergePolicy == .storeTrumps { object.exists = true }
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

    /// Whether the record `raw` exists as this context sees it (loading it if needed).
    private func isLive(_ raw: UInt64) -> ManagedObject? {
        guard let target = object(for: RecordID(rawValue: raw)) else { return nil }
        willRead(target)
        return target.exists ? target : nil
    }

    /// Makes a merged object's relationships whole (inside an undo group): targets that no
    /// longer exist are dropped, every target points back, and every record it was related
    /// to in `former` but no longer is lets go of it.
    private func relink(_ object: ManagedObject, formerly former: [[UInt64]]) {
        let attributes = object.entity.attributes.count
        let raw = object.recordID.rawValue
        for (offset, relationship) in object.entity.relationships.enumerated() where attributes + offset < object.values.count {
            let slot = attributes + offset
            let targets = object.values[slot].referencedIDs
            let live = targets.filter { isLive($0) != nil }
            if live.count != targets.count {
                setPrimitive(object, slot, relationship.isToMany ? .references(live) : .null)
            }
            guard let inverse = relationship.inverse else { continue }
            let kept = Set(live)
            for gone in former[offset] where !kept.contains(gone) {
                if let target = isLive(gone) { unlink(target, inverse, from: raw) }
            }
            // (Read again: linking an earlier target to this object may have moved a later one.)
            for target in object.values[slot].referencedIDs.compactMap(isLive) { link(target, inverse, to: object) }
        }
    }

    /// A delete that stands after a merge (inside an undo group): its delete rules reach
    /// every record it was related to in any version, the store's included. (A `deny`
    /// relationship keeps its live targets, for the save's validation to refuse.)
    private func releaseAll(ofDeleted object: ManagedObject, formerly former: [[UInt64]]) {
        let attributes = object.entity.attributes.count
        let raw = object.recordID.rawValue
        for (offset, relationship) in object.entity.relationships.enumerated() where attributes + offset < object.values.count {
            var seen = Set<UInt64>()
            let targets = former[offset].filter { seen.insert($0).inserted }.compactMap(isLive)
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
