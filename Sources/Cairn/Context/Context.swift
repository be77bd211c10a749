import CairnCollections
import CairnStorage
import Foundation
import Synchronization

/// A scratchpad of managed objects: identity map, faulting, change tracking, undo and
/// redo, save and rollback.
///
/// A context is confined to one isolation: create and use it on the main actor, or
/// inside a ``BackgroundContext``'s `perform`. Objects never leave it; object IDs do.
/// A child context (``init(parent:)``) reads through its parent and saves into it;
/// nothing reaches disk until the root context saves.
public final class Context {
    /// The coordinator of the store the context reads and saves through (a child's is its
    /// parent's).
    public let coordinator: Coordinator
    /// The model whose classes the context makes its objects of (a child's is its parent's).
    public let model: Model
    /// The parent, for a child (scratch) context.
    public let parent: Context?
    /// How a save resolves objects changed here that other saves changed since this context
    /// read them (see ``MergePolicy``): `.error` unless set; a child starts with its parent's.
    public var mergePolicy: MergePolicy = .error
    /// Undo and redo of every change; set `levelsLimit`, or disable with `isEnabled`.
    public let undoManager = UndoStack()
    /// A name for debugging.
    public var name: String?
    /// The author history records for this context's saves and batches (Core Data's
    /// `transactionAuthor`), in a store that keeps history (``Container/history(after:)``):
    /// a name per process, device or feature, so that a change feed can tell its own
    /// writes from others'. Nil: none.
    public var transactionAuthor: String?
    /// This context's number, never reused in the process.
    let serial = Context.serials.wrappingAdd(1, ordering: .relaxed).newValue
    private static let serials = Atomic<UInt64>(0)
    /// What its objects keep of it (see ``ContextLink``).
    let link = ContextLink()

    // A context's tables are touched only on its isolation, by Cairn's own code: no
    // dynamic exclusivity checks (a runtime call on every access of the hot paths).
    @exclusivity(unchecked) var registered = IDMap<RecordID, ManagedObject>()
    /// Whether a transient property of an object in ``dirty`` changed since the last save.
    @exclusivity(unchecked) var hasTransientChanges = false
    /// Objects changed (inserted, updated, deleted) since the last save.
    @exclusivity(unchecked) var dirty = IDMap<RecordID, ManagedObject>() {
        didSet {
            changeGeneration &+= 1
            lastWritten = nil
        }
    }
    /// The object the last write found or put in ``dirty``, while `dirty` has not changed
    /// since: a run of writes to one object (setting its properties one after another)
    /// looks it up once, not once per write. (`dirty` holds the object meanwhile, so its
    /// identifier is not reused.)
    @exclusivity(unchecked) var lastWritten: ObjectIdentifier?
    /// ``dirty`` in ID order, as the last walk in that order found it, while it has not
    /// changed since (see ``forEachChangedInIDOrder(_:_:)``).
    @exclusivity(unchecked) var changedInIDOrder: ChangedOrder?
    /// The layouts of run-time entities' objects, one per entity, made once rather than
    /// for each object.
    @exclusivity(unchecked) private var dynamicLayouts: [UInt16: PropertyLayout] = [:]

