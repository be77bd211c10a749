import CairnStorage
import Foundation
import Synchronization

/// The base class of every persistent object.
///
/// Subclass it and declare properties with ``Attribute``, ``Archived``, ``ToOne`` and
/// ``ToMany`` (and ``Transient``, ``Derived`` or ``Ignored``); the entity is derived from the
/// class (name, properties in declaration order). Override ``entityName``,
/// ``uniqueKeyPaths`` or ``indexKeyPaths`` to change it. A relationship's inverse is named
/// once, on one side, by key path; the other side takes it.
///
/// ```swift
/// final class Person: ManagedObject {
///     @Attribute var username: String = ""
///     @Attribute var name: String? = nil
///     @ToMany(inverse: \DVD.owner, deleteRule: .cascade) var dvds: [DVD]
///     override class var uniqueKeyPaths: [[AnyKeyPath]] { [[\Person.username]] }
/// }
///
/// final class DVD: ManagedObject {
///     @Attribute var title: String = ""
///     @ToOne var owner: Person?
/// }
/// ```
///
/// An object lives in one context and is confined to that context's isolation; pass
/// its ``objectID`` across isolations instead. The same class serves the dynamic API
/// (``subscript(_:)``), for entities built at run time.
open class ManagedObject: CustomStringConvertible {
    /// The entity's name; the class name unless overridden.
    open class var entityName: String { String(describing: self) }
    /// Groups of attributes whose combined values must be unique, by name: the string form
    /// of ``uniqueKeyPaths``, which the compiler checks and which is to be preferred. The
    /// groups of both are combined.
    open class var uniqueness: [[String]] { [] }
    /// Compound indexes by attribute name: the string form of ``indexKeyPaths``, which is
    /// to be preferred. The groups of both are combined.
    open class var indexes: [[String]] { [] }
    /// The entity's name in an earlier model version, for migration.
    open class var renamingIdentifier: String? { nil }
    /// Groups of attributes whose combined values must be unique, by key path:
    /// `[[\Person.username], [\Person.first, \Person.last]]`. A save that breaks one fails
    /// with `.validation`; for a new object, a ``Context/mergePolicy`` other than `.error`
    /// makes it an upsert into the existing record instead. A key path that reads no
    /// attribute of the class fails the ``Model``.
    ///
    /// ```swift
    /// override class var uniqueKeyPaths: [[AnyKeyPath]] { [[\Person.username]] }
    /// ```
    open class var uniqueKeyPaths: [[AnyKeyPath]] { [] }
    /// Compound indexes by key path: `[[\Person.last, \Person.first]]`; a lookup goes
    /// through each one's first attribute. A key path that reads no attribute of the class
    /// fails the ``Model``. (One attribute alone is indexed with `@Attribute(indexed: true)`.)
    open class var indexKeyPaths: [[AnyKeyPath]] { [] }
    /// Stored Swift properties of the class that Cairn is not to store, by name, for those
    /// ``Ignored`` cannot wrap (`let`, `weak`, `lazy`). A ``Model`` refuses any other stored
    /// property that is not declared with one of Cairn's wrappers.
    open class var ignoredProperties: Set<String> { [] }
    /// The properties whose values history keeps when an object is deleted (Core Data's
    /// `preservesValueInHistoryOnDeletion`): the tombstone a sync reads to find the row to
    /// remove elsewhere (``HistoryTransaction/tombstones``). Only in a store that keeps
    /// history; the values are the record's as the delete found it.
    open class var preservedInHistoryOnDeletion: Set<String> { [] }

    // An object's stored state is touched only on its context's isolation, by Cairn's own
    // code, so the dynamic exclusivity checks (a runtime call per access) are skipped on
    // it: `@exclusivity(unchecked)` on each stored property.
    //
    // What every property read and every fetch touches comes first, in this order, near
    // the object's header (its type and reference count, which a fetch's retain writes):
    // the layout, the values and the fault and existence flags. Swift lays a class's
    // stored properties out in declaration order, so a fetch of objects no longer in the
    // cache misses fewer lines of each.

