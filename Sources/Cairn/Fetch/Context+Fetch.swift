import CairnCollections
import CairnStorage
import Foundation

/// Running fetch requests: plan (index or scan), evaluate the predicate on stored
/// records without materialising objects, add the context's pending changes, sort,
/// window, and hand back objects (faults), IDs, counts or aggregates.
extension Context {
    /// The objects `request` finds: a predicate tested on stored records where it can be
    /// (an index used where one serves), this context's unsaved changes counted, sorted
    /// and windowed. Throws for a sort descriptor Cairn cannot sort by, naming it.
    public func fetch<T: ManagedObject>(_ request: FetchQuery<T>) throws -> [T] {
        let request = try request.resolved()
        let prefetching = try prefetchPaths(request)
        if let objects = try fetchInOnePass(request) { return try finished(objects, request, prefetching: prefetching) }
        var rows = try executeRows(request, values: .forUnloadedObjects)
        let entity = try entityDescription(request.entityName)
        let type = model.objectClass(for: entity.name)
        var objects: [T] = []
        objects.reserveCapacity(rows.count)
        registered.reserveCapacity(max(registered.count, rows.count))
        for index in rows.indices {
            guard rows[index].id.entity == entity.number else { continue }
            let object: T
            if let known = rows[index].registered.take() {
                // Moved out, not retained again, nor cast: the scan found it of the
                // entity's class, which is a T (see `FetchRow.registered`).
                object = unsafeDowncast(known, to: T.self)
            } else {
                guard let made = self.object(for: rows[index].id, entity: entity, type: type) as? T else { continue }
                object = made
            }
            // A record the scan already decoded stays with its fault, so the fault fires
            // without reading the store again (objects stay faults until touched). (The
            // version first: a row of a loaded object has none, and it is not read here.)
            // The values move from the row to the object: copied, the array made by the
            // scan, out of the cache by now for a large fetch, would be retained here and
            // released again when the rows go.
            if let version = rows[index].version {
                if object.isFault {
                    object.prefetch(rows[index].take(), version: version)
                } else {
                    showFetched(object, rows[index].take(), version: version)
                }
            }
            objects.append(object)
        }
        if let filter = request.objectFilter {
            objects = try objects.filter { object in
                willRead(object)
                return try filter(object)
            }
            objects = window(objects, request)
        }
        return try finished(objects, request, prefetching: prefetching)
    }

    /// ``fetch(_:)`` with each object's values as the fetch read them, which it sorted
    /// and tested it by (live results name sections by them: values read again later may
    /// be another save's). Not for a request with an object filter.
    func fetchWithValues<T: ManagedObject>(_ request: FetchQuery<T>,
                                           resolver: CompiledPredicate.Resolver? = nil) throws -> [(object: T, values: [Value])] {
        let request = try request.resolved()
        let prefetching = try prefetchPaths(request)
        let rows = try executeRows(request, values: .all, resolver: resolver)
        let entity = try entityDescription(request.entityName)
        let type = model.objectClass(for: entity.name)
        var result: [(object: T, values: [Value])] = []
        result.reserveCapacity(rows.count)
        for row in rows where row.id.entity == entity.number {
            guard let object = (row.registered ?? self.object(for: row.id, entity: entity, type: type)) as? T else { continue }
            if let version = row.version {
                if object.isFault && !followsFetches { object.prefetch(row.fetched, version: version) } else {
                    showFetched(object, row.values, version: version)
                }
            }
            result.append((object, row.values))
        }
        let objects = try finished(result.map(\.object), request, prefetching: prefetching)
        return zip(objects, result).map { ($0, $1.values) }
    }

    /// `objects`, their faults grouped in batches of the request's fetch batch size, if
    /// any, and the relationships of `prefetching` loaded: for all of them now, or, in
    /// batches, for each batch as it loads.
    private func finished<T: ManagedObject>(_ objects: [T], _ request: FetchQuery<T>, prefetching: [[String]]) throws -> [T] {
        guard let size = request.fetchBatchSize, size > 0 else {
            if !prefetching.isEmpty { try prefetch(prefetching, from: objects) }
            return objects
        }
        for start in stride(from: 0, to: objects.count, by: size) {
            let batch = FaultBatch(objects: Array(objects[start..<min(start + size, objects.count)]), prefetching: prefetching)
            var faults = false
            for object in batch.objects where object.isFault {
                object.faultBatch = batch
                faults = true
            }
            // (A batch with no fault never loads: its relationships are loaded now.)
            if !faults && !prefetching.isEmpty { try prefetch(prefetching, from: batch.objects) }
        }
        return objects
    }

