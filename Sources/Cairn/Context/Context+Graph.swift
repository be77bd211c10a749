import CairnStorage
/// Changing values and relationships (keeping inverses in step), and deleting with
/// delete rules. Every change is recorded for undo.
extension Context {
    /// Sets one value of an object, tracked and undoable. Relationship slots go through
    /// ``setRelationship(of:slot:to:)`` so inverses follow.
    func write(_ object: ManagedObject, slot: Int, value: Value) {
        willRead(object)
        guard object.exists else {
            recordRefusedWrite(CairnError(.invalidArgument, "cannot change \(object.entity.name) \(object.recordID): it is deleted"))
            return
        }
        let attributeCount = object.entity.attributes.count
        if slot >= attributeCount {
            let ids: [UInt64]
            switch value {
            case .reference(let raw): ids = [raw]
            case .references(let raws): ids = raws
            default: ids = []
            }
            // (IDs of deleted objects are left out, as a list read by key may still hold them.)
            setRelationship(of: object, slot: slot, to: ids.compactMap { self.object(for: RecordID(rawValue: $0)) }.filter(\.exists))
            return
        }
        guard slot < object.valueCount, !Value.same(object.currentValue(at: slot), value) else { return }
        undoManager.withGroup(in: self) {
            storePrimitive(object, slot, value)
            if !object.layout.derivations.isEmpty { updateDerivations(of: object) }
        }
    }

    /// Sets a value with no inverse handling (must run inside an undo group).
    func setPrimitive(_ object: ManagedObject, _ slot: Int, _ value: Value) {
        willRead(object)
        guard slot < object.valueCount, !Value.same(object.currentValue(at: slot), value) else { return }
        storePrimitive(object, slot, value)
    }

    /// ``setPrimitive(_:_:_:)`` once its checks hold: the object is loaded, the slot in
    /// range, and the value a change.
    @inline(__always)
    private func storePrimitive(_ object: ManagedObject, _ slot: Int, _ value: Value) {
        undoManager.record(object, slot: slot)
        object.setValue(value, at: slot)
        noteWritten(object)
    }

    /// Adds `raw` at the end of the reference list in `slot` of `object` (loaded), unless
    /// the list holds it, in place, recorded for undo as that one insertion (inside an
    /// undo group).
    private func appendReference(_ raw: UInt64, to object: ManagedObject, slot: Int) {
        let appended = object.editReferences(at: slot) { list in
            guard !list.contains(raw) else { return false }
            undoManager.record(object, slot: slot, inserting: raw, at: list.count)
            list.append(raw)
            return true
        }
        if appended { noteWritten(object) }
    }

    /// Removes every `raw` from the reference list in `slot` of `object` (loaded), in
    /// place, each removal recorded for undo (inside an undo group).
    private func removeReference(_ raw: UInt64, from object: ManagedObject, slot: Int) {
        let removed = object.editReferences(at: slot) { list in
            guard let first = list.firstIndex(of: raw) else { return false }
            // A list holds a target once (only damaged data holds one twice): that one is
            // taken out where it is, after two tight passes, not a closure run over the whole
            // list twice.
            if !list[(first + 1)...].contains(raw) {
                undoManager.record(object, slot: slot, removing: raw, at: first)
                list.remove(at: first)
                return true
            }
            // First to last, each at its index in the list the earlier removals left, so
            // that undo, putting them back last first, restores the list exactly.
            var found = 0
            for index in list.indices where list[index] == raw {
                undoManager.record(object, slot: slot, removing: raw, at: index - found)
                found += 1
            }
            guard found > 0 else { return false }
            list.removeAll { $0 == raw }
            return true
        }
        if removed { noteWritten(object) }
    }

    /// Marks a written object changed (in `dirty`).
    @inline(__always)
    private func noteWritten(_ object: ManagedObject) {
        let identity = ObjectIdentifier(object)
        let before = changeGeneration
        if lastWritten == identity {  // in `dirty` already (see ``lastWritten``)
            changeGeneration &+= 1
            noteForLookup(object, since: before)
            return
        }
        // Most writes are to an object changed already: a lookup, not a store (which would
        // retain the object and release the one it replaces).
        let id = object.recordID
        if dirty.contains(id, identicalTo: object) { changeGeneration &+= 1 } else { dirty[id] = object }
        noteForLookup(object, since: before)
        lastWritten = identity
    }