    /// A new object of `entity`, which has no class in the model.
    func dynamicObject(_ entity: EntityDescription) -> ManagedObject {
        if let layout = dynamicLayouts[entity.number], layout.entity == entity {
            return ManagedObject(dynamic: entity, layout: layout)
        }
        let object = ManagedObject(dynamic: entity)
        dynamicLayouts[entity.number] = object.layout
        return object
    }
    /// Advances on every change to an object's values or to ``dirty`` (writes, a refresh by
    /// another context's save, values a merge policy sets): a save that ran user code
    /// (validation hooks) sees whether that code changed anything, and the pending lookup
    /// whether a change passed its journal by.
    @exclusivity(unchecked) var changeGeneration = 0
    /// Advances on every rollback, reset and refresh, and when an upsert renames an object:
    /// live results here and in child contexts compare it (objects may have left the
    /// context, changed what a child reads, or taken another record's ID, without a change
    /// to a record or to ``dirty`` they could see).
    @exclusivity(unchecked) var resetGeneration = 0 {
        didSet { relatedListsChanged() }
    }
    /// Long lists of related objects as last read, so that reading one again, or adding to
    /// it, does not look up every target (see ``keptList(_:slot:)``).
    @exclusivity(unchecked) var relatedLists: [RelatedListKey: RelatedList] = [:]
    /// Advances whenever ``relatedLists`` is let go of.
    @exclusivity(unchecked) var relatedListsEpoch: UInt64 = 0
    /// The changed objects of one entity by one attribute's value, for fetches by an
    /// indexed value before a save (see ``PendingLookup``).
    @exclusivity(unchecked) var pendingLookup: PendingLookup?
    /// How many fetches the pending lookup answered (for tests).
    @exclusivity(unchecked) var lookupAnswers = 0
    /// The class last inserted and its entity as the coordinator describes it.
    @exclusivity(unchecked) private var lastInserted: (layout: PropertyLayout, entity: EntityDescription)?
    let inbox = Inbox()
    /// Where fetches keep the records of the faults they make, undecoded (see ``RecordArena``).
    let keptRecords = RecordArena()
    /// The query generation this context reads at, if pinned (``setQueryGenerationFrom(_:)``).
    @exclusivity(unchecked) var pinnedGeneration: QueryGenerationToken?
    @exclusivity(unchecked) var deferredErrors: [CairnError] = []
    @exclusivity(unchecked) var refusedWrites: [CairnError] = []
    /// The undo stacks this context keeps in the store, if it does (``keepUndo(named:)``).
    @exclusivity(unchecked) var keptUndo: KeptUndo?
    /// During a save: records deleted elsewhere that a merge policy inserts again, with the
    /// version the delete left (their insert expects it: another context may have brought
    /// them back first).
    @exclusivity(unchecked) var reinserted: [RecordID: UInt64] = [:]
    /// During a save: objects left as the store has them whose values a conflict's repair
    /// made their partners agree with, and the version it read. The commit expects those
    /// versions too, and a later conflict repairs them again (see ``resolveConflicts(in:)``).
    @exclusivity(unchecked) var repairReads: [(object: ManagedObject, former: [[UInt64]], version: UInt64)] = []
    /// Called (on this context's isolation) after external changes were merged in.
    public var onExternalChanges: ((ChangeSet) -> Void)?
    /// Called (on this context's isolation) after each save of this context, into the
    /// store or the parent, with what it saved: the did-save notification (see
    /// ``saveChanges()`` and ``saves`` for the other forms).
    public var onDidSave: ((ChangeSet) -> Void)?
    /// Whether the context takes in other saves by itself (Core Data's
    /// `automaticallyMergesChangesFromParent`): unchanged objects take the new values,
    /// deleted ones leave, changed ones take in what does not clash, and observers hear of
    /// the properties that changed. The container's main context and a
    /// ``BackgroundContext`` take them in as they happen, on their own executor (see
    /// <doc:SavesReachTheUI>), as do their children; another context at its next fetch,
    /// lookup or count. For a root context, the saves of other contexts on the store; on
    /// by default. For a child, what its parent saves and what its siblings save into the
    /// parent; off by default.
    ///
    /// Off, the context keeps a stable snapshot: its loaded objects keep the values they
    /// were read with, and its live results stay as they are, until it calls
    /// ``processExternalChanges()``, saves (a save takes in other saves first, so that
    /// merge policies see them), or refreshes an object. A fetch still finds the records
    /// the store holds now, and a fault fired later reads the store as it is then; for one
    /// state throughout, pin a query generation (``setQueryGenerationFrom(_:)``). A root
    /// context holds the other saves' change sets (their IDs and changed keys) until it
    /// takes them in.
    public var automaticallyMergesChangesFromParent: Bool
    /// Whether the objects this context registers from now on are observable (Observation's
    /// `Observable`): a SwiftUI view, `withObservationTracking` or `Observations` that reads
    /// a property of one is told when it changes, whatever changed it (a set, an inverse,
    /// undo, a merge of another save, a rollback). Off by default, on for the main context
    /// of a ``Container`` and a ``DataService``: each observable object carries a registrar
    /// (three allocations), which a context that only computes or imports does not need.
    /// (Read for every fault made, on the context's isolation: not checked at run time.)
    @exclusivity(unchecked) public var observesObjects = false
    /// Whether this context or an ancestor keeps a stable snapshot and holds other saves
    /// it has not taken in.
    var holdsUnmergedChanges: Bool {
        var level: Context? = self
        while let context = level {
            if !context.automaticallyMergesChangesFromParent && context.inbox.hasPending { return true }
            level = context.parent
        }
        return false
    }
    /// The executor the context takes in other saves on as they happen
    /// (``mergeAutomatically(on:)``), or nil: at its next use.
    var mergeExecutor: (any Actor)?
    /// Takes in other saves now if the context merges them automatically.
    func mergeExternalChangesIfAutomatic() {
        if automaticallyMergesChangesFromParent && pinnedGeneration == nil { processExternalChanges() }
    }
    /// This context's children, to tell those that merge of its saves.
    var children: [WeakContext] = []
    /// The observable record of saves, once asked for (see ``saves``).
    var saveActivity: SaveActivity?
    /// The streams handed out by ``saveChanges()``.
    var saveContinuations: [AsyncStream<ChangeSet>.Continuation] = []
    /// Live results and other observers of this context's changes.
    var changeObservers: [UUID: () -> Void] = [:]
    /// How a fetch's full scan may split: into up to `threads` runs of at least
    /// `minimumPerRun` records, tested at once (tests set smaller ones).
    var scanSplit = (threads: Processors.count, minimumPerRun: 8_192)