    /// A query made in one pass: a full scan of the store with a predicate tested on the
    /// stored bodies in place, no sort, window or object filter, and no pending change to
    /// the entity here. Each match becomes its object as the scan hands it over, its
    /// values decoded just before the object is made, while the record is in the cache.
    /// (Nil when the request is not of that kind: ``executeRows(_:values:)`` then gathers
    /// the matches first.) Making the objects in a second pass would read every match
    /// again once the scan has pushed it out of the cache, and keep an array of rows. A
    /// fetch of every record keeps the two passes: its objects then lie together, apart
    /// from their values, which makes a save's walks over them faster.
    private func fetchInOnePass<T: ManagedObject>(_ request: FetchQuery<T>) throws -> [T]? {
        guard parent == nil, request.sortKeys.isEmpty, request.objectFilter == nil,
              request.fetchLimit == nil, request.fetchOffset == 0 else { return nil }
        mergeExternalChangesIfAutomatic()
        try throwDeferredError()
        let entity = try entityDescription(request.entityName)
        guard let predicate = request.storedPredicate, case .fullScan = plan(predicate, entity: entity).access,
              let filter = RecordFilter(try CompiledPredicate(predicate, entity: entity, schema: coordinator.schema)),
              !(request.includesPendingChanges && dirty.contains(where: { $0.key.entity == entity.number })) else { return nil }
        let type = model.objectClass(for: entity.name)
        // The class a registered object must be of for the fetch to take it as a `T` unchecked.
        let fetchedClass = type.flatMap { $0 is T.Type ? ObjectIdentifier($0) : nil }
        return try scanObjects(entity: entity, filter: filter, type: type,
                               fetchedClass: fetchedClass, isFetched: { $0 is T }).take(as: T.self)
    }

    /// The objects of ``fetchInOnePass(_:)``: every record of `entity` the filter keeps,
    /// registered or made here, each with the record read here if it is a
    /// fault. Objects not of the fetched type (`isFetched`, asked only when the class is
    /// not `fetchedClass`) are left out. Not generic: a closure of the generic fetch looked
    /// the result array's type metadata up on every record.
    private func scanObjects(entity: EntityDescription, filter: RecordFilter, type: ManagedObject.Type?,
                             fetchedClass: ObjectIdentifier?, isFetched: (ManagedObject) -> Bool) throws -> GatheredReferences<ManagedObject> {
        let objects = GatheredReferences<ManagedObject>()
        try scanStored(entity: entity.number, filter: filter, threads: scanSplit.threads, at: readGeneration) { id, version, record in
            if let known = registered[id] {
                guard ObjectIdentifier(Swift.type(of: known)) == fetchedClass || isFetched(known) else { return }
                // A fault keeps the record read here; a loaded object keeps its own values,
                // unless it is to show the state the fetch read and another save changed it.
                if known.isFault {
                    known.prefetch(try keptRecords.row(record, id: id, entity: entity), version: version)
                } else if known.baseVersion != version, followsFetches {
                    showFetched(known, try Store.decodeRecord(record, id: id, entity: entity), version: version)
                }
                objects.append(known)
            } else {
                // The values first, then their object: made one after the other, they lie together.
                let row = try keptRecords.row(record, id: id, entity: entity)
                let object = newFault(id, entity: entity, type: type)
                guard fetchedClass != nil || isFetched(object) else { return }
                object.prefetch(row, version: version)
                objects.append(object)
            }
        }
        return objects
    }

    /// Whether the objects a fetch hands back show the state it read: in a root context
    /// that takes in other saves as they come (``automaticallyMergesChangesFromParent``)
    /// or reads at a pinned generation. A loaded object another save changed since it was
    /// read, whose change set the context has not taken in yet, takes the values the fetch
    /// read (its predicate and sort were tested on them), and the objects of live results
    /// load from what the refresh read. A context that keeps a stable snapshot without a
    /// generation keeps its loaded objects' values.
    var followsFetches: Bool { parent == nil && (automaticallyMergesChangesFromParent || pinnedGeneration != nil) }

