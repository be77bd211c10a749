import CairnStorage
/// Batch operations: change or delete every stored object a request matches in one store
/// transaction, as Core Data's batch update and delete requests do, without making an
/// object for each record or holding them all in memory at once.
extension Context {
    /// Deletes every object of the store that `request` matches, in one transaction, and
    /// returns how many it deleted. Other contexts hear of it as of any save. This one
    /// takes it in at once: its registered objects among the deleted are forgotten, unless
    /// they have unsaved changes (left, as for any other save, to the merge policy at
    /// save), and its live results are told; its ``onExternalChanges`` is not called.
    ///
    /// The request is run against the store: this context's unsaved changes are neither
    /// seen nor saved, and the deletion is not undoable. Objects' `validateForDelete()` is
    /// not called. A request with a fetch limit or offset is refused; sort descriptors are
    /// ignored. It runs on a root context (one without a parent).
    ///
    /// Records are deleted without being made objects when nothing needs one: the entity
    /// has no relationships, no relationship points at it, it has no uniqueness
    /// constraint, and the predicate can be tested on stored values (not a Swift
    /// `Predicate` that only objects can answer). Otherwise the objects are fetched into a
    /// private context and deleted there, with their delete rules, and that context saved.
    /// Either way the result is the same, and all or nothing.
    @discardableResult
    public func batchDelete<T: ManagedObject>(_ request: FetchQuery<T>, durability: Durability? = nil) throws -> Int {
        let entity = try batchEntity(of: request)
        guard batchNeedsNoObjects(entity, request) else {
            return try batchThroughObjects(request, durability: durability) { context, object in
                context.delete(object)
                return true
            }
        }
        return try retryingConflicts {
            var operations: [RecordOperation] = []
            var expected: [ExpectedVersion] = []
            try forEachStoredMatch(of: request, entity: entity) { id, version, _, _ in
                operations.append(.delete(id))
                expected.append(ExpectedVersion(id: id, version: version))
            }
            guard !operations.isEmpty else { return 0 }
            try commitBatch(operations, kind: .delete, id: { expected[$0].id }, expecting: expected, keys: [],
                            durability: durability)
            return operations.count
        }
    }

    /// Calls `change` with each object of the store that `request` matches and saves what
    /// it changed, in one transaction; returns how many objects it changed. Other contexts
    /// hear of it as of any save. This one takes it in at once: its registered objects
    /// among the changed are refreshed, unless they have unsaved changes (left, as for any
    /// other save, to the merge policy at save), and its live results are told; its
    /// ``onExternalChanges`` is not called.
    ///
    /// ```swift
    /// try context.batchUpdate(FetchQuery(Item.self, format: "price < 10")) { $0.price += 1 }
    /// ```
    ///
    /// The request is run against the store: this context's unsaved changes are neither
    /// seen nor saved, and the update is not undoable. The values `change` sets are
    /// checked as a save checks them, and `validateForUpdate()` is called on each changed
    /// object. If a concurrent save changes a matched record first, the batch starts over
    /// from the store's new state, so `change` may see a record more than once; it should
    /// change nothing but the object it is given. A request with a fetch limit or offset is
    /// refused; sort descriptors are ignored. It runs on a root context.
    ///
    /// When nothing needs a real object (as for ``batchDelete(_:durability:)``), `change`
    /// is given one object, not in any context, that holds each record in turn: it must
    /// not keep it, nor insert it anywhere (a kept object is replaced by a new one for the
    /// next record; an inserted one makes the batch fail). Otherwise it is given the
    /// objects of a private context, which is then saved.
    @discardableResult
    public func batchUpdate<T: ManagedObject>(_ request: FetchQuery<T>, durability: Durability? = nil,
                                              _ change: (T) throws -> Void) throws -> Int {
        let entity = try batchEntity(of: request)
        guard batchNeedsNoObjects(entity, request) else {
            return try batchThroughObjects(request, durability: durability) { _, object in
                try change(object)
                return object.hasChanges
            }
        }
        let holder = try batchHolderMaker(entity, as: T.self)
        return try retryingConflicts {
            var operations: [RecordOperation] = []
            var expected: [ExpectedVersion] = []
            var keys: [Coordinator.ChangedKeys] = []
            var preparer = coordinator.makePreparer()
            var object = try holder()
            try forEachStoredMatch(of: request, entity: entity) { id, version, record, decoded in
                // A holder the closure kept (whether or not it changed its record) is left
                // with that record: the next one gets a new holder.
                if !isKnownUniquelyReferenced(&object) { object = try holder() }
                object.recordID = id
                object.inStore = true
                object.exists = true
                object.isFault = false
                // (Decoded into the one holder's values, whose storage each record reuses: a
                // record kept instead, with the change written over it, measured slower here,
                // for the array of written values each record then allocates.)
                if let decoded { object.setLoaded(decoded) } else { try object.setLoaded(decoding: record, id: id, entity: entity) }
                try change(object)
                object.applyDerivations()
                guard object.context == nil else {
                    throw CairnError(.invalidArgument,
                                     "a batch update's closure inserted the object it was given (\(entity.name) \(id)) into a context")
                }
                // A record left as it was is not written (nor validated, nor counted).
                let stamp = object.valuesStamp
                let changedBefore = Self.changedKeys(of: object)
                guard !changedBefore.isEmpty else { return }
                try validate(object)
                // (Read again if a validation hook wrote: every write advances the stamp.)
                let changed = object.valuesStamp == stamp ? changedBefore : Self.changedKeys(of: object)
                guard !changed.isEmpty else { return }
                operations.append(try Self.put(object, id: id, preparer: &preparer))
                expected.append(ExpectedVersion(id: id, version: version))
                keys.append(changed)
            }
            guard !operations.isEmpty else { return 0 }
            try commitBatch(operations, kind: .update, id: { expected[$0].id }, expecting: expected, keys: keys,
                            durability: durability)
            return operations.count
        }
    }

