import CairnStorage
import Foundation

/// Uniqueness constraints, checked when a root context saves.
///
/// An inserted or changed object whose constrained values equal another object's is a
/// violation: the save fails with `.validation` naming the entity, the attributes and
/// the values — unless the merge policy says to upsert (as Core Data does):
/// `.objectTrumps` / `.overwrite` keep the new values on the existing record,
/// `.storeTrumps` / `.rollback` keep the existing record's values. Either way the new
/// object takes the existing record's ID (or, when this context has changed its own object
/// of the existing record, merges into that object and leaves the context), and
/// references to it follow.
extension Context {
    func enforceUniqueness() throws {
        guard coordinator.hasUniquenessConstraints else { return }
        // (Objects of constrained entities picked by their ID's entity number first: asking
        // every changed object of the save whether it has changes would compare its values.)
        let constrained = coordinator.constrainedEntities
        // (In ID order, the order of object IDs: from a walk in key order, which reads the
        // objects one after another as they were made, rather than at random.)
        var changed: [ManagedObject] = []
        forEachChangedInIDOrder(dirty) { id, object in
            if Int(id.entity) < constrained.count && constrained[Int(id.entity)] && object.exists && object.hasUnsavedChanges {
                changed.append(object)
            }
        }
        var claimed: [UniquenessKey: ManagedObject] = [:]
        claimed.reserveCapacity(changed.count)
        var renamed: [UInt64: UInt64] = [:]  // provisional ID → the record adopted
        defer { if !renamed.isEmpty { redirectReferences(renamed) } }
        // Each group's slots, found by name once for each entity rather than for each object.
        var groupSlots: [UInt16: [[Int]?]] = [:]
        for object in changed where object.exists {
            let entity = object.entity
            let slotsOfGroups = groupSlots[entity.number] ?? {
                let found = entity.uniqueness.map { group -> [Int]? in
                    let slots = group.compactMap { name in entity.attributes.firstIndex { $0.name == name } }
                    return slots.count == group.count ? slots : nil
                }
                groupSlots[entity.number] = found
                return found
            }()
            for (index, group) in entity.uniqueness.enumerated() {
                guard let slots = slotsOfGroups[index] else { continue }
                let key = slots.map { object.values[$0] }
                if key.contains(where: \.isNull) { continue }  // nil never collides, as in SQL
                // (A NaN equals nothing, as in the stored check: no claim.)
                guard let claim = UniquenessKey(entity: entity.number, group: index, slots: slots, values: object.values) else { continue }
                var rival: RecordID?
                var claimant: ManagedObject?
                // (One hash of the claim for a new one, the usual case.)
                if let other = claimed.updateValue(object, forKey: claim), other !== object {
                    claimed[claim] = other  // the first claimant keeps it
                    rival = other.recordID
                    claimant = other
                } else {
                    rival = try storedRival(of: object, slots: slots, key: key)
                }
                guard let rival else { continue }
                let values = zip(group, key).map { "\($0) = \($1)" }.joined(separator: ", ")
                let upserts = [.objectTrumps, .overwrite, .storeTrumps, .rollback].contains(mergePolicy)
                let keepingNewValues = mergePolicy == .objectTrumps || mergePolicy == .overwrite
                // A stored object after a new one that claimed its values first (in ID order):
                // the new one upserts onto it.
                if upserts, !object.isInserted, let claimant, claimant.isInserted {
                    absorb(claimant, into: object, keepingNewValues: keepingNewValues)
                    renamed[claimant.recordID.rawValue] = object.recordID.rawValue
                    claimed[claim] = object
                    break
                }
                guard object.isInserted, upserts else {
                    // A stored object whose values here are as it read them, now held by
                    // another record: a concurrent save took them (the first one's record
                    // deleted meanwhile), a conflict rather than a mistake here.
                    if !object.isInserted, claimant == nil, slots.allSatisfy({ object.savedValueUnchanged(at: $0) }) {
                        throw CairnError(.conflict,
                                         "uniqueness of \(entity.name) (\(group.joined(separator: ", "))): \(values) of \(object.recordID) is now held by \(entity.name) \(rival), which a concurrent save wrote")
                    }
                    throw CairnError(.validation,
                                     "uniqueness of \(entity.name) (\(group.joined(separator: ", "))) violated: \(values) is already used by \(entity.name) \(rival)")
                }
                let provisional = object.recordID
                // Another object of this save claims the values (an insert, too, has no
                // stored values to adopt), or this context has changed the stored rival (its
                // values here, not the store's, are the ones to keep): the two become one.
                if let survivor = claimant ?? registered[rival].flatMap({ mine in
                    mine !== object && mine.exists && !mine.isFault && mine.hasUnsavedChanges ? mine : nil
                }) {
                    absorb(object, into: survivor, keepingNewValues: keepingNewValues)
                    renamed[provisional.rawValue] = rival.rawValue
                    claimed[claim] = survivor
                    break
                }
                if try adopt(object, as: rival, keepingNewValues: keepingNewValues) {
                    renamed[provisional.rawValue] = rival.rawValue
                }
            }
        }
    }