    deinit {
        // First: its objects find no context from now on.
        link.detach()
        for continuation in saveContinuations { continuation.finish() }
    }

    /// A root context on a coordinator.
    public init(coordinator: Coordinator, model: Model) {
        self.coordinator = coordinator
        self.model = model
        parent = nil
        automaticallyMergesChangesFromParent = true
        link.attach(self)
        coordinator.subscribe(inbox)
    }

    /// A child context: reads see the parent's unsaved changes; `save()` pushes into the
    /// parent. Use it in the parent's isolation.
    public init(parent: Context) {
        coordinator = parent.coordinator
        model = parent.model
        self.parent = parent
        automaticallyMergesChangesFromParent = false
        mergePolicy = parent.mergePolicy
        link.attach(self)
        parent.children.removeAll { $0.context == nil }
        parent.children.append(WeakContext(context: self))
        if let executor = parent.mergeExecutor { mergeAutomatically(on: executor) }
    }

    // MARK: Inserting and finding objects

    /// Inserts a new object (gives it a permanent ID). Inserting twice does nothing.
    public func insert(_ object: ManagedObject) {
        insert(object, as: nil)
    }

    /// ``insert(_:)``, with the ID `reserved` (from ``Store/reserveSerials(_:)``) instead of a new one.
    private func insert(_ object: ManagedObject, as reserved: RecordID?) {
        if object.belongs(to: self) { return }
        if object.context != nil {
            recordRefusedWrite(CairnError(.invalidArgument, "\(object.entity.name) \(object.objectID) belongs to another context"))
            return
        }
        // An object that left a context deleted (there or elsewhere, or rolled back), or that
        // stands for a stored record, is no new object: inserting it made a new record of
        // whatever it held (nothing, for a fault). (An unsaved insert whose context is gone is.)
        if object.recordID.rawValue != 0 && (!object.exists || object.inStore) {
            recordRefusedWrite(CairnError(.invalidArgument, object.exists
                ? "cannot insert \(object.entity.name) \(object.recordID): it stands for a stored record (look it up in this context with existingObject)"
                : "cannot insert \(object.entity.name) \(object.recordID): it was deleted (here, elsewhere, or by a rollback)"))
            return
        }
        guard let stored = storedEntity(for: object) else {
            recordRefusedWrite(CairnError(.invalidArgument, "entity \(object.entity.name) is not in the model"))
            return
        }
        do {
            if let reserved {
                guard reserved.entity == stored.number, registered[reserved] == nil else {
                    throw CairnError(.invalidArgument, "cannot insert \(object.entity.name) as \(reserved): the ID is taken or of another entity")
                }
                object.recordID = reserved
            } else {
                object.recordID = try coordinator.allocateID(entity: stored.number)
            }
        } catch let error as CairnError {
            recordRefusedWrite(error)
            return
        } catch {
            return
        }
        object.makeDefaultsIfPending()
        if !object.layout.derivations.isEmpty { object.applyDerivations() }
        if observesObjects { object.makeObservable() }
        object.entity = stored
        object.context = self
        object.inStore = false
        object.setExistsOnInsert(false)
        object.isFault = false
        registered[object.recordID] = object
        undoManager.withGroup(in: self) {
            undoManager.record(object, in: self)
            object.setExistsOnInsert(true)
            let before = changeGeneration
            dirty[object.recordID] = object
            noteForLookup(object, since: before)
            lastWritten = ObjectIdentifier(object)
        }
        // The object's own values now, copied value by value: its first write would
        // otherwise copy the shared defaults through the generic value witnesses. (After
        // the undo record, which keeps the values from before the insert: made before it,
        // the copy would be shared with the record, and the first write would copy it again.)
        object.values = Value.uniqueCopy(of: object.values)
        guard !object.detachedRelations.isEmpty else { return }
        let detached = object.detachedRelations
        object.detachedRelations = [:]
        for (slot, targets) in detached.sorted(by: { $0.key < $1.key }) { setRelationship(of: object, slot: slot, to: targets) }
    }

