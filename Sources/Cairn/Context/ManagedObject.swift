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
    @exclusivity(unchecked) var decodedValues: [Value]
    /// The record a fetch read, kept undecoded, while no value but one that decodes in place
    /// has been read (``RecordArena``); its values are then decoded into `decodedValues` on
    /// their first use of another kind. Nil for most objects.
    @exclusivity(unchecked) var keptRecord: KeptValues?
    /// What holds the kept record's bytes, while `keptRecord` reads them.
    @exclusivity(unchecked) var keptOwner: RecordChunk?
    /// The values: the decoded ones, decoding a kept record first (so every use of the
    /// values but ``read(_:)`` sees them decoded).
    var storedValues: [Value] {
        _read {
            if keptRecord != nil { decodeKept() }
            yield decodedValues
        }
        set {
            if keptRecord != nil { letGoOfKept() }
            decodedValues = newValue
        }
        _modify {
            if keptRecord != nil { decodeKept() }
            yield &decodedValues
        }
    }

    /// The number of values, kept or decoded.
    var valueCount: Int { keptRecord?.count ?? decodedValues.count }

    /// Whether the values are a kept record not decoded yet (for tests).
    var holdsKeptRecord: Bool { keptRecord != nil }

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
        guard let record = keptRecord else { return nil }
        var values = withExtendedLifetime(keptOwner) { record.all() }
        if case .written(let written, let mask) = sideState {
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
        keptRecord = nil
        keptOwner = nil
        if case .written = sideState { sideState = .none }
    }

    /// The values written over the kept record, in slot order, and their slots as a mask
    /// (``Side/written(_:mask:)``); nil when the object holds no kept record.
    var writtenOverKept: (kept: KeptValues, owner: RecordChunk?, values: [Value], mask: UInt64)? {
        guard let keptRecord else { return nil }
        if case .written(let values, let mask) = sideState { return (keptRecord, keptOwner, values, mask) }
        return (keptRecord, keptOwner, [], 0)
    }

    /// For an object holding a kept record: whether the record's values all fit their
    /// properties' required kinds (``KeptValues/fitsRequiredKinds``), and the mask of the
    /// slots written over it; nil when it holds none. (Read without retaining the record's
    /// holder or the written values, as ``writtenOverKept`` does: validation asks every
    /// changed object.)
    var keptFitAndWrittenMask: (fitsRequiredKinds: Bool, written: UInt64)? {
        guard let keptRecord else { return nil }
        if case .written(_, let mask) = sideState { return (keptRecord.fitsRequiredKinds, mask) }
        return (keptRecord.fitsRequiredKinds, 0)
    }

    /// ``currentValue(at:)`` of an object with values written over its kept record (out
    /// of line: the common read, of a record nothing was written over, stays short).
    @inline(never) func writtenOrKeptValue(at slot: Int) -> Value {
        if case .written(let values, let mask) = sideState, slot >= 0, slot < 64, mask & (1 << UInt64(slot)) != 0 {
            return values[(mask & ((1 << UInt64(slot)) &- 1)).nonzeroBitCount]
        }
        return keptRecord?.value(at: slot) ?? .null
    }

    /// Writes `value` over slot `slot` of the kept record (which must be held, with at most
    /// 64 values), leaving the record undecoded.
    func writeOverKept(_ value: Value, at slot: Int) {
        let bit: UInt64 = 1 << UInt64(slot)
        var values: [Value] = []
        var mask: UInt64 = 0
        if case .written(let held, let heldMask) = sideState {
            sideState = .none  // (`values` then the array's only holder: changed in place)
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
        sideState = .written(values, mask: mask)
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

    /// Makes a new object, just made and in no list, a fault of its record: no values,
    /// none to make. (What setting `values` to none does, without the observation and
    /// saved-values bookkeeping a new object has no use for.)
    func becomeFault() {
        isFault = true
        inStore = true
        madeDefaultsPending = false
        decodedValues = []
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
    @exclusivity(unchecked) var madeDefaultsPending = false
    /// Advances on every change to the values: a list of related objects the context keeps
    /// for this object stands while it has not moved (``Context/keptList(_:slot:)``). (In
    /// the four bytes after the flags that the layout left unused. It wraps after 2³²
    /// changes; a kept list would be taken for current only if the object changed exactly
    /// a multiple of that many times between two reads of it.)
    @exclusivity(unchecked) var valuesStamp: UInt32 = 0
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
    /// retaining it: the caller holds this object, on the context's isolation, where the
    /// context cannot go meanwhile (see ``ContextLink/reference``).
    @inline(__always) func withContext<T>(_ body: (Context) throws -> T) rethrows -> T? {
        // (The reference is read out of the link, which is not held for the call: held, it
        // was retained and released around every property write, two atomic operations on
        // the one link all the context's objects share.)
        guard let reference = link?.reference else { return nil }
        return try reference.withObject(body)
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
    @exclusivity(unchecked) var savedState = SavedValues.none
    /// The undo group that recorded this object's whole state, while it is open
    /// (``UndoStack``'s serial of it): its later changes in that group record nothing.
    @exclusivity(unchecked) var undoWholeGroup: UInt64 = 0
    /// The record version `base` was read at (optimistic locking).
    @exclusivity(unchecked) var baseVersion: UInt64 = 0
    /// The fetch batch this fault loads with (see ``FetchQuery/fetchBatchSize``).
    @exclusivity(unchecked) var faultBatch: FaultBatch?
    /// What an object holds beside its values, in one field: a fault never has values
    /// written, and a loaded object no row of its fetch's waiting.
    enum Side {
        case none
        /// For a fault: the row its fetch already read, its values (empty when the row
        /// waits in `keptRecord`) and its version.
        case prefetched([Value], version: UInt64)
        /// For a loaded object holding a kept record: the values written over it since, in
        /// slot order, and their slots as a mask (bit `i` for slot `i`). Reads take a
        /// written value before the record's, and a save encodes the record with them
        /// (``writtenOverKept``), so a write decodes nothing.
        case written([Value], mask: UInt64)
    }
    @exclusivity(unchecked) var sideState = Side.none

    /// For a fault: the row its fetch already read, and its version.
    var prefetchedRow: (values: [Value], version: UInt64)? {
        if case .prefetched(let values, let version) = sideState { return (values, version) }
        return nil
    }

    /// Gives a fault the row its fetch read at `version`, so that firing it needs no second
    /// read. A kept row waits in `keptRecord`, which a fault does not read otherwise. (A loaded
    /// object keeps its own values: nothing to do.)
    func prefetch(_ row: StoredRow, version: UInt64) {
        guard isFault else { return }
        dropPrefetched()
        switch row {
        case .decoded(let values): sideState = .prefetched(values, version: version)
        case .kept(let record):
            sideState = .prefetched([], version: version)
            keptRecord = record.values
            keptOwner = record.owner
        }
    }

    /// Lets go of the row a fetch read for this fault: the record changed elsewhere, or the
    /// fault is to read another state.
    func dropPrefetched() {
        if case .prefetched = sideState { sideState = .none }
        if isFault, keptRecord != nil { letGoOfKept() }
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
    func makeDefaults() {
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
        switch savedState {
        case .none: return false
        case .except(let originals): return originals.contains { !Value.same($0.value, currentValue(at: $0.slot)) }
        case .whole(let base): return !Value.sameValues(base, storedValues)
        }
    }

    // MARK: Validation hooks

    /// Called on save for a new object; throw to refuse the save.
    open func validateForInsert() throws {}
    /// Called on save for a changed object; throw to refuse the save.
    open func validateForUpdate() throws {}
    /// Called on save for a deleted object; throw to refuse the save.
    open func validateForDelete() throws {}

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