    /// Has `object`, which a fetch read at `version` with `values`, show them (see
    /// ``followsFetches``): a fault is loaded with them, a loaded object without unsaved
    /// changes of another version takes them as a merge does, telling its observers.
    func showFetched(_ object: ManagedObject, _ values: [Value], version: UInt64) {
        showFetched(object, .decoded(values), version: version)
    }

    /// ``showFetched(_:_:version:)`` of a row as a fetch read it, decoded only if the
    /// object is to take it.
    func showFetched(_ object: ManagedObject, _ row: StoredRow, version: UInt64) {
        guard followsFetches, object.inStore, object.exists, !object.hasUnsavedChanges else { return }
        if object.isFault {
            object.prefetch(row, version: version)
            _ = object.loadPrefetched()
            return
        }
        guard object.baseVersion != version else { return }
        let values = row.values
        guard values.count == object.values.count else { return }
        object.dropPrefetched()
        changeGeneration &+= 1  // its values change without a write
        relatedListsChanged()
        object.reload(values)
        object.baseVersion = version
    }

    /// The IDs of the objects ``fetch(_:)`` would find, in the same order and window, without
    /// making the objects (unless the typed predicate is evaluated on objects: see
    /// ``FetchQuery/inMemoryReason``).
    public func fetchObjectIDs<T: ManagedObject>(_ request: FetchQuery<T>) throws -> [ObjectID] {
        let request = try request.resolved()
        if request.objectFilter != nil { return try fetch(request).map(\.objectID) }
        return try execute(request).compactMap { coordinator.objectID(for: $0) }
    }

    /// How many objects ``fetch(_:)`` would find (its fetch limit and offset applied), without
    /// sorting them or making objects (unless the typed predicate is evaluated on objects).
    public func count<T: ManagedObject>(for request: FetchQuery<T>) throws -> Int {
        var unwindowed = request
        unwindowed.sortBy = []
        unwindowed.sortKeys = []
        if request.objectFilter != nil { return try fetch(request).count }
        return try execute(unwindowed).count
    }

    /// Which plan a request would run: an index lookup or a full scan.
    public func explain<T: ManagedObject>(_ request: FetchQuery<T>) throws -> QueryPlan {
        let entity = try entityDescription(request.entityName)
        var result = plan(request.storedPredicate, entity: entity)
        if request.objectFilter != nil { result.inMemoryFilter = request.inMemoryReason ?? "an object filter" }
        return result
    }

    /// `count`, or min/max/sum/average of a numeric attribute, over the objects the
    /// request matches. Nil values are skipped; an empty set gives `.null` (0 for count and sum).
    public func aggregate<T: ManagedObject>(_ aggregate: Aggregate, for request: FetchQuery<T>) throws -> Value {
        let entity = try entityDescription(request.entityName)
        let key: String
        switch aggregate {
        case .count: return .int64(Int64(try count(for: request)))
        case .min(let name), .max(let name), .sum(let name), .average(let name): key = name
        }
        let path = try CompiledPredicate.resolve(key.split(separator: ".").map(String.init), entity: entity, schema: coordinator.schema)
        var unwindowed = request
        unwindowed.sortBy = []
        unwindowed.sortKeys = []
        // The rows carry each match's values as this context sees them: not read again by
        // ID (which would read and decode every match a second time).
        let resolver = memoizedViewValues()
        var values: [Value] = []
        for row in try executeRows(unwindowed, values: .all) {
            for value in CompiledPredicate.follow(path, row.values, resolver) where !value.isNull { values.append(value) }
        }
        switch aggregate {
        // (A NaN is left out, as nil is: by its bytes it had no place among numbers, and the
        // least of [NaN, 0.1, 1.0] came out as 1.0.)
        case .min: return values.lazy.filter { !ValueOrder.isNaN($0) }.min { IndexOrder.compare($0, $1) == .orderedAscending } ?? .null
        case .max: return values.lazy.filter { !ValueOrder.isNaN($0) }.max { IndexOrder.compare($0, $1) == .orderedAscending } ?? .null
        case .sum, .average:
            let numbers = values.compactMap(ValueOrder.number)
            guard numbers.count == values.count else {
                throw CairnError(.invalidArgument, "\(key) is not numeric; cannot \(aggregate)")
            }
            var integer: Int64 = 0, real = 0.0, decimal = Decimal(0)
            var kind = 0  // 0 integer, 1 real, 2 decimal
            for number in numbers {
                switch number {
                case .integer(let v):
                    let (sum, overflow) = integer.addingReportingOverflow(v)
                    if overflow { kind = max(kind, 1) } else { integer = sum }
                    real += Double(v); decimal += Decimal(v)
                case .real(let v): kind = max(kind, 1); real += v; decimal += ValueOrder.decimal(v)
                case .decimal(let v): kind = 2; real += NSDecimalNumber(decimal: v).doubleValue; decimal += v
                }
            }
            if case .average = aggregate {
                guard !numbers.isEmpty else { return .null }
                if kind == 2 { return .decimal(decimal / Decimal(numbers.count)) }
                return .double(real / Double(numbers.count))
            }
            switch kind {
            case 0: return .int64(integer)
            case 1: return .double(real)
            default: return .decimal(decimal)
            }
        case .count: return .null
        }
    }