    /// An entity looked up by its number, with its class: what ``objectOrFault(_:resolved:made:)``
    /// keeps between calls.
    typealias ResolvedEntity = (number: UInt16, entity: EntityDescription, type: ManagedObject.Type?)

    /// The registered object for `id`, or a new fault registered in the same probe (`made`
    /// then set); nil for an ID of no entity of the model. `resolved` keeps the last entity
    /// looked up, so that a run of IDs of one entity looks its entity and class up once.
    func objectOrFault(_ id: RecordID, resolved: inout ResolvedEntity?, made: inout Bool) -> ManagedObject? {
        registered.value(forKey: id) { () -> ManagedObject? in
            if resolved?.number != id.entity {
                guard let entity = coordinator.entity(number: id.entity) else { return nil }
                resolved = (id.entity, entity, model.objectClass(for: entity.name))
            }
            made = true
            return resolved.map { makeFault(id, entity: $0.entity, type: $0.type) }
        }
    }

    /// The live targets of a relationship slot, as registered objects or faults.
    func relatedObjects(of object: ManagedObject, slot: Int, keeping: Bool = false) -> [ManagedObject] {
        willRead(object)
        let raws: [UInt64]
        switch object.currentValue(at: slot) {
        case .reference(let raw): raws = [raw]
        case .references(let list): raws = list
        default: return []
        }
        let long = raws.count >= Self.relatedListMinimum
        if long, let kept = keptList(object, slot: slot) { return kept.objects }
        // One loop, the targets' entity and class looked up once (not per target), rather
        // than `compactMap`, which runs the standard library's unspecialized code and asks
        // the runtime for array metadata per target.
        var targets: [ManagedObject] = []
        targets.reserveCapacity(raws.count)
        var resolved: ResolvedEntity?
        // Read from the store, the related objects stay faults (Core Data's relationship
        // faults), and fire together in batches when read (see ``FaultBatch``). Through a
        // parent, each is loaded as it is met, and one whose record is gone left out.
        let deferring = parent == nil
        let verifying = deferring && !listIsCurrent(object, slot: slot)
        var unverified: [ManagedObject] = []
        var batch = FaultBatch.Gatherer()
        var stillFaults = false
        for raw in raws {
            let id = RecordID(rawValue: raw)
            var made = false
            guard let target = objectOrFault(id, resolved: &resolved, made: &made) else { continue }
            if target.isFault {
                if verifying {
                    unverified.append(target)
                } else if deferring {
                    batch.add(target)
                } else {
                    willRead(target)
                    if target.isFault { stillFaults = true }  // (its load failed: read again next time)
                }
            }
            if target.exists { targets.append(target) }
        }
        if !unverified.isEmpty { targets = verifyFaults(unverified, of: targets, into: &batch) }
        batch.finish()
        if long, keeping, !stillFaults { keep(targets, of: object, slot: slot, complete: targets.count == raws.count) }
        return targets
    }

    /// How many objects ``relatedObjects(of:slot:keeping:)`` would return, without making
    /// them when it can: from the IDs of a list the store vouches for (see
    /// ``listIsCurrent(_:slot:)``), less those this context has deleted. Otherwise (a
    /// list changed here, a child context, a relationship without an inverse) the objects
    /// are made and counted.
    func relatedCount(of object: ManagedObject, slot: Int) -> Int {
        willRead(object)
        guard slot < object.values.count else { return 0 }
        switch object.values[slot] {
        case .reference:
            return relatedObjects(of: object, slot: slot).count
        case .references(let raws):
            if let kept = keptList(object, slot: slot) { return kept.objects.count }
            guard parent == nil, listIsCurrent(object, slot: slot) else { return relatedObjects(of: object, slot: slot).count }
            var count = raws.count
            if !registered.isEmpty {
                for raw in raws { if let target = registered[RecordID(rawValue: raw)], !target.exists { count -= 1 } }
            }
            return count
        default:
            return 0
        }
    }

