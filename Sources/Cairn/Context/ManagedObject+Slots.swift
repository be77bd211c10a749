import CairnStorage
import Foundation

/// A managed object's slots as the property wrappers read and write them: values,
/// relationships and their counts, each through the object's context when it has one.
extension ManagedObject {
    @usableFromInline
    func read(_ slot: Int) -> Value {
        // A loaded object needs no context (and no weak load) to be read; nor does a fault
        // that holds the record its fetch read and loads alone (no batch): its context's
        // ``Context/load(_:)`` would only take that record (``loadPrefetched()``).
        if isFault, !(faultBatch == nil && loadPrefetched()) {
            if withContext({ $0.willRead(self) }) == nil { loadPrefetched() }
        }
        makeDefaultsIfPending()
        return currentValue(at: slot)
    }

    /// The value in `slot` now (`.null` past the last), read in place from a kept record;
    /// no fault fired, no initial value made.
    @inline(__always)
    func currentValue(at slot: Int) -> Value {
        if let keptRecord {
            if case .written = sideState { return writtenOrKeptValue(at: slot) }
            return keptRecord.value(at: slot)
        }
        return slot < decodedValues.count ? decodedValues[slot] : .null
    }

    /// A write that cannot be made (a value that does not archive): the value stays as it
    /// was and the context's next save or fetch throws `error`, prefixed with the entity
    /// and property. An object in no context has nowhere to keep the error: the slot is
    /// set to nil instead, which the save that inserts it refuses as a missing value.
    func refuseWrite(_ slot: Int, _ error: CairnError) {
        guard let context else { return write(slot, .null) }
        let name = slot < layout.names.count ? layout.names[slot] : "#\(slot)"
        context.recordRefusedWrite(CairnError(error.code, "\(entity.name).\(name): \(error.message)"))
    }

    @usableFromInline
    func write(_ slot: Int, _ value: Value) {
        if withContext({ $0.write(self, slot: slot, value: value) }) != nil {
            return
        } else if isInvalidated {
            reportInvalidAccess("change \(slot < layout.names.count ? layout.names[slot] : "a property") of")
        } else if slot < valueCount {
            makeDefaultsIfPending()
            setValue(value, at: slot)
        }
    }

    /// The objects of the relationship in `slot`; `keeping` a long list as objects for the
    /// in-place edit that reads it (see Context+RelatedLists.swift).
    @usableFromInline
    func related(_ slot: Int, keeping: Bool = false) -> [ManagedObject] {
        if let objects = withContext({ $0.relatedObjects(of: self, slot: slot, keeping: keeping) }) { return objects }
        if isInvalidated { reportInvalidAccess("read \(slot < layout.names.count ? layout.names[slot] : "a relationship") of") }
        return detachedRelations[slot] ?? []
    }

    @usableFromInline
    func setRelated(_ slot: Int, _ targets: [ManagedObject]) {
        if let context {
            context.setRelationship(of: self, slot: slot, to: targets)
        } else if isInvalidated {
            reportInvalidAccess("change \(slot < layout.names.count ? layout.names[slot] : "a relationship") of")
        } else if let owner = targets.lazy.compactMap(\.context).first {
            owner.insert(self)
            owner.setRelationship(of: self, slot: slot, to: targets)
        } else {
            detachedRelations[slot] = targets
        }
    }

    /// Adds `targets` to the to-many relationship in `slot`, or takes them out, as edits
    /// (``ToManyEdits``); before the object is in a context, on its noted relationships.
    func editRelated(_ slot: Int, _ targets: [ManagedObject], removing: Bool) {
        if let context {
            context.editRelationship(of: self, slot: slot, adding: targets, removing: removing)
            return
        }
        if isInvalidated { return reportInvalidAccess("change \(slot < layout.names.count ? layout.names[slot] : "a relationship") of") }
        let current = related(slot)
        if removing {
            setRelated(slot, current.filter { held in !targets.contains { $0 === held } })
        } else {
            var added: [ManagedObject] = []
            for target in targets where !current.contains(where: { $0 === target }) && !added.contains(where: { $0 === target }) {
                added.append(target)
            }
            setRelated(slot, current + added)
        }
    }

    /// How many targets the relationship in `slot` holds (see ``Context/relatedCount(of:slot:)``).
    func relatedCount(_ slot: Int) -> Int {
        guard let context else { return detachedRelations[slot]?.count ?? 0 }
        return context.relatedCount(of: self, slot: slot)
    }

    /// Whether the relationship in `slot` holds `target`.
    func relatedContains(_ slot: Int, _ target: ManagedObject) -> Bool {
        guard let context else { return detachedRelations[slot]?.contains { $0 === target } ?? false }
        guard target.belongs(to: context), target.exists else { return false }
        context.willRead(self)
        guard slot < valueCount else { return false }
        return currentValue(at: slot).referencedIDs.contains(target.recordID.rawValue)
    }

    /// What an attribute reads as when its slot holds no value of its type (a fault that
    /// failed to load): the layout's default, or for a prototype under construction (no
    /// slot yet) the default its wrapper declared.
    @usableFromInline
    func declaredDefault(_ site: DeclarationSite) -> Value {
        let slot = layout.slot(for: site)
        guard slot >= 0 else { return PrototypeBuilder.notedDefault(at: site) ?? .null }
        return slot < layout.defaults.count ? layout.defaults[slot] : .null
    }

    /// The slot of the property a wrapper declared at `site` (see ``PropertyLayout/slot(for:)``).
    @usableFromInline
    func slot(for site: DeclarationSite) -> Int {
        layout.slot(for: site)
    }

    /// Sets the attribute a wrapper declared at `site` (nothing without a slot for it):
    /// ``slot(for:)`` and ``write(_:_:)`` in one call from a wrapper's inlined setter: two
    /// calls would make the client retain the object twice around each property set and
    /// release it after. (A getter made the same way, returning an optional value, would
    /// cost more than its two calls.)
    @usableFromInline
    func setValue(_ value: Value, at site: DeclarationSite) {
        let slot = layout.slot(for: site)
        if slot >= 0 { write(slot, value) }
    }
}