    func entityDescription(_ name: String) throws -> EntityDescription {
        guard let entity = coordinator.entity(named: name) else {
            throw CairnError(.invalidArgument, "entity \(name) is not in the model")
        }
        return entity
    }

    /// A record's values as this context sees them (pending changes included).
    func viewValues(_ id: RecordID) -> [Value]? {
        if let object = registered[id], !object.isFault || dirty.contains(id) {
            willRead(object)
            return object.exists ? object.values : nil
        }
        return try? sourceValues(for: id)?.values
    }

    /// A record's values as a fetch here tests and sorts it: a changed object's own
    /// values; any other record's as the parent sees it (a child's loaded object may hold
    /// older ones), or as the store has it. (A record that cannot be read is an error, as
    /// in a fetch, not a record that does not match.) A loaded object of the record shows
    /// the values read (see ``followsFetches``).
    func fetchedValues(_ id: RecordID) throws -> [Value]? {
        try fetchedRecord(id)?.values
    }

    /// ``fetchedValues(_:)`` with the version read, for values read from the source (nil
    /// for a changed object's own).
    func fetchedRecord(_ id: RecordID) throws -> (values: [Value], version: UInt64?)? {
        if let object = dirty[id] {
            willRead(object)
            return object.exists && object.belongs(to: self) ? (object.values, nil) : nil
        }
        guard let (values, version) = try sourceValues(for: id) else { return nil }
        if parent == nil, let object = registered[id], object.isFault || object.baseVersion != version {
            showFetched(object, values, version: version)
        }
        return (values, version)
    }

    /// ``viewValues(_:)`` for the records one fetch follows relationships to, each read
    /// once: sorting DVDs by `owner.name`, or testing `owner.name == "x"`, does not read
    /// and decode the owner's record again for every DVD. (Nothing changes during a fetch.)
    /// Up to 65,536 records are kept; past that, the others are read each time.
    func memoizedViewValues(limit: Int = 65_536) -> CompiledPredicate.Resolver {
        var cache = IDMap<RecordID, [Value]?>()
        return { id in
            if let known = cache[id] { return known }
            let values = self.viewValues(id)
            if cache.count < limit { cache[id] = values }
            return values
        }
    }

    // MARK: Planning