    /// Checks that the records of `faults` (among `targets`) exist, without reading them:
    /// those found gone are marked so and left out, the rest go into `batch`.
    private func verifyFaults(_ faults: [ManagedObject], of targets: [ManagedObject],
                              into batch: inout FaultBatch.Gatherer) -> [ManagedObject] {
        var gone = Set<ObjectIdentifier>()
        for (fault, found) in zip(faults, coordinator.containsEach(faults.map(\.recordID), at: readGeneration)) {
            if found {
                batch.add(fault)
            } else {
                fault.markGone()
                gone.insert(ObjectIdentifier(fault))
            }
        }
        return gone.isEmpty ? targets : targets.filter { !gone.contains(ObjectIdentifier($0)) }
    }

    /// Whether the list in `slot` of `object` names only records that exist, without asking
    /// the store about each: it is the list saved in the object's record, unchanged here,
    /// the record has not changed in the store since it was read, and the relationship has
    /// an inverse. (The store's records agree with their inverses, and deleting a record
    /// takes it out of its inverses' lists, which changes their records. Through a
    /// relationship without an inverse, a deleted record stays named.)
    private func listIsCurrent(_ object: ManagedObject, slot: Int) -> Bool {
        let attributes = object.entity.attributes.count
        guard slot >= attributes, slot - attributes < object.entity.relationships.count,
              object.entity.relationships[slot - attributes].inverse != nil,
              object.inStore, object.exists, object.savedValueUnchanged(at: slot) else { return false }
        return coordinator.version(of: object.recordID, at: readGeneration) == object.baseVersion
    }


    /// In a child, related objects are loaded as they are read (through the parent, which
    /// knows whether each exists), and those gone left out. `stillFaults` is set if a load
    /// failed (it is read again next time).
    private func firingFaults(_ targets: [ManagedObject], stillFaults: inout Bool) -> [ManagedObject] {
        var kept: [ManagedObject] = []
        kept.reserveCapacity(targets.count)
        for target in targets {
            if target.isFault { willRead(target) }
            if target.exists { kept.append(target) }
            if target.isFault { stillFaults = true }
        }
        return kept
    }

    private func ids(in value: Value) -> [UInt64] { value.referencedIDs }

    /// Sets a relationship to `targets` and updates the inverse of every target gained or lost.
    /// `edit`, what an in-place edit was handed, and `checked`, the class every target is an
    /// instance of, let a long list that only grew at the end be set without a pass over
    /// the objects it held (see ``appendKnown(_:to:slot:after:checked:)``).
    func setRelationship(of object: ManagedObject, slot: Int, to targets: [ManagedObject],
                         edit: RelatedListEdit? = nil, checked: ManagedObject.Type? = nil) {
        if !object.isFault, var known = knownPrefix(of: targets, in: object, slot: slot, edit: edit),
           appendKnown(targets, to: object, slot: slot, after: &known, checked: checked) { return }
        guard let relationship = relationship(of: object, slot: slot, accepting: targets) else { return }
        let oldIDs = ids(in: object.values[slot])
        if relationship.isToMany, object.holdsReferences(at: slot),
           let edits = Self.listEdits(from: oldIDs, to: targets) {
            guard !edits.isEmpty else { return }
            undoManager.withGroup(in: self) { applyListEdits(edits, to: object, slot: slot, inverse: relationship.inverse) }
            return
        }
        var newIDs: [UInt64] = []
        var seen = Set<UInt64>()
        for target in targets where target.exists && seen.insert(target.recordID.rawValue).inserted {
            newIDs.append(target.recordID.rawValue)
        }
        if !relationship.isToMany { newIDs = Array(newIDs.prefix(1)) }
        let newValue: Value = relationship.isToMany ? .references(newIDs) : (newIDs.first.map { .reference($0) } ?? .null)
        guard newValue != object.values[slot] else { return }
        undoManager.withGroup(in: self) {
            setPrimitive(object, slot, newValue)
            guard let inverseName = relationship.inverse else { return }
            let me = object.recordID.rawValue
            let newSet = Set(newIDs), oldSet = Set(oldIDs)
            for raw in oldIDs where !newSet.contains(raw) {
                if let target = self.object(for: RecordID(rawValue: raw)) { unlink(target, inverseName, from: me) }
            }
            for raw in newIDs where !oldSet.contains(raw) {
                if let target = self.object(for: RecordID(rawValue: raw)) { link(target, inverseName, to: object) }
            }
        }
    }