    @exclusivity(unchecked) private(set) var layout: PropertyLayout
    @exclusivity(unchecked) private var decodedValues: [Value]
    /// The record a fetch read, kept undecoded, while no value but one that decodes in place
    /// has been read (``RecordArena``); its values are then decoded into `decodedValues` on
    /// their first use of another kind. Nil for most objects.
    @exclusivity(unchecked) private var kept: KeptValues?
    /// What holds the kept record's bytes, while `kept` reads them.
    @exclusivity(unchecked) private var keptOwner: RecordChunk?
    /// The values: the decoded ones, decoding a kept record first (so every use of the
    /// values but ``read(_:)`` sees them decoded).
    private var storedValues: [Value] {
        _read {
            if kept != nil { decodeKept() }
            yield decodedValues
        }
        set {
            if kept != nil { letGoOfKept() }
            decodedValues = newValue
        }
        _modify {
            if kept != nil { decodeKept() }
            yield &decodedValues
        }
    }

    /// The number of values, kept or decoded.
    var valueCount: Int { kept?.count ?? decodedValues.count }

    /// Whether the values are a kept record not decoded yet (for tests).
    var holdsKeptRecord: Bool { kept != nil }

    /// Decodes the kept record into `decodedValues`, with the values written over it,
    /// letting go of it.
    @inline(never) private func decodeKept() {
        guard let values = keptValues else { return }
        decodedValues = values
        letGoOfKept()
    }

    /// The values of the kept record with those written over it, decoded (the object
    /// keeps the record); nil if it holds none.
    var keptValues: [Value]? {
        guard let record = kept else { return nil }
        var values = withExtendedLifetime(keptOwner) { record.all() }
        if case .written(let written, let mask) = side {
            var rest = mask, index = 0
            while rest != 0 {
                values[rest.trailingZeroBitCount] = written[index]
                rest &= rest &- 1
                index += 1
            }
        }
        return values
    }

    private func letGoOfKept() {
        kept = nil
        keptOwner = nil
        if case .written = side { side = .none }
    }

    /// The values written over the kept record, in slot order, and their slots as a mask
    /// (``Side/written(_:mask:)``); nil when the object holds no kept record.
    var writtenOverKept: (kept: KeptValues, owner: RecordChunk?, values: [Value], mask: UInt64)? {
        guard let kept else { return nil }
        if case .written(let values, let mask) = side { return (kept, keptOwner, values, mask) }
        return (kept, keptOwner, [], 0)
    }

    /// For an object holding a kept record: whether the record's values all fit their
    /// properties' required kinds (``KeptValues/fitsRequiredKinds``), and the mask of the
    /// slots written over it; nil when it holds none. (Read without retaining the record's
    /// holder or the written values, as ``writtenOverKept`` does: validation asks every
    /// changed object.)
    var keptFitAndWrittenMask: (fitsRequiredKinds: Bool, written: UInt64)? {
        guard let kept else { return nil }
        if case .written(_, let mask) = side { return (kept.fitsRequiredKinds, mask) }
        return (kept.fitsRequiredKinds, 0)
    }

    /// ``currentValue(at:)`` of an object with values written over its kept record (out
    /// of line: the common read, of a record nothing was written over, stays short).
    @inline(never) private func writtenOrKeptValue(at slot: Int) -> Value {
        if case .written(let values, let mask) = side, slot >= 0, slot < 64, mask & (1 << UInt64(slot)) != 0 {
            return values[(mask & ((1 << UInt64(slot)) &- 1)).nonzeroBitCount]
        }
        return kept?.value(at: slot) ?? .null
    }