    // The public forms are inlinable so that the loop over the elements is compiled for
    // their type where they are called, not stepped through the generic witnesses.
    //
    /// Inserts a new object into the store for each element of `elements`, filled in by
    /// `fill`, in one transaction; returns their IDs in the elements' order. Other contexts
    /// hear of it as of any save; this one's live results are told (its
    /// ``onExternalChanges`` is not called). As Core Data's batch insert
    /// request does, it makes no object per record where none is needed, and keeps none:
    /// for an import of many records.
    ///
    /// ```swift
    /// try context.batchInsert(Item.self, from: rows) { item, row in
    ///     item.name = row.name
    ///     item.price = row.price
    /// }
    /// ```
    ///
    /// Each object starts with its entity's default values. The values `fill` sets are
    /// checked as a save checks them, and `validateForInsert()` is called on each object;
    /// if one fails, nothing is inserted. This context's unsaved changes are neither seen
    /// nor saved, and the insertion is not undoable. It runs on a root context.
    ///
    /// When the entity has no relationships and no uniqueness constraint, `fill` is given
    /// one object, not in any context, that holds each new record in turn: it must not
    /// keep it, nor insert it anywhere (a kept object is replaced by a new one for the next
    /// record; an inserted one makes the batch fail). Otherwise it is given new objects of
    /// a private context, which is then saved; uniqueness constraints are then enforced
    /// with this context's merge policy, so an upserted object's ID is the existing
    /// record's.
    @inlinable @discardableResult
    public func batchInsert<T: ManagedObject, S: Sequence>(_ type: T.Type = T.self, from elements: S,
                                                           durability: Durability? = nil,
                                                           _ fill: (T, S.Element) throws -> Void) throws -> [ObjectID] {
        try batchInsert(entityName: T.entityName, as: T.self, from: elements, durability: durability, fill)
    }

    /// ``batchInsert(_:from:durability:_:)`` of `count` objects, `fill` given each one's
    /// place (0 to `count` − 1).
    @inlinable @discardableResult
    public func batchInsert<T: ManagedObject>(_ type: T.Type = T.self, count: Int, durability: Durability? = nil,
                                              _ fill: (T, Int) throws -> Void) throws -> [ObjectID] {
        var index = 0
        return try batchInsertEach(entityName: T.entityName, as: T.self, capacity: count, durability: durability,
                                   more: { index < count }) { object in
            defer { index += 1 }
            try fill(object, index)
        }
    }

    /// ``batchInsert(_:from:durability:_:)`` for an entity by name (the dynamic API).
    @inlinable @discardableResult
    public func batchInsert<S: Sequence>(entityName: String, from elements: S, durability: Durability? = nil,
                                         _ fill: (ManagedObject, S.Element) throws -> Void) throws -> [ObjectID] {
        try batchInsert(entityName: entityName, as: ManagedObject.self, from: elements, durability: durability, fill)
    }

    /// The sequence forms' stepping, compiled for the sequence where they are called.
    @inlinable
    func batchInsert<T: ManagedObject, S: Sequence>(entityName: String, as _: T.Type, from elements: S,
                                                    durability: Durability?,
                                                    _ fill: (T, S.Element) throws -> Void) throws -> [ObjectID] {
        var iterator = elements.makeIterator()
        var next = iterator.next()
        return try batchInsertEach(entityName: entityName, as: T.self, capacity: elements.underestimatedCount,
                                   durability: durability, more: { next != nil }) { object in
            guard let element = next else { return }
            next = iterator.next()
            try fill(object, element)
        }
    }