    func plan(_ predicate: FetchPredicate?, entity: EntityDescription) -> QueryPlan {
        // (A child context's fetch uses the plan too: an index finds the store's matches,
        // and the objects its ancestors changed are tested besides.)
        var result = QueryPlan(entity: entity.name, access: .fullScan, residualPredicate: predicate)
        guard let predicate else { return result }
        let conjuncts: [FetchPredicate]
        if case .and(let parts) = predicate { conjuncts = parts } else { conjuncts = [predicate] }
        var best: (attribute: String, condition: IndexCondition, rank: Int)?
        var ranges: [String: (lower: Value?, lowerInclusive: Bool, upper: Value?, upperInclusive: Bool)] = [:]
        var rangeOrder: [String] = []
        for conjunct in conjuncts {
            guard case .comparison(.keyPath(let parts), let op, let rhs, let options, .direct) = conjunct,
                  parts.count == 1, options.isEmpty,
                  let slot = entity.attributes.firstIndex(where: { $0.name == parts[0] }),
                  isIndexed(entity, slot) else { continue }
            let condition: IndexCondition
            let rank: Int
            switch (op, rhs) {
            case (.equal, .constant(let value)): condition = .equal([value]); rank = 0
            case (.in, .list(let items)):
                let values = items.compactMap { item -> Value? in if case .constant(let v) = item { return v } else { return nil } }
                guard values.count == items.count else { continue }
                condition = .equal(values); rank = 1
            case (.less, .constant(let value)) where !value.isNull: condition = .range(lower: nil, lowerInclusive: false, upper: value, upperInclusive: false); rank = 2
            case (.lessOrEqual, .constant(let value)) where !value.isNull: condition = .range(lower: nil, lowerInclusive: false, upper: value, upperInclusive: true); rank = 2
            case (.greater, .constant(let value)) where !value.isNull: condition = .range(lower: value, lowerInclusive: false, upper: nil, upperInclusive: false); rank = 2
            case (.greaterOrEqual, .constant(let value)) where !value.isNull: condition = .range(lower: value, lowerInclusive: true, upper: nil, upperInclusive: false); rank = 2
            case (.between, .list(let bounds)) where bounds.count == 2:
                guard case .constant(let low) = bounds[0], case .constant(let high) = bounds[1], !low.isNull, !high.isNull else { continue }
                condition = .range(lower: low, lowerInclusive: true, upper: high, upperInclusive: true); rank = 2
            default: continue
            }
            if case .range(let lower, let lowerInclusive, let upper, let upperInclusive) = condition {
                // Bounds on one attribute (`a >= x AND a < y`) narrow one range together.
                var range = ranges[parts[0]] ?? (nil, false, nil, false)
                // Two bounds that compare the same keep the stricter flag when they compare
                // exactly (integers of any widths, or two values of one kind); of unlike kinds
                // (an integer and a real of one value as reals, 2^53 + 1 against 2^53.0) the
                // looser one, as the index is searched with one of them and every match is
                // tested against the whole predicate.
                if let lower {
                    let order = range.lower.flatMap { ValueOrder.order(lower, $0, []) }
                    if range.lower == nil || order == .orderedDescending { range.lower = lower; range.lowerInclusive = lowerInclusive }
                    if order == .orderedSame, let kept = range.lower {
                        range.lowerInclusive = Self.compareExactly(kept, lower)
                            ? range.lowerInclusive && lowerInclusive : range.lowerInclusive || lowerInclusive
                    }
                }
                if let upper {
                    let order = range.upper.flatMap { ValueOrder.order(upper, $0, []) }
                    if range.upper == nil || order == .orderedAscending { range.upper = upper; range.upperInclusive = upperInclusive }
                    if order == .orderedSame, let kept = range.upper {
                        range.upperInclusive = Self.compareExactly(kept, upper)
                            ? range.upperInclusive && upperInclusive : range.upperInclusive || upperInclusive
                    }
                }
                ranges[parts[0]] = range
                if !rangeOrder.contains(parts[0]) { rangeOrder.append(parts[0]) }
                continue
            }
            if best == nil || rank < best!.rank { best = (parts[0], condition, rank) }
        }
        for attribute in rangeOrder {
            guard let range = ranges[attribute] else { continue }
            let rank = range.lower != nil && range.upper != nil ? 1 : 2
            if best == nil || rank < best!.rank {
                best = (attribute, .range(lower: range.lower, lowerInclusive: range.lowerInclusive,
                                          upper: range.upper, upperInclusive: range.upperInclusive), rank)
            }
        }
        if let best { result.access = .index(attribute: best.attribute, condition: QueryPlan.IndexLookup(best.condition)) }
        return result
    }

    /// An attribute is indexed if it is flagged, leads a compound index, or leads a uniqueness group.
    /// Whether two values compare exactly (``ValueOrder/order(_:_:_:)``): integers of any
    /// widths, or two values of one kind. An integer and a real compare as reals, which can
    /// call unequal values the same.
    static func compareExactly(_ a: Value, _ b: Value) -> Bool {
        (a.integer != nil && b.integer != nil) || a.kindBit == b.kindBit
    }