    /// Writes `value` over slot `slot` of the kept record (which must be held, with at most
    /// 64 values), leaving the record undecoded.
    private func writeOverKept(_ value: Value, at slot: Int) {
        let bit: UInt64 = 1 << UInt64(slot)
        var values: [Value] = []
        var mask: UInt64 = 0
        if case .written(let held, let heldMask) = side {
            side = .none  // (`values` then the array's only holder: changed in place)
            values = held
            mask = heldMask
        }
        let index = (mask & (bit &- 1)).nonzeroBitCount
        if mask & bit != 0 {
            values[index] = value
        } else {
            values.insert(value, at: index)
            mask |= bit
        }
        side = .written(values, mask: mask)
    }
    /// Transient values and observation (see ``ObjectExtras``); nil for most objects.
    @exclusivity(unchecked) @usableFromInline final var extras: ObjectExtras?
    /// True until the values are loaded.
    @exclusivity(unchecked) public internal(set) var isFault = false
    /// False once deleted in its context. A change lets go of the lists of related objects
    /// its context keeps (``Context/relatedListsChanged()``): a list read leaves out targets
    /// that do not exist.
    var exists: Bool {
        get { existsFlag }
        set {
            guard newValue != existsFlag else { return }
            existsFlag = newValue
            context?.relatedListsChanged()
        }
    }
    @exclusivity(unchecked) private var existsFlag = true

    /// Marks a fault whose record was found gone: loaded with the defaults, neither existing
    /// nor in the store.
    func markGone() {
        isFault = false
        values = layout.defaults
        exists = false
        inStore = false
    }

    /// Sets ``exists`` of an object being inserted, under its new ID: no list holds the ID,
    /// so no kept list changes.
    func setExistsOnInsert(_ value: Bool) { existsFlag = value }
    /// Whether the record exists in the parent store (fetched, or saved).
    @exclusivity(unchecked) var inStore = false
    /// Whether the initial values made for each object (``DefaultMaker``) are still to be
    /// made: they are made when the new object is first read, written or inserted, and
    /// never for an object whose values are all set at once (a fetched fault, the parent's
    /// copy of a child's insert), which would throw them away.
    @exclusivity(unchecked) private var madeDefaultsPending = false
    /// Advances on every change to the values: a list of related objects the context keeps
    /// for this object stands while it has not moved (``Context/keptList(_:slot:)``). (In
    /// the four bytes after the flags that the layout left unused. It wraps after 2³²
    /// changes; a kept list would be taken for current only if the object changed exactly
    /// a multiple of that many times between two reads of it.)
    @exclusivity(unchecked) private(set) var valuesStamp: UInt32 = 0
    /// The entity, with its stored number once the object is registered.
    @exclusivity(unchecked) public internal(set) var entity: EntityDescription
    /// The context the object belongs to, if any (nil once that context is gone).
    public internal(set) var context: Context? {
        get { link?.context }
        set { link = newValue?.link }
    }
    /// Its context's link (see ``ContextLink``), which outlives the context; nil for an
    /// object in no context.
    @exclusivity(unchecked) private var link: ContextLink?

    /// Calls `body` with the object's context, if it has one that is alive, without
    /// retaining it (see ``ContextLink/withContext(_:)``).
    @inline(__always) func withContext<T>(_ body: (Context) throws -> T) rethrows -> T? {
        guard let link else { return nil }
        return try link.withContext(body)
    }

    /// Whether the object belongs to `context` (`self.context === context`), without
    /// loading the context.
    @inline(__always) func belongs(to context: Context) -> Bool { link === context.link }
    /// The record's ID (0 until the object is inserted into a context). Kept alone, as 8
    /// bytes: ``objectID`` adds the entity's name, which each object would otherwise keep a
    /// copy of.
    @exclusivity(unchecked) var recordID: RecordID

    /// Current values, attributes then relationships (empty while a fault). A write of
    /// one value goes through ``setValue(_:at:)``; assigning the whole array keeps
    /// ``base`` as it was.
    var values: [Value] {
        _read { yield storedValues }
        set { replaceValues(with: newValue) }
    }
    /// What ``base`` is, kept as the difference from `values` (see ``SavedValues``).
    @exclusivity(unchecked) private var saved = SavedValues.none
    /// The record version `base` was read at (optimistic locking).
    @exclusivity(unchecked) var baseVersion: UInt64 = 0
    /// The fetch batch this fault loads with (see ``FetchQuery/fetchBatchSize``).
    @exclusivity(unchecked) var faultBatch: FaultBatch?
    /// What an object holds beside its values, in one field: a fault never has values
    /// written, and a loaded object no row of its fetch's waiting.
    enum Side {
        case none
        /// For a fault: the row its fetch already read, its values (empty when the row
        /// waits in `kept`) and its version.
        case prefetched([Value], version: UInt64)
        /// For a loaded object holding a kept record: the values written over it since, in
        /// slot order, and their slots as a mask (bit `i` for slot `i`). Reads take a
        /// written value before the record's, and a save encodes the record with them
        /// (``writtenOverKept``), so a write decodes nothing.
        case written([Value], mask: UInt64)
    }
    @exclusivity(unchecked) private var side = Side.none