    /// The coordinator's description of an object's entity; the last class inserted is
    /// remembered (a run of inserts of one class looks its entity up by name once).
    private func storedEntity(for object: ManagedObject) -> EntityDescription? {
        if let last = lastInserted, last.layout === object.layout, last.entity.name == object.entity.name { return last.entity }
        guard let stored = coordinator.entity(named: object.entity.name) else { return nil }
        lastInserted = (object.layout, stored)
        return stored
    }

    /// Inserts a new object of an entity by name: an instance of its class, or a plain
    /// ``ManagedObject`` for a run-time entity.
    @discardableResult
    public func insertObject(entityName: String) throws -> ManagedObject {
        guard let entity = coordinator.entity(named: entityName) else {
            throw CairnError(.invalidArgument, "entity \(entityName) is not in the model")
        }
        let object = model.objectClass(for: entityName).map { $0.init() } ?? dynamicObject(entity)
        // Only an error this insert recorded is thrown here; one an earlier write left
        // stays for the next save or fetch (thrown here, it hid the object just inserted).
        let earlier = refusedWrites.count
        insert(object)
        if refusedWrites.count > earlier, let error = refusedWrites.popLast() { throw error }
        return object
    }

    /// ``insertObject(entityName:)`` with an ID reserved for it by ``Store/reserveSerials(_:)``
    /// (`cairn import` keeps the IDs of an export so).
    @discardableResult
    package func insertObject(entityName: String, reserved id: RecordID) throws -> ManagedObject {
        guard let entity = coordinator.entity(named: entityName) else {
            throw CairnError(.invalidArgument, "entity \(entityName) is not in the model")
        }
        let object = model.objectClass(for: entityName).map { $0.init() } ?? dynamicObject(entity)
        let earlier = refusedWrites.count
        insert(object, as: id)
        if refusedWrites.count > earlier, let error = refusedWrites.popLast() { throw error }
        return object
    }

    /// The object with `id`: the registered instance, or a fault that loads on first
    /// access. Does not check that the record exists (see ``existingObject(with:)``).
    public func object(with id: ObjectID) -> ManagedObject {
        mergeExternalChangesIfAutomatic()
        return object(for: id.recordID) ?? ManagedObject(dynamic: EntityDescription(name: id.entityName, number: 0))
    }

    /// The object with `id`, loaded; throws `.notFound` if it does not exist here.
    public func existingObject(with id: ObjectID) throws -> ManagedObject {
        mergeExternalChangesIfAutomatic()
        guard let object = object(for: id.recordID), try load(object), object.exists else {
            throw CairnError(.notFound, "no \(id.entityName) with ID \(id.recordID)")
        }
        return object
    }