    func isIndexed(_ entity: EntityDescription, _ slot: Int) -> Bool {
        let name = entity.attributes[slot].name
        return entity.attributes[slot].isIndexed || entity.indexes.contains { $0.first == name }
            || entity.uniqueness.contains { $0.first == name }
    }

    // MARK: Executing

    /// The IDs matching a request, sorted and windowed (before any object filter).
    func execute<T: ManagedObject>(_ request: FetchQuery<T>) throws -> [RecordID] {
        try executeRows(request, values: .none).map(\.id)
    }

    /// Which matches of a scan a caller needs the stored values of (a sort needs them all).
    enum RowValues {
        /// Every match's.
        case all
        /// Those of records without a loaded object here (a fetch keeps them with the
        /// faults it hands out; a loaded object keeps its own values).
        case forUnloadedObjects
        /// None (IDs and counts).
        case none
    }

    /// One match of a request: its ID, its values as this context sees them, and — when
    /// they were read from the store — the record version they were read at. A match a
    /// scan did not decode (``RowValues``) has no values and no version.
    struct FetchRow {
        let id: RecordID
        /// The values, decoded, or the record kept to decode when read (a row only
        /// ``fetch(_:)`` makes an object of).
        private(set) var fetched: StoredRow
        let version: UInt64?
        /// The object registered here for `id`, when the scan looked it up and found it of
        /// the class the model gives its entity, and that class a `T` (so the fetch need
        /// not look again, nor cast it). The scan retains it and reads its class where it
        /// reads its fault flag, while the object is in the cache: going back to each
        /// object later would find most of them out of the cache again.
        var registered: ManagedObject? = nil

        init(id: RecordID, values: [Value], version: UInt64?, registered: ManagedObject? = nil) {
            self.init(id: id, fetched: .decoded(values), version: version, registered: registered)
        }

        init(id: RecordID, fetched: StoredRow, version: UInt64?, registered: ManagedObject? = nil) {
            self.id = id
            self.fetched = fetched
            self.version = version
            self.registered = registered
        }

        /// The values, decoded.
        var values: [Value] { fetched.values }

        /// The value in `slot` (`.null` past the last), read in place from a kept record.
        func value(at slot: Int) -> Value { fetched.value(at: slot) }

        /// Copies the row's kept record, if it has one, into `arena` (see ``RecordArena/copy(_:)``).
        mutating func keepAgain(in arena: RecordArena) {
            guard case .kept(let record) = fetched, let copy = arena.copy(record) else { return }
            fetched = .kept(copy)
        }

        /// The row's values, leaving it none.
        mutating func take() -> StoredRow {
            defer { fetched = .decoded([]) }
            return fetched
        }
    }

    /// How many sorted rows a fetch has at least before it copies their kept records in
    /// their new order (fewer lie in the cache either way).
    static let keptAgainMinimum = 1_024

