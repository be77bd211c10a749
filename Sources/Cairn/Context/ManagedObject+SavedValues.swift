import CairnStorage
import Foundation

/// A managed object's values against the ones last read from or saved to its store: the
/// originals of the slots written since, what changed, and loading values into the object.
extension ManagedObject {
    /// Values as last read from (or saved to) the parent store; nil for a new object.
    /// Made from `values` and the originals of the slots written since, on each read.
    var base: [Value]? {
        get {
            switch savedState {
            case .none: return nil
            case .whole(let base): return base
            case .except(let originals): return restoring(originals)
            }
        }
        set { savedState = newValue.map { SavedValues(base: $0, values: storedValues) } ?? .none }
    }

    /// Whether a save of this stored object may take it out of a partner's relationship:
    /// it is deleted here, or a relationship of it was written since it was read.
    var mayHaveLetGo: Bool {
        guard inStore else { return false }
        guard exists else { return true }
        let attributes = entity.attributes.count
        switch savedState {
        case .none: return false
        case .except(let originals): return originals.contains { $0.slot >= attributes }
        case .whole: return true
        }
    }

    /// The value in `slot` as last read from (or saved to) the parent store (nil for a new
    /// object, which has none).
    func savedValue(at slot: Int) -> Value? {
        guard slot < valueCount else { return nil }
        switch savedState {
        case .none: return nil
        case .except(let originals): return originals.first(where: { $0.slot == slot })?.value ?? currentValue(at: slot)
        case .whole(let base): return slot < base.count ? base[slot] : nil
        }
    }

    /// Whether the value in `slot` is the one last read from (or saved to) the parent store.
    func savedValueUnchanged(at slot: Int) -> Bool {
        guard slot < valueCount else { return false }
        switch savedState {
        case .none: return false
        case .except(let originals):
            guard let original = originals.first(where: { $0.slot == slot }) else { return true }
            return Value.same(original.value, currentValue(at: slot))
        case .whole(let base): return slot < base.count && Value.same(base[slot], storedValues[slot])
        }
    }

    /// Sets the value at `slot` (which must be in range), first keeping what it replaces
    /// as the saved value if the slot was not written since the last read or save. The
    /// values array stays this object's own: keeping the saved values as a second whole
    /// array would copy all of them on an object's first write and free them on its save.
    @inline(__always)
    func setValue(_ value: Value, at slot: Int) {
        // The observers are told around the store, out of line. (The registrar, a type of
        // another module, is not touched on the common path: only a flag beside it.)
        guard let extras, extras.isObserved else { return storeValue(value, at: slot) }
        extras.willChange(self, slot: slot)
        storeValue(value, at: slot)
        extras.didChange(self, slot: slot)
    }

    /// ``setValue(_:at:)`` without telling observers.
    @inline(__always)
    private func storeValue(_ value: Value, at slot: Int) {
        if case .except(var originals) = savedState, !originals.contains(where: { $0.slot == slot }) {
            let original = SavedValue(slot: slot, value: currentValue(at: slot))
            if originals.isEmpty {
                // An object's first write since a read or save (most objects get one): a list
                // made whole, not grown from the empty one through the library's generic
                // reallocation.
                savedState = .except([original])
            } else {
                savedState = .none  // `originals` is then the list's only holder: appended in place
                originals.append(original)
                savedState = .except(originals)
            }
        }
        if let keptRecord, slot < keptRecord.count, keptRecord.count <= 64 {
            writeOverKept(value, at: slot)
        } else {
            storedValues[slot] = value
        }
        valuesStamp &+= 1
    }

    /// Edits the reference list in `slot` (a to-many relationship) in place, as
    /// ``setValue(_:at:)`` would set the edited list; `edit` returns whether it changed
    /// it. The list is not copied unless something else holds it (the saved value, before
    /// the first change since a save). Setting `list + [raw]` would copy the whole list
    /// for every target added. False if the slot holds no list.
    func editReferences(at slot: Int, _ edit: (inout [UInt64]) -> Bool) -> Bool {
        if let extras, extras.isObserved {
            var changed = false
            extras.changing(self, slot: slot) { changed = editReferencesInPlace(at: slot, edit) }
            return changed
        }
        return editReferencesInPlace(at: slot, edit)
    }