    /// A batch insert: `fill` called for each new object while `more()` says there is
    /// another (see ``batchInsert(_:from:durability:_:)``).
    @usableFromInline
    func batchInsertEach<T: ManagedObject>(entityName: String, as _: T.Type, capacity: Int, durability: Durability?,
                                           more: () -> Bool, _ fill: (T) throws -> Void) throws -> [ObjectID] {
        guard capacity >= 0 else {
            throw CairnError(.invalidArgument, "a batch insert of \(capacity) objects: the count must not be negative")
        }
        let entity = try batchEntity(entityName)
        defer { processExternalChanges() }
        let holder = try batchHolderMaker(entity, as: T.self)
        guard entity.relationships.isEmpty && entity.uniqueness.isEmpty else {
            let context = batchContext()
            context.mergePolicy = mergePolicy
            var objects: [T] = []
            while more() {
                let object = try holder()
                context.insert(object)
                try context.throwDeferredError()
                try fill(object)
                objects.append(object)
            }
            try context.save(durability: durability)
            return objects.map(\.objectID)
        }
        var operations: [RecordOperation] = []
        var ids: [ObjectID] = []
        operations.reserveCapacity(capacity)
        ids.reserveCapacity(capacity)
        var preparer = coordinator.makePreparer()
        var object = try holder()
        while more() {
            // Refused here rather than at the commit: a long sequence fails before it has
            // been made into records that could never be written in one transaction.
            guard operations.count < FormatLimits.maxOperations else {
                throw CairnError(.tooLarge, "a batch insert of more than \(FormatLimits.maxOperations) objects exceeds a transaction's limit; split it")
            }
            // A holder the closure kept is left with its record: the next one gets a new one.
            // Either way it starts from the defaults, with its made initial values made.
            if !isKnownUniquelyReferenced(&object) { object = try holder() }
            object.setDefaults()
            let id = try coordinator.allocateID(entity: entity.number)
            object.recordID = id
            object.inStore = false
            object.exists = true
            object.isFault = false
            try fill(object)
            object.applyDerivations()
            guard object.context == nil else {
                throw CairnError(.invalidArgument,
                                 "a batch insert's closure inserted the object it was given (\(entity.name) \(id)) into a context")
            }
            try validate(object)
            operations.append(try preparer.put(id, object.values))
            ids.append(object.objectID)
        }
        guard !operations.isEmpty else { return [] }
        try commitBatch(operations, kind: .insert, id: { ids[$0].recordID }, expecting: [], keys: [], durability: durability)
        return ids
    }

    // MARK: Parts

    /// The private context a batch goes through objects in: on this store, not undoable.
    private func batchContext() -> Context {
        let context = Context(coordinator: coordinator, model: model)
        context.undoManager.isEnabled = false
        return context
    }

    /// Commits a batch's operations (see ``Coordinator/commitBatch(_:from:kind:id:expecting:keys:durability:)``)
    /// and takes the batch in here as another context takes in a save: registered objects
    /// without unsaved changes among the deleted are forgotten, among the updated
    /// refreshed, and the change observers (live results) told. This context's own batch
    /// does not reach ``onExternalChanges``, as its own saves do not, nor is a change set
    /// of every record built for it, which would be costly for a large batch.
    private func commitBatch(_ operations: [RecordOperation], kind: Coordinator.SaveItem.Kind, id: (Int) -> RecordID,
                             expecting expected: [ExpectedVersion], keys: [Coordinator.ChangedKeys],
                             durability: Durability?) throws {
        _ = try coordinator.commitBatch(operations, from: inbox, kind: kind, id: id, expecting: expected, keys: keys,
                                        durability: durability, author: transactionAuthor,
                                        keptOnDeletion: kind == .delete ? keptOnDeletion(of: operations.map(\.id.entity)) : [:])
        // A pinned context reads on at the state after its batch, as after its save.
        if pinnedGeneration != nil { return moveGenerationToNewest() }
        switch kind {
        case .insert: break
        case .update: for index in operations.indices { refreshUpdated(id(index)) }
        case .delete: for index in operations.indices { forgetDeleted(id(index)) }
        }
        processPendingChanges()
    }

    /// A function making the one object a batch operation on `entity` fills in or reads
    /// through (and a new one when the closure kept the last): not in any context.
    private func batchHolderMaker<T: ManagedObject>(_ entity: EntityDescription, as _: T.Type) throws -> () throws -> T {
        let type = model.objectClass(for: entity.name)
        func holder() throws -> T {
            let object = type.map { $0.init() } ?? ManagedObject(dynamic: entity)
            guard let typed = object as? T else {
                throw CairnError(.invalidArgument, "\(entity.name) objects are \(Swift.type(of: object)), not \(T.self)")
            }
            typed.entity = entity
            typed.holdBatchRecords()
            return typed
        }
        return holder
    }