    /// The rows matching a request, sorted and windowed (before any object filter): the
    /// plan's strategy reads the stored matches (``FetchPlan``), the changed objects here
    /// are added, and the rows are sorted and windowed. `resolver` reads related records
    /// for the predicate and the sort (one of its own unless given: a caller that reads
    /// them again after shares theirs).
    func executeRows<T: ManagedObject>(_ request: FetchQuery<T>, values wanted: RowValues = .all,
                                       resolver given: CompiledPredicate.Resolver? = nil) throws -> [FetchRow] {
        mergeExternalChangesIfAutomatic()
        try throwDeferredError()
        let plan = try makePlan(request, values: wanted, resolver: given)
        let entity = plan.entity, pending = plan.pending, resolver = plan.resolver
        let top = plan.top, order = plan.order, windowEnd = plan.windowEnd
        func accepts(_ values: [Value]) -> Bool { plan.accepts(values) }
        var matches: [FetchRow] = []
        // An index's condition, when a lookup answered the stored part: a changed object
        // whose value does not meet it cannot match either, and is passed over with one
        // comparison (testing the whole predicate on each changed object at every fetch would
        // make a find-or-create loop before a save take time in n²).
        let pendingCondition = try plan.readStored(in: self, into: &matches)
        // (The condition is taken apart once, out of the loop: an optional tuple tested in
        // it would be copied, and its array retained, for every object.)
        let conditionSlot = pendingCondition?.slot ?? -1
        let condition = pendingCondition?.condition ?? .equal([])
        func takePending(_ id: RecordID, _ object: ManagedObject) {
            if conditionSlot >= 0, !object.isFault, conditionSlot < object.values.count,
               !SecondaryIndex.matches(object.values[conditionSlot], condition) { return }
            willRead(object)
            if object.exists && object.belongs(to: self) && accepts(object.values) {
                // (With the object itself where it is of the fetched class, as a scan's row
                // of a registered object: the fetch then does not look it up again, a
                // probe of the registered objects that the cache no longer holds.)
                let known = ObjectIdentifier(type(of: object)) == plan.fetchedClass ? object : nil
                matches.append(FetchRow(id: id, values: object.values, version: nil, registered: known))
            }
        }
        // By equality on an index, many changed objects: those a lookup of their values
        // names (see ``PendingLookup``), not every one.
        if request.includesPendingChanges, conditionSlot >= 0, case .equal(let wanted) = condition,
           let candidates = pendingCandidates(entity: entity.number, slot: conditionSlot, wanted: wanted) {
            for object in candidates { takePending(object.recordID, object) }
        } else {
            // In ID order: the rows need no sort after (when no stored row is among them),
            // and objects made one after another are read one after another, which the
            // cache fetches ahead of.
            forEachChangedInIDOrder(pending) { id, object in if id.entity == entity.number { takePending(id, object) } }
        }
        if let top {
            // The rows not offered yet (changed objects, and the stored ones of a child or of
            // a predicate tested on decoded values).
            for row in matches { top.offer(row) }
            return window(top.sorted(), request)
        }
        if let order {
            // Without an object filter, only the rows up to the window's end are wanted in order.
            // (The rows read in place: a copy of each for a key would retain and release
            // what it holds.)
            let positions = matches.withUnsafeBufferPointer { rows in
                order.sortedPositions(count: rows.count, ids: rows.map(\.id), values: { rows[$0].values },
                                      value: { rows[$0].value(at: $1) }, resolve: resolver, first: windowEnd)
            }
            var sorted = positions.map { matches[$0] }
            matches = []
            if request.objectFilter == nil { sorted = window(sorted, request) }
            // Many rows, kept in ID order by the read and sorted otherwise: their records are
            // copied in the new order, which their objects will be read in. (Read through
            // the first copies, each object's values were a cache miss away: a third of a
            // sorted fetch of 200,000 objects and the reads of their properties.)
            if sorted.count >= Self.keptAgainMinimum, parent == nil {
                for index in sorted.indices { sorted[index].keepAgain(in: keptRecords) }
            }
            return sorted
        }
        // Scans and index lookups yield ID order already; only the changed objects added
        // after them can break it. (The IDs are sorted with where each row is, and each row
        // then moved once: sorting the rows themselves would retain and release their
        // arrays at every step.)
        if matches.indices.dropFirst().contains(where: { matches[$0 - 1].id >= matches[$0].id }) {
            var order = matches.indices.map { (id: matches[$0].id.rawValue, index: $0) }
            RadixSort.sort(&order) { $0.id }
            matches = order.map { matches[$0.index] }
        }
        return request.objectFilter == nil ? window(matches, request) : matches
    }

    /// Scans an entity's stored records, testing each body in place with `filter` (nil:
    /// every record) on up to `threads` threads at once, each with a copy of its own; then
    /// `body` gets each kept record on this thread, in ID order, with its version, all read
    /// in one state (see ``Store/scanVersioned(entity:parts:minimumPerRun:where:_:)``).
    @inline(__always)
    func scanStored(entity: UInt16, filter: RecordFilter?, threads: Int, at generation: StoreGeneration?,
                    _ body: (RecordID, UInt64, borrowing StoredRecord) throws -> Void) throws {
        var tester: (@Sendable (Int) -> Store.RecordTest)?
        if let filter {
            // Each run's test holds its run's filter: nothing is looked up per record.
            let filters = PerRun(count: max(threads, 1), making: { $0 == 0 ? filter : RecordFilter(copying: filter) })
            tester = { @Sendable run in
                let filter = filters[run]
                return { id, record in try filter.matches(record, id: id) }
            }
        }
        try coordinator.scanVersioned(entity: entity, parts: threads, minimumPerRun: scanSplit.minimumPerRun, at: generation,
                                       where: tester, body)
    }