    /// Sets the to-many list in `slot` of `object` to `targets`, whose first `known` objects
    /// are, in order, the whole list as it stands (``knownPrefix(of:in:slot:edit:)``): only
    /// the rest are checked and added. Keeps the new list if it is `targets`. False, with
    /// nothing done, if the slot holds no list.
    private func appendKnown(_ targets: [ManagedObject], to object: ManagedObject, slot: Int, after prefix: inout KnownPrefix,
                             checked: ManagedObject.Type?) -> Bool {
        let known = prefix.count
        let added = Array(targets[known...])
        // The checks of the targets first: one inserted for them brings the relationships it
        // was given before, which may put it in this very list (the list is then not the
        // prefix any more: the whole-list path sets it, as it would have).
        let stamp = object.valuesStamp
        guard let relationship = relationship(of: object, slot: slot, accepting: added) else { return true }
        // (The ID list is not held here past this check: the append below then changes it
        // in place.)
        guard relationship.isToMany, object.valuesStamp == stamp, object.holdsReferences(at: slot),
              ids(in: object.values[slot]).count == known else { return false }
        // Each target must be the object registered for its ID (as a read would find it),
        // for the set of the list's objects to answer for its IDs.
        for target in added where registered[target.recordID] !== target { return false }
        // The targets the list does not hold, once each: as the IDs the list lacks, asked of
        // the set of its objects (an append scanned the whole ID list for each target).
        var shadow = prefix.shadow ?? ListShadow(targets[..<known])
        prefix.shadow = nil  // (`shadow` its only holder: changed in place)
        var raws: [UInt64] = []
        for target in added where target.exists && shadow.members.insert(ObjectIdentifier(target)).inserted {
            raws.append(target.recordID.rawValue)
        }
        let epoch = relatedListsEpoch
        if !raws.isEmpty {
            undoManager.withGroup(in: self) { applyListEdits(.appended(raws), to: object, slot: slot, inverse: relationship.inverse) }
        }
        // Kept only as a read would find it: nothing let go of the kept lists meanwhile (the
        // inverse's update may load a fault and find its record gone), and every target
        // added loaded and existing (a read loads a fault, and leaves out one that is gone).
        guard epoch == relatedListsEpoch, added.allSatisfy({ !$0.isFault && $0.exists }) else { return true }
        // Every target added (none deleted, held already or twice): the list is `targets`.
        // None added: it is what it was, the first `known`.
        if raws.count == added.count {
            shadow.append(targets[known...])
            keep(targets, of: object, slot: slot, complete: true, checked: checked, shadow: shadow)
        } else if raws.isEmpty {
            keep(Array(targets[..<known]), of: object, slot: slot, complete: true, checked: checked, shadow: shadow)
        }
        return true
    }