    /// The entity of a batch request, once the request and this context are checked.
    private func batchEntity<T>(of request: FetchQuery<T>) throws -> EntityDescription {
        guard request.fetchLimit == nil, request.fetchOffset == 0 else {
            throw CairnError(.invalidArgument, "a batch operation takes every match: the request must have no fetch limit or offset")
        }
        return try batchEntity(request.entityName)
    }

    /// The entity named `name`, once this context is checked and has taken in others' saves.
    private func batchEntity(_ name: String) throws -> EntityDescription {
        guard parent == nil else {
            throw CairnError(.invalidArgument, "batch operations run on the store: use a context without a parent, not a child context")
        }
        try refuseWritesToThePast()
        processExternalChanges()
        try throwDeferredError()
        return try entityDescription(name)
    }

    /// Whether a batch operation on `entity` can work on stored records alone (see
    /// ``batchDelete(_:durability:)``).
    private func batchNeedsNoObjects<T>(_ entity: EntityDescription, _ request: FetchQuery<T>) -> Bool {
        request.objectFilter == nil && entity.relationships.isEmpty && entity.uniqueness.isEmpty
            && !coordinator.schema.entities.contains { $0.relationships.contains { $0.destination == entity.name } }
    }

    /// Runs `body` again while it fails with a conflict (a concurrent save changed a record
    /// it read), up to the number of tries a save makes; then takes in the change sets.
    private func retryingConflicts(_ body: () throws -> Int) throws -> Int {
        defer { processExternalChanges() }
        for _ in 0..<16 {
            do { return try body() } catch let error as CairnError where error.code == .conflict { continue }
        }
        throw CairnError(.conflict, "batch operation kept conflicting with concurrent saves; try again")
    }

    /// A batch operation through objects: `request`'s matches fetched into a private
    /// context, `body` applied to each (returning whether it changed it), and that context
    /// saved; all again from the start if a concurrent save conflicts.
    private func batchThroughObjects<T: ManagedObject>(_ request: FetchQuery<T>, durability: Durability?,
                                                       _ body: (Context, T) throws -> Bool) throws -> Int {
        var request = request
        request.includesPendingChanges = false
        return try retryingConflicts {
            let context = batchContext()
            var count = 0
            for object in try context.fetch(request) where try body(context, object) { count += 1 }
            try context.save(durability: durability)
            return count
        }
    }

    /// Calls `body` with each stored record `request`'s predicate matches: its ID, its
    /// version, the record as stored, and its values when they were decoded (and checked
    /// against the schema) to test the predicate, else nil; by an index if the plan has
    /// one, else by a scan testing stored bodies in place where it can.
    private func forEachStoredMatch<T>(of request: FetchQuery<T>, entity: EntityDescription,
                                       _ body: (RecordID, UInt64, borrowing StoredRecord, [Value]?) throws -> Void) throws {
        let compiled = try request.storedPredicate.map { try CompiledPredicate($0, entity: entity, schema: coordinator.schema) }
        // The entity has no relationships (see `batchNeedsNoObjects`): nothing to follow.
        func accepts(_ values: [Value]) -> Bool { compiled?.evaluate(values, resolve: { _ in nil }) ?? true }
        let store = coordinator
        // As a fetch reads: a predicate that reads only the record's own values is tested on
        // stored bodies in place (on several threads, for a scan); any other on each record decoded.
        let filter = compiled.flatMap(RecordFilter.init)
        if case .index(let attribute, let lookup) = plan(request.storedPredicate, entity: entity).access,
           let slot = entity.attributes.firstIndex(where: { $0.name == attribute }) {
            try store.scanIndexed(entity: entity.number, slot: slot, matching: lookup.condition) { id, version, record in
                if let filter {
                    if try filter.matches(record, id: id) { try body(id, version, record, nil) }
                    return
                }
                let values = try Store.decodeRecord(record, id: id, entity: entity)
                if accepts(values) { try body(id, version, record, values) }
            }
            return
        }
        if compiled == nil || filter != nil {
            // (The newest state, also in a pinned context: the batch's commit expects its versions.)
            try scanStored(entity: entity.number, filter: filter, threads: scanSplit.threads, at: nil) { id, version, record in
                try body(id, version, record, nil)
            }
            return
        }
        var scratch: [Value] = []
        try store.scanVersioned(entity: entity.number) { id, version, record in
            try record.decode(into: &scratch)
            try Store.checkRecord(scratch, id: id, entity: entity)
            if accepts(scratch) { try body(id, version, record, scratch) }
        }
    }
}