    /// For a fault: the row its fetch already read, and its version.
    private var prefetchedRow: (values: [Value], version: UInt64)? {
        if case .prefetched(let values, let version) = side { return (values, version) }
        return nil
    }

    /// Gives a fault the row its fetch read at `version`, so that firing it needs no second
    /// read. A kept row waits in `kept`, which a fault does not read otherwise. (A loaded
    /// object keeps its own values: nothing to do.)
    func prefetch(_ row: StoredRow, version: UInt64) {
        guard isFault else { return }
        dropPrefetched()
        switch row {
        case .decoded(let values): side = .prefetched(values, version: version)
        case .kept(let record):
            side = .prefetched([], version: version)
            kept = record.values
            keptOwner = record.owner
        }
    }

    /// Lets go of the row a fetch read for this fault: the record changed elsewhere, or the
    /// fault is to read another state.
    func dropPrefetched() {
        if case .prefetched = side { side = .none }
        if isFault, kept != nil { letGoOfKept() }
    }

    /// The version of the row a fetch read for this fault, if it holds one.
    var prefetchedVersion: UInt64? { prefetchedRow?.version }
    /// Relationships set before the object was inserted into a context (with the extras:
    /// few objects have any).
    var detachedRelations: [Int: [ManagedObject]] {
        get { extras?.detachedRelations ?? [:] }
        set {
            guard extras != nil || !newValue.isEmpty else { return }
            let extras = self.extras ?? ObjectExtras()
            self.extras = extras
            extras.detachedRelations = newValue
        }
    }

    /// A new object not yet in any context (insert it, or use ``init(context:)``).
    public required init() {
        let type = type(of: self)
        // The cached layout first: the per-thread "prototype under construction" check
        // (a thread-dictionary lookup, microseconds) is needed only before it exists.
        let layout = PropertyLayout.cached(type)
            ?? (PrototypeBuilder.isBuilding(type) ? PropertyLayout.placeholder : PropertyLayout.of(type))
        self.layout = layout
        entity = layout.entity
        decodedValues = layout.defaults
        recordID = RecordID(rawValue: 0)
        madeDefaultsPending = !layout.madeDefaults.isEmpty
    }

    /// Evaluates the initial values made for each object (`@Attribute var id = UUID()`:
    /// ``DefaultMaker``) into their slots.
    private func makeDefaults() {
        madeDefaultsPending = false
        valuesStamp &+= 1
        for (slot, maker) in layout.madeDefaults where slot < storedValues.count { storedValues[slot] = maker.make() }
    }

    /// Leaves the initial values made for each object unmade: for a new object that takes
    /// all its values from elsewhere (the parent's copy of a child's insert).
    func skipMadeDefaults() { madeDefaultsPending = false }

    /// Makes the initial values made for each object, if they are still to be made: before
    /// a new object is first read, written or inserted.
    @inline(__always)
    func makeDefaultsIfPending() {
        if madeDefaultsPending { makeDefaults() }
    }

    /// An object of a run-time entity (the dynamic API); see ``Context/insertObject(entityName:)``.
    convenience init(dynamic entity: EntityDescription, layout: PropertyLayout? = nil) {
        self.init()
        self.layout = layout ?? PropertyLayout(entity: entity)
        self.entity = entity
        values = self.layout.defaults
    }

    /// Creates the object and inserts it into `context`.
    public convenience init(context: Context) {
        self.init()
        context.insert(self)
    }

    /// The object's permanent ID (a placeholder until it is inserted into a context).
    public var objectID: ObjectID { ObjectID(recordID: recordID, entityName: entity.name) }

    // MARK: State