    /// The typed object with `id`, loaded, or nil if it does not exist here.
    public func existingObject<T: ManagedObject>(_ type: T.Type, with id: ObjectID) throws -> T? {
        mergeExternalChangesIfAutomatic()
        guard let object = object(for: id.recordID) as? T, try load(object), object.exists else { return nil }
        return object
    }

    /// The registered object for `id`, or a new fault.
    func object(for id: RecordID) -> ManagedObject? {
        let found = registered.value(forKey: id) {
            guard let entity = coordinator.entity(number: id.entity) else { return nil }
            return makeFault(id, entity: entity, type: model.objectClass(for: entity.name))
        }
        // A fault that found no record, kept registered, stands for a record that exists now
        // (deleted, and saved again under its ID by another context's merge policy): a new
        // fault reads it. (The old one had made a delete rule skip it.)
        if let found, !found.exists, !found.inStore, parent == nil, !dirty.contains(id), coordinator.contains(id, at: readGeneration) {
            registered[id] = nil
            found.context = nil
            return object(for: id)
        }
        return found
    }

    /// The registered object for `id` of an entity already looked up (many at a time:
    /// a fetch resolves its entity and class once, not per object), or a new fault.
    func object(for id: RecordID, entity: EntityDescription, type: ManagedObject.Type?) -> ManagedObject {
        // (Never nil: the fault is always made.)
        registered.value(forKey: id) { makeFault(id, entity: entity, type: type) } ?? newFault(id, entity: entity, type: type)
    }

    /// A new fault for `id`, registered.
    func newFault(_ id: RecordID, entity: EntityDescription, type: ManagedObject.Type?) -> ManagedObject {
        let object = makeFault(id, entity: entity, type: type)
        registered[id] = object
        return object
    }

    /// A new fault for `id`, of this context but not yet registered.
    func makeFault(_ id: RecordID, entity: EntityDescription, type: ManagedObject.Type?) -> ManagedObject {
        let object: ManagedObject
        if let type { object = type.init() } else { object = dynamicObject(entity) }
        object.entity = entity
        object.recordID = id
        object.context = self
        object.becomeFault()
        if observesObjects { object.makeObservable() }
        return object
    }

    // MARK: Faults

    /// Loads a fault's values. Returns false if the record does not exist (any more).
    @discardableResult
    func load(_ object: ManagedObject) throws -> Bool {
        guard object.isFault else { return true }
        if let batch = object.faultBatch {
            // Every member lets go of the batch (one loaded apart meanwhile too: the batch
            // and its members would otherwise hold each other).
            for member in batch.objects { member.faultBatch = nil }
            if parent == nil {
                // The members with no row of their fetch's are read from the store together.
                var unread: [ManagedObject] = []
                for member in batch.objects where member.isFault && member.belongs(to: self) {
                    if !member.loadPrefetched() { unread.append(member) }
                }
                if !unread.isEmpty {
                    try coordinator.forEachRow(unread.map(\.recordID), at: readGeneration, keepingIn: keptRecords) { index, row in
                        unread[index].take(row)
                    }
                }
            } else {
                for member in batch.objects where member !== object && member.isFault && member.belongs(to: self) { try load(member) }
            }
            if !batch.prefetching.isEmpty {
                // (A record met that cannot be read is reported as a fault's would be, and
                // does not fail this load.)
                do {
                    if object.isFault, object.belongs(to: self) { try load(object) }
                    try prefetch(batch.prefetching, from: batch.objects.filter { $0.belongs(to: self) })
                } catch let error as CairnError { recordError(error) }
            }
            if !object.isFault { return object.exists }
        }
        if object.loadPrefetched() { return true }
        return object.take(try sourceRow(for: object.recordID))
    }

    /// Before any read of an object's value: fire a fault. External changes are not
    /// merged here, so a read-modify-write of a property never straddles a merge; they
    /// are merged at the context's next fetch, lookup or save.
    @inline(__always)
    func willRead(_ object: ManagedObject) {
        guard object.isFault else { return }
        fire(object)
    }