    /// How many stored matches, in ID order, are enough to fill a request's window: its
    /// offset plus its limit, when it has no sort and no object filter. Stored matches come
    /// in ID order, and the window is then the first of them in ID order together with the
    /// pending ones (added and sorted in afterwards), so a later stored match cannot be in
    /// it. Otherwise every match is needed (`Int.max`).
    func storedMatchesFillingWindow<T>(_ request: FetchQuery<T>) -> Int {
        guard request.sortKeys.isEmpty, request.objectFilter == nil, let limit = request.fetchLimit else { return .max }
        let (sum, overflow) = max(0, request.fetchOffset).addingReportingOverflow(max(0, limit))
        return overflow ? .max : sum
    }

    /// The attribute and direction of an index walk for a sorted request with a window:
    /// sorted by one indexed attribute of the record itself whose index order is the sort's
    /// (an integer, a string not sorted localized, a real, a decimal or a date: NaN last in
    /// both from format version 4, ``ValueOrder/nanOrder(_:_:)``), with no index answering
    /// its predicate (which a walk would test record by record, in an order of no use to it).
    func indexWalk<T>(_ request: FetchQuery<T>, entity: EntityDescription, order: RowOrder) -> (slot: Int, ascending: Bool)? {
        guard request.sortKeys.count == 1, let descriptor = request.sortKeys.first, !descriptor.localizedCaseInsensitive,
              let slots = order.ownSlots, slots.count == 1, let slot = slots.first, slot < entity.attributes.count,
              [.int8, .int16, .int32, .int64, .string, .float, .double, .decimal, .date].contains(entity.attributes[slot].type),
              isIndexed(entity, slot),
              case .fullScan = plan(request.storedPredicate, entity: entity).access else { return nil }
        return (slot, descriptor.ascending)
    }

    /// Where a sorted request's window ends (its offset plus its limit), when it has a
    /// limit and no object filter; else nil (every match is wanted in order).
    func sortedWindowEnd<T>(_ request: FetchQuery<T>) -> Int? {
        guard !request.sortKeys.isEmpty, request.objectFilter == nil, let limit = request.fetchLimit else { return nil }
        let (sum, overflow) = max(0, request.fetchOffset).addingReportingOverflow(max(0, limit))
        return overflow ? nil : sum
    }

    func window<Element, T>(_ items: [Element], _ request: FetchQuery<T>) -> [Element] {
        let start = min(max(0, request.fetchOffset), items.count)
        let end = request.fetchLimit.map { min(items.count, start + max(0, $0)) } ?? items.count
        return Array(items[start..<end])
    }
}

/// Objects of one fetch batch, or of one run of a relationship's faults: touching one
/// fault loads them all.
final class FaultBatch {
    let objects: [ManagedObject]
    /// The relationships loaded with the batch (its fetch's prefetching), as paths of names.
    let prefetching: [[String]]
    init(objects: [ManagedObject], prefetching: [[String]] = []) {
        self.objects = objects
        self.prefetching = prefetching
    }

    /// How many of a relationship's faults fire together.
    static let relationshipSize = 64

    /// Gathers faults met one by one into batches of ``relationshipSize``; faults in a
    /// batch already (a fetch's) stay in theirs.
    struct Gatherer {
        private var pending: [ManagedObject] = []

        mutating func add(_ fault: ManagedObject) {
            guard fault.faultBatch == nil else { return }
            if pending.isEmpty { pending.reserveCapacity(FaultBatch.relationshipSize) }
            pending.append(fault)
            if pending.count == FaultBatch.relationshipSize { finish() }
        }

        /// Makes the faults gathered since the last batch one batch (one alone needs none).
        mutating func finish() {
            if pending.count > 1 {
                let batch = FaultBatch(objects: pending)
                for object in pending { object.faultBatch = batch }
            }
            pending.removeAll(keepingCapacity: true)
        }
    }
}