    /// Whether the object was inserted into its context and the insert is not yet saved.
    public var isInserted: Bool { context != nil && exists && !inStore }
    /// Whether the object's record was deleted in its context and the deletion is not yet saved.
    public var isDeleted: Bool { context != nil && !exists && inStore }
    /// Whether the object stands for a record but is in no context any more: its context
    /// was reset or released, its deletion was saved, another context's delete was merged,
    /// or a rollback took back its insert. Its properties read as they last were (its
    /// relationships as empty); writes to it change nothing. Look the record up again by
    /// its ``objectID`` in a context. (Core Data raises on such an object; a Swift property
    /// cannot throw.) A new object not yet inserted, or one whose context went before it
    /// was saved, is not invalidated: it can be inserted.
    public var isInvalidated: Bool {
        recordID.rawValue != 0 && context == nil && (inStore || !exists) && link !== ContextLink.batchHolder
    }

    /// Marks the object a batch operation hands its closure, holding each record in turn in
    /// no context (``Context/batchUpdate(_:durability:_:)``): it is never invalidated. (A
    /// link no context has, in the field that would otherwise hold nil: no field added to
    /// every object.)
    func holdBatchRecords() { link = ContextLink.batchHolder }
    /// Whether the object was in a context that is gone (released), not detached from it.
    var hadContext: Bool {
        guard let link, link !== ContextLink.batchHolder else { return false }
        return !link.isAlive
    }
    /// Whether the object has unsaved changes in its context: to what it stores, or to a
    /// ``Transient`` property.
    public var hasChanges: Bool {
        guard context != nil else { return false }
        return hasUnsavedChanges || hasTransientChanges
    }

    /// ``isInserted`` for an object known to be in a context (its changed set): no weak load.
    var isNewHere: Bool { exists && !inStore }
    /// ``isDeleted`` for an object known to be in a context (its changed set): no weak load.
    var isDeletedHere: Bool { !exists && inStore }

    /// ``hasChanges`` for an object known to be in a context (its dirty set): no weak load.
    var hasUnsavedChanges: Bool {
        if exists != inStore { return true }  // inserted, or deleted
        if !exists { return false }  // inserted and deleted again: nothing to save
        guard !isFault else { return false }
        switch saved {
        case .none: return false
        case .except(let originals): return originals.contains { !Value.same($0.value, currentValue(at: $0.slot)) }
        case .whole(let base): return !Value.sameValues(base, storedValues)
        }
    }

    // MARK: Saved values

    /// Values as last read from (or saved to) the parent store; nil for a new object.
    /// Made from `values` and the originals of the slots written since, on each read.
    var base: [Value]? {
        get {
            switch saved {
            case .none: return nil
            case .whole(let base): return base
            case .except(let originals): return restoring(originals)
            }
        }
        set { saved = newValue.map { SavedValues(base: $0, values: storedValues) } ?? .none }
    }

    /// Whether a save of this stored object may take it out of a partner's relationship:
    /// it is deleted here, or a relationship of it was written since it was read.
    var mayHaveLetGo: Bool {
        guard inStore else { return false }
        guard exists else { return true }
        let attributes = entity.attributes.count
        switch saved {
        case .none: return false
        case .except(let originals): return originals.contains { $0.slot >= attributes }
        case .whole: return true
        }
    }

    /// The value in `slot` as last read from (or saved to) the parent store (nil for a new
    /// object, which has none).
    func savedValue(at slot: Int) -> Value? {
        guard slot < valueCount else { return nil }
        switch saved {
        case .none: return nil
        case .except(let originals): return originals.first(where: { $0.slot == slot })?.value ?? currentValue(at: slot)
        case .whole(let base): return slot < base.count ? base[slot] : nil
        }
    }