    private func fire(_ object: ManagedObject) {
        do { try load(object) } catch let error as CairnError { recordError(error) } catch {}
    }

    /// ``sourceValues(for:)`` for a fault to load: a record of the store kept undecoded
    /// where it can be (see ``RecordArena``).
    private func sourceRow(for id: RecordID) throws -> (row: StoredRow, version: UInt64)? {
        if let parent { return try parent.currentValues(for: id).map { (.decoded($0.values), $0.version) } }
        return try coordinator.getRow(id, at: readGeneration, keepingIn: keptRecords)
    }

    /// The values of `id` as this context's source sees them (parent, or store), with
    /// the record version.
    func sourceValues(for id: RecordID) throws -> (values: [Value], version: UInt64)? {
        if let parent { return try parent.currentValues(for: id) }
        return try coordinator.getVersioned(id, at: readGeneration).map { ($0.record.values, $0.version) }
    }

    /// The values of `id` as seen in this context, for a child reading through it.
    func currentValues(for id: RecordID) throws -> (values: [Value], version: UInt64)? {
        mergeExternalChangesIfAutomatic()
        if let object = registered[id] {
            guard try load(object), object.exists else { return nil }
            return (object.values, object.baseVersion)
        }
        return try sourceValues(for: id)
    }

    /// The IDs of an entity's objects as seen in this context: the source's, less
    /// deleted ones, plus inserted ones, and changed ones the source no longer has (deleted
    /// by another context's save, kept here with their changes, as this context's own
    /// fetch finds them).
    func currentIDs(entity: UInt16) -> [RecordID] {
        mergeExternalChangesIfAutomatic()
        var ids = parent?.currentIDs(entity: entity) ?? coordinator.ids(entity: entity, at: readGeneration)
        var removed = Set<RecordID>(), added: [RecordID] = []
        for (id, object) in dirty where id.entity == entity {
            if !object.exists && object.inStore { removed.insert(id) }
            if object.exists && (!object.inStore || !Self.sortedContains(ids, id)) { added.append(id) }
        }
        if !removed.isEmpty { ids.removeAll { removed.contains($0) } }
        if !added.isEmpty { ids = Self.merged(ids, added.sorted()) }
        return ids
    }

    /// Whether the ascending list `ids` holds `id`.
    static func sortedContains(_ ids: [RecordID], _ id: RecordID) -> Bool {
        let index = ids.partitionPoint { $0 >= id }
        return index < ids.count && ids[index] == id
    }

    /// Two ascending lists of IDs as one, each ID once: a merge of the few added into the
    /// many, not all of them hashed into a set and sorted again whenever one is added.
    static func merged(_ ids: [RecordID], _ added: [RecordID]) -> [RecordID] {
        var result: [RecordID] = []
        result.reserveCapacity(ids.count + added.count)
        var i = 0, j = 0
        while i < ids.count, j < added.count {
            if ids[i] < added[j] {
                result.append(ids[i]); i += 1
            } else if added[j] < ids[i] {
                result.append(added[j]); j += 1
            } else {
                result.append(ids[i]); i += 1; j += 1
            }
        }
        result.append(contentsOf: ids[i...])
        result.append(contentsOf: added[j...])
        return result
    }

    // MARK: Fetching (simple; the whole query in FetchQuery)

    /// The objects of a class in this context matching `predicate` (all, if nil), in the
    /// order of `sortBy` (ID order, if empty): ``fetch(_:)`` of a ``FetchQuery`` with them.
    public func fetch<T: ManagedObject>(_ type: T.Type, where predicate: Foundation.Predicate<T>? = nil,
                                        sortBy: [Foundation.SortDescriptor<T>] = []) throws -> [T] {
        guard predicate == nil, sortBy.isEmpty else { return try fetch(FetchQuery(type, predicate: predicate, sortBy: sortBy)) }
        return try fetch(type, filter: { _ in true })
    }