    /// ``editReferences(at:_:)`` without telling observers.
    private func editReferencesInPlace(at slot: Int, _ edit: (inout [UInt64]) -> Bool) -> Bool {
        guard slot < storedValues.count, case .references(var list) = storedValues[slot] else { return false }
        valuesStamp &+= 1
        var originals: [SavedValue]?
        if case .except(let noted) = savedState, !noted.contains(where: { $0.slot == slot }) { originals = noted }
        // Without an original to keep, the slot lets go of the list while it is edited, so
        // `list` is its storage's only holder and changes it in place.
        if originals == nil { storedValues[slot] = .null }
        let changed = edit(&list)
        if var originals, changed {
            savedState = .none  // (`originals` is then the list's only holder: appended in place)
            originals.append(SavedValue(slot: slot, value: storedValues[slot]))
            savedState = .except(originals)
        }
        if originals == nil || changed { storedValues[slot] = .references(list) }
        return changed
    }

    /// Whether `slot` holds a list of references (a to-many relationship's value).
    func holdsReferences(at slot: Int) -> Bool {
        guard slot < storedValues.count, case .references = storedValues[slot] else { return false }
        return true
    }

    /// Loads a fault from the record its fetch read with it (``prefetch(_:version:)``), if it kept
    /// one; false if not. The one way a fault takes that record: its context's
    /// ``Context/load(_:)`` asks here first, and a read asks here without the context (see
    /// ``read(_:)``), as does a fault whose context is gone (a function fetched the objects
    /// in a context of its own and returned them). Without a record (a fault made for a
    /// relationship) such a fault has nothing to read, and reads give the defaults.
    @discardableResult
    func loadPrefetched() -> Bool {
        guard let (values, version) = prefetchedRow else { return false }
        sideState = .none
        if keptRecord != nil {
            // The kept row stays where it is, as the values, for reads to decode in place.
            setLoadedKept()
        } else if values.isEmpty && !layout.defaults.isEmpty {
            return false  // a kept row let go of when the fault took values another way
        } else {
            setLoaded(values)
        }
        baseVersion = version
        isFault = false
        return true
    }

    /// Takes `new`, a record's values as another save left them, as current and saved
    /// ones, telling observers of the properties whose values differ only (a merge).
    func reload(_ new: [Value]) {
        guard let extras, extras.isObserved, new.count == storedValues.count else { return setLoaded(new) }
        let changed = new.indices.filter { !Value.same(new[$0], storedValues[$0]) }
        extras.changing(self, slots: changed) { setLoaded(new) }
    }

    /// Replaces the values with `new` (``values``), keeping the saved ones, telling
    /// observers of the properties in `changed` only: the slots whose values differ.
    func setValues(_ new: [Value], changed: [Int]) {
        guard let extras, extras.isObserved else { return storeValues(new) }
        extras.changing(self, slots: changed) { storeValues(new) }
    }

    /// Loads a fault with the row read for it from the parent store (nil: its record is
    /// gone, and it is marked so). Returns whether the record exists.
    @discardableResult
    func take(_ row: (row: StoredRow, version: UInt64)?) -> Bool {
        guard let (row, version) = row else {
            markGone()
            return false
        }
        setLoaded(row)
        baseVersion = version
        isFault = false
        return true
    }

    /// ``setLoaded(_:)-([Value])`` of a row read from the parent store, decoded or kept.
    func setLoaded(_ row: StoredRow) {
        switch row {
        case .decoded(let values): setLoaded(values)
        case .kept(let record):
            sideState = .none  // (what was written over another record held before, or a fetch's row)
            keptRecord = record.values
            keptOwner = record.owner
            setLoadedKept()
        }
    }

    /// ``setLoaded(_:)-([Value])`` of the record in `keptRecord`, left undecoded there.
    private func setLoadedKept() {
        decodedValues = []
        markLoaded()
    }