    /// The relationship in `slot` of `object` (loaded here), once `targets` are known to be
    /// of its destination and in this context (those in none are inserted); nil, with the
    /// error recorded, if not.
    private func relationship(of object: ManagedObject, slot: Int, accepting targets: [ManagedObject]) -> RelationshipDescription? {
        willRead(object)
        let attributeCount = object.entity.attributes.count
        guard slot >= attributeCount, slot < object.values.count, object.exists else { return nil }
        for target in targets where !target.belongs(to: self) || !target.exists {
            if target.belongs(to: self) {
                // Deleted here (or inserted and deleted): no list may point at it. (A fault
                // is not loaded to ask: one whose record is gone is left out when read.)
                recordRefusedWrite(CairnError(.invalidArgument,
                    "cannot relate \(object.entity.name) \(object.recordID) to \(target.entity.name) \(target.recordID): it is deleted"))
                return nil
            } else if target.context == nil {
                insert(target)
                guard target.belongs(to: self) else { return nil }  // (the insert failed, its error recorded)
            } else {
                recordRefusedWrite(CairnError(.invalidArgument,
                    "cannot relate \(object.entity.name) \(object.recordID) to \(target.entity.name) \(target.recordID): they are in different contexts"))
                return nil
            }
        }
        let relationship = object.entity.relationships[slot - attributeCount]
        guard targets.allSatisfy({ $0.entity.name == relationship.destination }) else {
            recordRefusedWrite(CairnError(.invalidArgument, "\(object.entity.name).\(relationship.name) holds \(relationship.destination) objects only"))
            return nil
        }
        return relationship
    }

    /// Adds `targets` at the end of the to-many relationship in `slot` (those it holds
    /// already stay where they are), or takes them out (`removing`), updating their
    /// inverses: in place, recorded for undo as those edits. What `$dvds.append(dvd)`
    /// and `$dvds.remove(dvd)` do; unlike setting the whole list, it does not build the
    /// list of objects first.
    func editRelationship(of object: ManagedObject, slot: Int, adding targets: [ManagedObject], removing: Bool = false) {
        // Targets to take out need not be accepted (one in no context is not inserted for it;
        // one in another context is in no list here).
        guard let relationship = relationship(of: object, slot: slot, accepting: removing ? [] : targets) else { return }
        guard relationship.isToMany, object.holdsReferences(at: slot) else {
            recordRefusedWrite(CairnError(.invalidArgument, "\(object.entity.name).\(relationship.name) is not a to-many relationship"))
            return
        }
        let list = ids(in: object.values[slot])
        let edits: ListEdits
        if removing {
            let raws = targets.filter { $0.belongs(to: self) }.map(\.recordID.rawValue)
            if raws.count > 16 {
                let set = Set(raws)
                edits = .removed(list.indices.filter { set.contains(list[$0]) })
            } else {
                edits = .removed(list.indices.filter { raws.contains(list[$0]) })
            }
        } else {
            edits = .appended(Self.missing(targets.filter(\.exists).map(\.recordID.rawValue), from: list))
        }
        guard !edits.isEmpty else { return }
        undoManager.withGroup(in: self) { applyListEdits(edits, to: object, slot: slot, inverse: relationship.inverse) }
    }

    /// The distinct IDs of `raws` that `list` does not hold, in order: a few checked
    /// against the list as it is (a comparison per element, no hashing), many through a set.
    private static func missing(_ raws: [UInt64], from list: [UInt64]) -> [UInt64] {
        if raws.count > 16 {
            var seen = Set(list)
            return raws.filter { seen.insert($0).inserted }
        }
        var added: [UInt64] = []
        for raw in raws where !list.contains(raw) && !added.contains(raw) { added.append(raw) }
        return added
    }

    /// A to-many list's change from `old` to the live, distinct IDs of `targets`, when it is
    /// only targets added at the end (`list.append(x)`) or only targets taken out
    /// (`list.removeAll { … }`, `remove(at:)`): nil for any other change (a new order, a
    /// list built anew), which replaces the whole list. Costs a comparison per element
    /// and no hashing, where the whole-list path hashes both lists.
    static func listEdits(from old: [UInt64], to targets: [ManagedObject]) -> ListEdits? {
        if targets.count >= old.count {
            // Added at the end: the old list first, in order, then targets it lacks.
            for index in old.indices {
                let target = targets[index]
                guard target.exists, target.recordID.rawValue == old[index] else { return nil }
            }
            return .appended(missing(targets[old.count...].filter(\.exists).map(\.recordID.rawValue), from: old))
        }
        // Taken out: the targets, in order, are what is left of the old list.
        var removed: [Int] = []
        var next = 0
        for (index, raw) in old.enumerated() {
            if next < targets.count, targets[next].exists, targets[next].recordID.rawValue == raw {
                next += 1
            } else {
                removed.append(index)
            }
        }
        guard next == targets.count else { return nil }
        // A target taken out that the list holds again (only damaged data does) stays
        // linked: the whole-list path, which unlinks only targets no longer held, takes it.
        if removed.count <= 16 {
            for index in removed where old.firstIndex(of: old[index]) != index || old.lastIndex(of: old[index]) != index { return nil }
        } else if Set(old).count != old.count {
            return nil
        }
        return .removed(removed)
    }