    /// Every object of a class in this context (unsaved inserts included, deletes
    /// excluded), in ID order, that `isIncluded` keeps: each object is made and tested
    /// (prefer a `#Predicate`, which runs on stored records).
    public func fetch<T: ManagedObject>(_ type: T.Type, filter isIncluded: (T) throws -> Bool) throws -> [T] {
        guard let entity = coordinator.entity(named: type.entityName) else {
            throw CairnError(.invalidArgument, "entity \(type.entityName) is not in the model")
        }
        return try fetchObjects(entity: entity).compactMap { object -> T? in
            guard let typed = object as? T else { return nil }
            return try isIncluded(typed) ? typed : nil
        }
    }

    /// Every object of an entity by name (the dynamic API), in ID order.
    public func fetchObjects(entityName: String) throws -> [ManagedObject] {
        guard let entity = coordinator.entity(named: entityName) else {
            throw CairnError(.invalidArgument, "entity \(entityName) is not in the model")
        }
        return try fetchObjects(entity: entity)
    }

    func fetchObjects(entity: EntityDescription) throws -> [ManagedObject] {
        try throwDeferredError()
        return currentIDs(entity: entity.number).compactMap { object(for: $0) }
    }

    /// The number of a class's objects in this context matching `predicate` (all, if nil).
    public func count<T: ManagedObject>(_ type: T.Type, where predicate: Foundation.Predicate<T>? = nil) throws -> Int {
        if let predicate { return try count(for: FetchQuery(type, predicate: predicate)) }
        guard let entity = coordinator.entity(named: type.entityName) else {
            throw CairnError(.invalidArgument, "entity \(type.entityName) is not in the model")
        }
        guard parent == nil else { return currentIDs(entity: entity.number).count }
        // The store's count and this context's inserts and deletes, without a list of every
        // ID to count.
        mergeExternalChangesIfAutomatic()
        var count = coordinator.count(entity: entity.number, at: readGeneration)
        for (id, object) in dirty where id.entity == entity.number {
            if object.exists && !object.inStore { count += 1 }
            if !object.exists && object.inStore && coordinator.contains(id, at: readGeneration) { count -= 1 }
        }
        return count
    }

    // MARK: State

    /// Whether anything is inserted, updated or deleted and not yet saved.
    public var hasChanges: Bool {
        mergeExternalChangesIfAutomatic()
        return dirty.values.contains { $0.hasChanges }
    }

    /// The objects inserted here and not yet saved.
    public var insertedObjects: Set<ManagedObject> { Set(dirty.values.filter(\.isInserted)) }
    /// The stored objects deleted here and not yet saved.
    public var deletedObjects: Set<ManagedObject> { Set(dirty.values.filter(\.isDeleted)) }
    /// The stored objects whose values changed here and are not yet saved (neither inserted
    /// nor deleted).
    public var updatedObjects: Set<ManagedObject> {
        Set(dirty.values.filter { object in
            object.exists && object.inStore && !object.isFault && (object.base.map { !Value.sameValues($0, object.values) } ?? true)
        })
    }
    /// Every object the context holds: fetched, looked up, inserted, and faults not yet loaded.
    public var registeredObjects: Set<ManagedObject> { Set(registered.values) }

    /// Errors of reads that cannot throw (a fault that fails to load on a property read,
    /// a live result's refresh) are kept and thrown by the next save or fetch.
    func recordError(_ error: CairnError) { deferredErrors.append(error) }

    /// A write that was refused where it could not throw (a setter: an unknown key, a
    /// deleted object, a value that does not archive, an insert that failed) is kept and
    /// thrown by the next save, so that no save succeeds without saying that a write it
    /// would have saved was lost. A fetch does not throw it; rollback and reset forget it.
    func recordRefusedWrite(_ error: CairnError) { refusedWrites.append(error) }

    func throwDeferredError() throws {
        guard let error = deferredErrors.first else { return }
        deferredErrors.removeAll()
        throw error
    }

    /// Throws the first write refused since the last save (and forgets them all: the save
    /// that throws has said so).
    func throwRefusedWrite() throws {
        guard let error = refusedWrites.first else { return }
        refusedWrites.removeAll()
        throw error
    }