    /// The values of a fault just read from the parent store, which are now also its saved ones.
    func setLoaded(_ values: [Value]) {
        storedValues = values
        markLoaded()
    }

    /// After the values were set to a stored record's: they are also the saved ones, and
    /// no initial value is left to make.
    private func markLoaded() {
        madeDefaultsPending = false
        valuesStamp &+= 1
        savedState = .except([])
    }

    /// Loads a stored record into the object in place, reusing its values' storage,
    /// as its values and saved ones: a batch update's one object holds each record in turn
    /// (``Context/batchUpdate(_:durability:_:)``) and allocates no array for each.
    func setLoaded(decoding record: borrowing StoredRecord, id: RecordID, entity: EntityDescription) throws {
        madeDefaultsPending = false
        savedState = .except([])
        valuesStamp &+= 1
        try record.decode(into: &storedValues)
        try Store.checkRecord(storedValues, id: id, entity: entity)
    }

    /// Puts the entity's default values back, as a new object has them, reusing the
    /// values' storage where it can: a batch insert's one object holds each new record in
    /// turn (``Context/batchInsert(_:from:durability:_:)``).
    func setDefaults() {
        savedState = .none
        valuesStamp &+= 1
        // Then the initial values made for each object, over the shared defaults.
        defer { if !layout.madeDefaults.isEmpty { makeDefaults() } }
        let defaults = layout.defaults
        guard storedValues.count == defaults.count else {
            storedValues = Value.uniqueCopy(of: defaults)
            return
        }
        Value.overwrite(&storedValues, with: defaults)
    }

    /// After a save or a merge: the current values are the saved ones.
    func markSaved() { savedState = .except([]) }

    /// The slots whose values differ from the saved ones as a mask (nil when there is no
    /// list of written slots to read it from: a new object, or more than 64 values).
    var changedSlotMask: UInt64? {
        guard case .except(let originals) = savedState, valueCount <= 64 else { return nil }
        var mask: UInt64 = 0
        for original in originals where !Value.same(original.value, currentValue(at: original.slot)) {
            mask |= 1 << UInt64(original.slot)
        }
        return mask
    }

    func replaceValues(with values: [Value]) {
        // Observers hear of values replaced, not of a fault's first values.
        if !storedValues.isEmpty, let extras, extras.isObserved {
            return extras.changing(self, slot: nil) { storeValues(values) }
        }
        storeValues(values)
    }

    private func storeValues(_ values: [Value]) {
        madeDefaultsPending = false  // all set at once: nothing is left to make
        valuesStamp &+= 1
        guard case .except(let originals) = savedState else {
            storedValues = values  // no saved values, or kept whole: unchanged either way
            return
        }
        let base = restoring(originals)
        storedValues = values
        savedState = SavedValues(base: base, values: values)
    }

    /// The current values with `originals` put back: the saved values.
    private func restoring(_ originals: [SavedValue]) -> [Value] {
        var base = storedValues
        for original in originals { base[original.slot] = original.value }
        return base
    }

    /// The names of keys whose values differ from the last saved ones.
    public var changedKeys: Set<String> {
        guard !isFault else { return isInserted ? Set(layout.names) : [] }
        switch savedState {
        case .none: return isInserted ? Set(layout.names) : []
        case .except(let originals):
            // Only the slots written can differ (and an object not written keeps a kept record).
            return Set(originals.filter { !Value.same($0.value, currentValue(at: $0.slot)) }.map { layout.names[$0.slot] })
        case .whole(let base):
            return Set(layout.names.indices.filter { !Value.same(base[$0], values[$0]) }.map { layout.names[$0] })
        }
    }

    /// The changed keys with their last saved values (`.null` for a new object).
    public var committedValuesForChangedKeys: [String: Value] {
        var result: [String: Value] = [:]
        for key in changedKeys { if let index = layout.index(of: key) { result[key] = savedValue(at: index) ?? .null } }
        return result
    }
}