    /// Whether the value in `slot` is the one last read from (or saved to) the parent store.
    func savedValueUnchanged(at slot: Int) -> Bool {
        guard slot < valueCount else { return false }
        switch saved {
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
        if case .except(var originals) = saved, !originals.contains(where: { $0.slot == slot }) {
            let original = SavedValue(slot: slot, value: currentValue(at: slot))
            if originals.isEmpty {
                // An object's first write since a read or save (most objects get one): a list
                // made whole, not grown from the empty one through the library's generic
                // reallocation.
                saved = .except([original])
            } else {
                saved = .none  // `originals` is then the list's only holder: appended in place
                originals.append(original)
                saved = .except(originals)
            }
        }
        if let kept, slot < kept.count, kept.count <= 64 {
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
        if case .except(let noted) = saved, !noted.contains(where: { $0.slot == slot }) { originals = noted }
        // Without an original to keep, the slot lets go of the list while it is edited, so
        // `list` is its storage's only holder and changes it in place.
        if originals == nil { storedValues[slot] = .null }
        let changed = edit(&list)
        if var originals, changed {
            saved = .none  // (`originals` is then the list's only holder: appended in place)
            originals.append(SavedValue(slot: slot, value: storedValues[slot]))
            saved = .except(originals)
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
        side = .none
        if kept != nil {
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
            side = .none  // (what was written over another record held before, or a fetch's row)
            kept = record.values
            keptOwner = record.owner
            setLoadedKept()
        }
    }

    /// ``setLoaded(_:)-([Value])`` of the record in `kept`, left undecoded there.
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
        saved = .except([])
    }

    /// Loads a stored record into the object in place, reusing its values' storage,
    /// as its values and saved ones: a batch update's one object holds each record in turn
    /// (``Context/batchUpdate(_:durability:_:)``) and allocates no array for each.
    func setLoaded(decoding record: borrowing StoredRecord, id: RecordID, entity: EntityDescription) throws {
        madeDefaultsPending = false
        saved = .except([])
        valuesStamp &+= 1
        try record.decode(into: &storedValues)
        try Store.checkRecord(storedValues, id: id, entity: entity)
    }

    /// Puts the entity's default values back, as a new object has them, reusing the
    /// values' storage where it can: a batch insert's one object holds each new record in
    /// turn (``Context/batchInsert(_:from:durability:_:)``).
    func setDefaults() {
        saved = .none
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
    func markSaved() { saved = .except([]) }

    /// The slots whose values differ from the saved ones as a mask (nil when there is no
    /// list of written slots to read it from: a new object, or more than 64 values).
    var changedSlotMask: UInt64? {
        guard case .except(let originals) = saved, valueCount <= 64 else { return nil }
        var mask: UInt64 = 0
        for original in originals where !Value.same(original.value, currentValue(at: original.slot)) {
            mask |= 1 << UInt64(original.slot)
        }
        return mask
    }

    private func replaceValues(with values: [Value]) {
        // Observers hear of values replaced, not of a fault's first values.
        if !storedValues.isEmpty, let extras, extras.isObserved {
            return extras.changing(self, slot: nil) { storeValues(values) }
        }
        storeValues(values)
    }

    private func storeValues(_ values: [Value]) {
        madeDefaultsPending = false  // all set at once: nothing is left to make
        valuesStamp &+= 1
        guard case .except(let originals) = saved else {
            storedValues = values  // no saved values, or kept whole: unchanged either way
            return
        }
        let base = restoring(originals)
        storedValues = values
        saved = SavedValues(base: base, values: values)
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
        switch saved {
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

    // MARK: Validation hooks

    /// Called on save for a new object; throw to refuse the save.
    open func validateForInsert() throws {}
    /// Called on save for a changed object; throw to refuse the save.
    open func validateForUpdate() throws {}
    /// Called on save for a deleted object; throw to refuse the save.
    open func validateForDelete() throws {}

    // MARK: Slots (used by the property wrappers)

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
        if let kept {
            if case .written = side { return writtenOrKeptValue(at: slot) }
            return kept.value(at: slot)
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

    open var description: String {
        makeDefaultsIfPending()
        let state = isFault ? "fault" : layout.names.indices.map { "\(layout.names[$0]): \(values[$0])" }.joined(separator: ", ")
        return "<\(entity.name) \(objectID.recordID) \(state)>"
    }
}

extension ManagedObject: Hashable {
    public static func == (a: ManagedObject, b: ManagedObject) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

@available(*, unavailable, message: "managed objects are confined to their context; pass objectID instead")
extension ManagedObject: Sendable {}