    /// A change to a to-many list made of edits (see ``listEdits(from:to:)``).
    enum ListEdits {
        /// IDs to add at the end, none of them in the list.
        case appended([UInt64])
        /// Indexes to remove, ascending.
        case removed([Int])

        var isEmpty: Bool {
            switch self {
            case .appended(let raws): return raws.isEmpty
            case .removed(let indexes): return indexes.isEmpty
            }
        }
    }

    /// Applies `edits` to the list in `slot` of `object` in place, each recorded for undo
    /// as one insertion or removal (not the list it replaces: a copy of the whole list per
    /// `append`, memory in n² for n appends), and updates the inverse of every target
    /// gained or lost (inside an undo group).
    private func applyListEdits(_ edits: ListEdits, to object: ManagedObject, slot: Int, inverse: String?) {
        var gained: [UInt64] = [], lost: [UInt64] = []
        // Taking out many of a list (`dvds = []`) is recorded as the list it was: undoing
        // removals one by one puts each back at its index, a shift of the list each, time in
        // n² for n taken out.
        var recordsEdits = true
        if case .removed(let indexes) = edits, indexes.count > 16, indexes.count * 8 > ids(in: object.values[slot]).count {
            undoManager.record(object, slot: slot)
            recordsEdits = false
        }
        let changed = object.editReferences(at: slot) { list in
            switch edits {
            case .appended(let raws):
                for raw in raws {
                    undoManager.record(object, slot: slot, inserting: raw, at: list.count)
                    list.append(raw)
                }
                gained = raws
            case .removed(let indexes):
                // First to last, each at its index in the list the earlier removals left,
                // so that undo, putting them back last first, restores the list exactly.
                for (done, index) in indexes.enumerated() {
                    if recordsEdits { undoManager.record(object, slot: slot, removing: list[index], at: index - done) }
                    lost.append(list[index])
                }
                // The kept ones moved down over the removed, in one pass.
                guard let first = indexes.first else { break }
                var write = first, next = 0
                for read in first..<list.count {
                    if next < indexes.count, indexes[next] == read {
                        next += 1
                    } else {
                        list[write] = list[read]
                        write += 1
                    }
                }
                list.removeLast(list.count - write)
            }
            return !edits.isEmpty
        }
        guard changed else { return }
        noteWritten(object)
        guard let inverse else { return }
        let me = object.recordID.rawValue
        for raw in lost {
            if let target = self.object(for: RecordID(rawValue: raw)) { unlink(target, inverse, from: me) }
        }
        for raw in gained {
            if let target = self.object(for: RecordID(rawValue: raw)) { link(target, inverse, to: object) }
        }
    }

    /// Takes `object` out of the inverse, on record `raw`, of its relationship in `slot`,
    /// which no longer names that record (inside an undo group).
    func unlinkInverse(of object: ManagedObject, slot: Int, at raw: UInt64) {
        let attributes = object.entity.attributes.count
        guard slot >= attributes, slot - attributes < object.entity.relationships.count,
              let inverse = object.entity.relationships[slot - attributes].inverse,
              let target = self.object(for: RecordID(rawValue: raw)) else { return }
        unlink(target, inverse, from: object.recordID.rawValue)
    }

    /// After a child's save has deleted `object` here: the records still related to it
    /// (what this context related it to after the child read it, which the child's delete
    /// rules never saw) let go of it as each relationship's delete rule says: nullify and
    /// deny take it out of their inverse, cascade deletes them, no action leaves them
    /// (inside an undo group).
    func releaseLinks(ofDeleted object: ManagedObject) {
        let attributes = object.entity.attributes.count
        for (offset, relationship) in object.entity.relationships.enumerated() where attributes + offset < object.values.count {
            let slot = attributes + offset
            for raw in object.values[slot].referencedIDs {
                switch relationship.deleteRule {
                case .cascade: if let target = self.object(for: RecordID(rawValue: raw)), target.exists { delete(target) }
                case .noAction: break
                case .nullify, .deny: unlinkInverse(of: object, slot: slot, at: raw)
                }
            }
        }
    }