    /// Discards every unsaved change and clears the undo stack. A changed object whose
    /// record another context saved since it was read (whose merge waited for its changes)
    /// becomes a fault: it reads what the store holds now, not the values it was read at.
    public func rollback() {
        resetGeneration &+= 1
        let store = parent == nil ? coordinator : nil
        hasTransientChanges = false
        for object in dirty.values {
            object.clearTransients()
            if !object.inStore {
                registered[object.recordID] = nil
                object.exists = false
                object.context = nil
            } else if let store, object.base != nil, store.version(of: object.recordID) != object.baseVersion {
                object.isFault = true
                object.values = []
                object.exists = true
            } else if let base = object.base {
                object.values = base
                object.exists = true
            } else {
                object.isFault = true
                object.values = []
                object.exists = true
            }
        }
        dirty = [:]
        deferredErrors = []
        refusedWrites = []
        undoManager.removeAllActions()
        processPendingChanges()  // live results follow
    }

    /// Forgets every object (registered objects are detached) and the undo stack.
    public func reset() {
        resetGeneration &+= 1
        for object in registered.values {
            object.context = nil
            object.dropPrefetched()
        }
        registered = [:]
        dirty = [:]
        hasTransientChanges = false
        deferredErrors = []
        refusedWrites = []
        undoManager.removeAllActions()
        processPendingChanges()  // live results fetch their objects again
    }

    /// Re-reads an object. With `mergeChanges: false` its unsaved changes are dropped
    /// and it becomes a fault; with `true` its changed keys are re-applied over the
    /// freshly read values.
    public func refresh(_ object: ManagedObject, mergeChanges: Bool) {
        guard object.belongs(to: self), object.inStore else { return }
        // A child reads this object's values as held here, changed or not: its live results
        // take a refresh as they take a reset.
        resetGeneration &+= 1
        let local = mergeChanges && !object.isFault ? object.changedKeyIndices.map { ($0, object.values[$0]) } : []
        let wasDeleted = !object.exists
        object.dropPrefetched()
        object.isFault = true
        object.values = []
        object.exists = true
        guard mergeChanges else {
            object.clearTransients()
            dirty[object.recordID] = nil
            return
        }
        willRead(object)
        for (index, value) in local where index < object.values.count { object.setValue(value, at: index) }
        if wasDeleted { object.exists = false }
        if object.hasChanges { dirty[object.recordID] = object } else { dirty[object.recordID] = nil }
    }
}

@available(*, unavailable, message: "a Context is confined to one isolation; pass object IDs between contexts")
extension Context: Sendable {}

extension ManagedObject {
    var changedKeyIndices: [Int] {
        guard let base else { return Array(values.indices) }
        return values.indices.filter { $0 < base.count && !Value.same(base[$0], values[$0]) }
    }
}

/// A context held weakly (a parent's list of its children).
struct WeakContext {
    weak var context: Context?
}

/// What an object keeps of its context: the context, not retained (an object does not
/// keep its context alive, and its context holds it), until the context's deinit lets go
/// of it. An object reaches its context through it with no weak reference: a weak load is
/// a runtime call on every write, and weak references give the context a side table that
/// slows every retain and release of it.
final class ContextLink: @unchecked Sendable {
    // @unchecked: `reference` is set by its context's init and cleared at the start of its
    // deinit; it is read on that context's isolation, where its objects are used, which
    // neither runs beside. (The batch holder's is never set.)
    /// The context, unretained: a caller that holds an object of it, on its isolation,
    /// where the context cannot go meanwhile, may use it without retaining it
    /// (``ManagedObject/withContext(_:)``).
    @exclusivity(unchecked) private(set) var reference = UnretainedReference<Context>()

    /// The link of no context that a batch operation's holder object keeps (see
    /// ``ManagedObject/holdBatchRecords()``).
    static let batchHolder = ContextLink()

    func attach(_ context: Context) { reference.set(context) }
    func detach() { reference.set(nil) }

    /// Whether its context is alive.
    var isAlive: Bool { reference.isSet }

    /// The context, retained for the caller, if it is alive.
    var context: Context? { reference.object }
}