    /// Merges the inserted `object` into `survivor`, another object of the same save that
    /// claims the same unique values, and drops it: the values of `object` win with
    /// `keepingNewValues`, the survivor's otherwise, a value only one of them has is kept,
    /// and to-many relationships are joined. References to `object` are left to
    /// ``redirectReferences(_:)``.
    private func absorb(_ object: ManagedObject, into survivor: ManagedObject, keepingNewValues: Bool) {
        let entity = object.entity
        var merged = survivor.values
        for slot in merged.indices where slot < object.values.count {
            let (new, old) = (object.values[slot], survivor.values[slot])
            switch (new, old) {
            case (.references(let added), .references(let kept)):
                merged[slot] = .references(kept + added.filter { !kept.contains($0) })
            default:
                if slot < entity.attributes.count || !entity.relationships[slot - entity.attributes.count].isToMany {
                    merged[slot] = keepingNewValues ? (new.isNull ? old : new) : (old.isNull ? new : old)
                }
            }
        }
        undoManager.withGroup(in: self) {
            for slot in merged.indices where !Value.same(merged[slot], survivor.values[slot]) {
                setPrimitive(survivor, slot, merged[slot])
            }
        }
        registered[object.recordID] = nil
        dirty[object.recordID] = nil
        object.context = nil
        object.exists = false
        resetGeneration &+= 1
    }

    /// A record in the store (as this context sees it) with the same constrained values.
    private func storedRival(of object: ManagedObject, slots: [Int], key: [Value]) throws -> RecordID? {
        let entity = object.entity
        let candidates = try coordinator.indexedIDs(entity: entity.number, slot: slots[0], matching: .equal([key[0]]))
        for id in candidates where id != object.recordID {
            // Changed here: judge by the context's values (checked above, or not a rival now).
            // (An object in the changed set without changes, one read again as a fault
            // since, is judged by the store's.)
            if let mine = registered[id], dirty.contains(id), mine.hasUnsavedChanges {
                guard mine.exists, !mine.isFault else { continue }
                if zip(slots, key).allSatisfy({ ValueOrder.equal(mine.values[$0.0], $0.1, []) }) { return id }
                continue
            }
            guard let values = try coordinator.get(id)?.values else { continue }
            if zip(slots, key).allSatisfy({ $0.0 < values.count && ValueOrder.equal(values[$0.0], $0.1, []) }) { return id }
        }
        return nil
    }

    /// Makes the inserted `object` stand for the existing record `rival` (false if there
    /// is no such record any more). References to its provisional ID are left to
    /// ``redirectReferences(_:)``.
    private func adopt(_ object: ManagedObject, as rival: RecordID, keepingNewValues: Bool) throws -> Bool {
        let oldID = object.recordID
        guard let stored = try sourceValues(for: rival) else { return false }
        if let previous = registered[rival], previous !== object {
            // The context's own instance of the rival gives way to the adopting object.
            previous.context = nil
            previous.exists = false
            dirty[rival] = nil
        }
        let entity = object.entity
        var merged = keepingNewValues ? object.values : stored.values
        // The stored record's links to objects this context deleted go, as the deletes'
        // rules would have taken them out had this context read the record first.
        let deletedHere = { (raw: UInt64) in self.registered[RecordID(rawValue: raw)].map { !$0.exists } ?? false }
        for (offset, relationship) in entity.relationships.enumerated() {
            let slot = entity.attributes.count + offset
            switch (relationship.isToMany, object.values[slot], stored.values[slot]) {
            case (true, .references(let new), .references(let old)):
                merged[slot] = .references(old.filter { !deletedHere($0) } + new.filter { !old.contains($0) })
            case (false, let new, var old):
                if case .reference(let raw) = old, deletedHere(raw) { old = .null }
                merged[slot] = keepingNewValues ? (new.isNull ? old : new) : (old.isNull ? new : old)
            default: break
            }
        }
        registered[oldID] = nil
        dirty[oldID] = nil
        // Live results that placed the object under its provisional ID, or hold the
        // adopted record's detached object, fetch again (the stored record may not change).
        resetGeneration &+= 1
        object.recordID = rival
        object.values = merged
        object.base = stored.values
        object.baseVersion = stored.version
        object.inStore = true
        object.exists = true
        registered[rival] = object
        dirty[rival] = object
        return true
    }

    /// Points references to provisional IDs at the records adopted in their place, in
    /// one pass over the changed objects: only they can hold a provisional ID (one not yet
    /// saved), as setting a reference to it changed them. (A pass over every registered
    /// object for each adopted duplicate would make an upsert of d duplicates in a context
    /// of R objects cost d × R.)
    private func redirectReferences(_ renamed: [UInt64: UInt64]) {
        for other in dirty.values where !other.isFault {
            let attributeCount = other.entity.attributes.count
            for slot in attributeCount..<other.values.count {
                switch other.values[slot] {
                case .reference(let raw):
                    if let rival = renamed[raw] { other.setValue(.reference(rival), at: slot) }
                case .references(let raws) where raws.contains(where: { renamed[$0] != nil }):
                    var seen = Set<UInt64>()
                    other.setValue(.references(raws.map { renamed[$0] ?? $0 }.filter { seen.insert($0).inserted }), at: slot)
                default: break
                }
            }
        }
    }
}