    /// Removes `raw` from `target`'s relationship `name` (no further inverse handling).
    func unlink(_ target: ManagedObject, _ name: String, from raw: UInt64) {
        refreshIfStale(target)
        willRead(target)
        guard let slot = target.layout.index(of: name), slot < target.values.count else { return }
        if target.holdsReferences(at: slot) {
            removeReference(raw, from: target, slot: slot)
        } else if case .reference(let current) = target.values[slot], current == raw {
            setPrimitive(target, slot, .null)
        }
    }

    /// Reads `object` again if it is loaded without changes here and the store's record
    /// moved on since (in a root context). The saves that moved it may not be merged yet
    /// (a fault fired since reads them; a save is announced only after it commits): an
    /// inverse taken out of the older copy was left in the record, and nothing wrote it.
    /// A fault that holds the row a fetch read, older than the store's record, lets it go,
    /// so that it fires from the store: loaded from that row, it was such an older copy.
    func refreshIfStale(_ object: ManagedObject) {
        guard parent == nil, object.inStore else { return }
        if object.isFault {
            if let version = object.prefetchedVersion, version != coordinator.version(of: object.recordID, at: readGeneration) {
                object.dropPrefetched()
            }
            return
        }
        guard !object.hasUnsavedChanges, coordinator.version(of: object.recordID, at: readGeneration) != object.baseVersion else { return }
        refreshUpdated(object.recordID)
    }

    /// Adds `object` to `target`'s relationship `name`; for a to-one inverse, the
    /// target's previous partner loses the target.
    func link(_ target: ManagedObject, _ name: String, to object: ManagedObject) {
        willRead(target)
        guard let slot = target.layout.index(of: name), slot < target.values.count else { return }
        let raw = object.recordID.rawValue
        if target.holdsReferences(at: slot) {
            appendReference(raw, to: target, slot: slot)
            return
        }
        if case .reference(let previous) = target.values[slot], previous != raw,
           let partner = self.object(for: RecordID(rawValue: previous)),
           let backName = target.entity.relationships[slot - target.entity.attributes.count].inverse {
            unlink(partner, backName, from: target.recordID.rawValue)
        }
        setPrimitive(target, slot, .reference(raw))
    }

    /// Deletes an object, applying its relationships' delete rules now: `cascade`
    /// deletes the targets, `nullify` removes the object from their inverse, `deny` is
    /// checked when saving, `noAction` leaves the targets as they are.
    public func delete(_ object: ManagedObject) {
        // Deleted already, and gone from its context (another context's delete, merged).
        if !object.exists && object.context == nil && object.recordID.rawValue != 0 { return }
        guard object.belongs(to: self) else {
            recordRefusedWrite(CairnError(.invalidArgument, "cannot delete \(object.entity.name): it is not in this context"))
            return
        }
        willRead(object)
        guard object.exists else { return }
        undoManager.withGroup(in: self) {
            undoManager.record(object, in: self)
            object.exists = false
            let before = changeGeneration
            dirty[object.recordID] = object
            noteForLookup(object, since: before)
            let attributeCount = object.entity.attributes.count
            for (offset, relationship) in object.entity.relationships.enumerated() {
                let slot = attributeCount + offset
                let targets = ids(in: object.values[slot]).compactMap { self.object(for: RecordID(rawValue: $0)) }
                switch relationship.deleteRule {
                case .cascade:
                    for target in targets { delete(target) }
                case .nullify:
                    if let inverse = relationship.inverse {
                        for target in targets where target.exists { unlink(target, inverse, from: object.recordID.rawValue) }
                    }
                case .deny, .noAction:
                    break
                }
            }
        }
    }
}
