import CairnCollections
import CairnStorage

/// How one fetch finds its rows, decided once from the request: what is tested, what is
/// kept, and the access strategy that reads the stored matches — an index walk in sort
/// order (``IndexWalk``), an index lookup (``IndexLookup``), a scan (``FullScan``), or a
/// child context's read through its parent (``ThroughParent``). ``Context/executeRows(_:values:resolver:)``
/// runs the strategy, then adds the context's changed objects and sorts and windows the rows.
struct FetchPlan {
    typealias FetchRow = Context.FetchRow

    let entity: EntityDescription
    let compiled: CompiledPredicate?
    /// The predicate tested on stored bodies in place, when it reads only the record's own values.
    let filter: RecordFilter?
    /// Reads related records for the predicate and the sort.
    let resolver: CompiledPredicate.Resolver
    /// The changed objects whose values replace the stored ones (a copy of the table, not of
    /// its entries); only IDs of this entity are asked about.
    let pending: IDMap<RecordID, ManagedObject>
    /// Whether any changed object is of this entity (only then is a stored record's probe worth it).
    let filterPending: Bool
    let order: RowOrder?
    /// Where a sorted window ends, when the request has one (``Context/sortedWindowEnd(_:)``).
    let windowEnd: Int?
    /// The first rows of a sorted window, kept as they are offered.
    let top: TopRows?
    /// Stored matches, in ID order, that fill the window (`Int.max`: all of them).
    let enough: Int
    let wanted: Context.RowValues
    /// The class a registered object must be of for a fetch to take it as a `T` unchecked.
    let fetchedClass: ObjectIdentifier?
    let access: Access

    /// The access strategy.
    enum Access {
        case indexWalk(IndexWalk)
        case indexLookup(IndexLookup)
        case fullScan(FullScan)
        case throughParent(ThroughParent)
    }

    /// An index's condition that answered the stored part: a changed object whose value
    /// does not meet it cannot match either.
    struct PendingCondition {
        let slot: Int
        let condition: IndexCondition

        /// Kept only for a short `IN` list or a range: a long list is tested through a hashed set.
        init?(slot: Int, condition: IndexCondition) {
            if case .equal(let wanted) = condition, wanted.count > 8 { return nil }
            (self.slot, self.condition) = (slot, condition)
        }
    }

    var limited: Bool { enough != .max }

    @inline(__always)
    func accepts(_ values: [Value]) -> Bool { compiled?.evaluate(values, resolve: resolver) ?? true }

    /// Reads the stored matches into `matches` by the plan's strategy; returns the index
    /// condition that served it, if one did.
    func readStored(in context: Context, into matches: inout [FetchRow]) throws -> PendingCondition? {
        switch access {
        case .indexWalk(let walk): try walk.read(self, in: context); return nil
        case .indexLookup(let lookup): return try lookup.read(self, in: context, into: &matches)
        case .fullScan(let scan): try scan.read(self, in: context, into: &matches); return nil
        case .throughParent(let read): return try read.read(self, in: context, into: &matches)
        }
    }
}

/// Thrown by a scan's visitor to end the scan once the fetch's window is full.
struct ScanEnough: Error {}

extension FetchPlan {
    /// Sorted by an indexed attribute with a window: the records in the index's order,
    /// until the window is full of stored matches (and the ties of its last). No later
    /// stored record can come before them; the changed objects are offered at the end.
    struct IndexWalk {
        let slot: Int
        let ascending: Bool

        func read(_ plan: FetchPlan, in context: Context) throws {
            guard let top = plan.top else { return }
            let wanted = plan.windowEnd ?? 0
            var taken = 0
            var boundary: Value?
            try context.coordinator.scanInIndexOrder(entity: plan.entity.number, slot: slot, ascending: ascending) { id, version, value, record in
                if let boundary, IndexOrder.compare(value, boundary) != .orderedSame { return false }
                if plan.filterPending && plan.pending.contains(id) { return true }
                if let filter = plan.filter {
                    guard try filter.matches(record, id: id) else { return true }
                    try top.offer(id: id, version: version, record: record)
                } else {
                    let values = try Store.decodeRecord(record, id: id, entity: plan.entity)
                    guard plan.accepts(values) else { return true }
                    top.offer(FetchRow(id: id, values: values, version: version))
                }
                taken += 1
                if taken >= wanted && boundary == nil { boundary = value }
                return true
            }
        }
    }

    /// The records an index names for a condition. The rest of the predicate is tested on
    /// each match's stored body in place where it can be (as a scan does), before the body
    /// is decoded; the whole predicate on the decoded values where not.
    struct IndexLookup {
        let slot: Int
        let condition: IndexCondition

        func read(_ plan: FetchPlan, in context: Context, into matches: inout [FetchRow]) throws -> PendingCondition? {
            // A window in ID order needs only the first stored matches: one for each row it
            // holds, and one more for each changed object (whose stored row is passed over).
            // If the rest of the predicate turns some of them away, the lookup is made again
            // for every match.
            let start = matches.count
            var first: Int?
            if plan.limited, plan.top == nil {
                let (sum, overflow) = plan.enough.addingReportingOverflow(plan.filterPending ? plan.pending.count : 0)
                first = overflow ? nil : sum
            }
            if try readMatches(plan, in: context, first: first, into: &matches), matches.count - start < plan.enough {
                matches.removeSubrange(start...)
                try readMatches(plan, in: context, first: nil, into: &matches)
            }
            return PendingCondition(slot: slot, condition: condition)
        }

        /// Reads the matches, at least the first `first` in ID order; returns whether the
        /// lookup may have left later ones out.
        @discardableResult
        private func readMatches(_ plan: FetchPlan, in context: Context, first: Int?, into matches: inout [FetchRow]) throws -> Bool {
            let filter = plan.filter, top = plan.top
            var truncated = false
            do {
                truncated = try context.coordinator.scanIndexed(entity: plan.entity.number, slot: slot, matching: condition,
                                                                first: first) { id, version, record in
                    if matches.count >= plan.enough { throw ScanEnough() }
                    if plan.filterPending && plan.pending.contains(id) { return }
                    if let filter, !(try filter.matches(record, id: id)) { return }
                    if let top, filter != nil || plan.compiled == nil {
                        return try top.offer(id: id, version: version, record: record)
                    }
                    guard filter == nil, plan.compiled != nil else {
                        // Nothing left to test on the values: kept undecoded where it can be,
                        // for an object and its sort.
                        let fetched: StoredRow = plan.wanted == .all ? .decoded(try Store.decodeRecord(record, id: id, entity: plan.entity))
                            : try context.keptRecords.row(record, id: id, entity: plan.entity)
                        return matches.append(FetchRow(id: id, fetched: fetched, version: version))
                    }
                    let values = try Store.decodeRecord(record, id: id, entity: plan.entity)
                    if plan.accepts(values) { matches.append(FetchRow(id: id, values: values, version: version)) }
                }
            } catch is ScanEnough {
                return false
            }
            return truncated
        }
    }

    /// Every stored record of the entity. Without a predicate, every record is decoded into
    /// an array of its own. A predicate that reads only values of the record itself is
    /// tested on the stored body in place (``RecordFilter``), on several threads at once for
    /// a large entity unless the window may end the scan early; only a match is decoded,
    /// checked and kept. Any other predicate is tested on each record decoded into one
    /// reused buffer, and only a match keeps a copy of it.
    struct FullScan {
        func read(_ plan: FetchPlan, in context: Context, into matches: inout [FetchRow]) throws {
            let entity = plan.entity, top = plan.top, limited = plan.limited, enough = plan.enough
            let takesAll = plan.compiled == nil
            // (A sort reads each row's values: a row of IDs too, and one for a loaded object.)
            let sorted = plan.order != nil
            let wanted = sorted && plan.wanted == .none ? .all : plan.wanted
            // Every record matches: room for them all at once (a hint, the count read apart
            // from the scan), where doubling would copy the rows several times. (Not when
            // only a sorted window's first rows are kept, by `top`.)
            if takesAll && top == nil {
                matches.reserveCapacity(min(context.coordinator.count(entity: entity.number, at: context.readGeneration), enough))
            }
            do {
                if takesAll || plan.filter != nil {
                    // The matches are taken here, in ID order.
                    try context.scanStored(entity: entity.number, filter: plan.filter,
                                           threads: limited ? 1 : context.scanSplit.threads, at: context.readGeneration) { id, version, record in
                        if limited && matches.count >= enough { throw ScanEnough() }
                        if plan.filterPending && plan.pending.contains(id) { return }
                        if let top {
                            return try top.offer(id: id, version: version, record: record)
                        }
                        // A match is decoded (and checked) only when it is read: not for IDs
                        // and counts, nor for an object loaded here already. (The row's
                        // reference to a registered object, taken here while the object is in
                        // the cache, is its one retain.)
                        var known: ManagedObject?
                        switch wanted {
                        case .all: break
                        case .none:
                            matches.append(FetchRow(id: id, values: [], version: nil))
                            return
                        case .forUnloadedObjects:
                            if let object = context.registered[id] {
                                known = ObjectIdentifier(type(of: object)) == plan.fetchedClass ? object : nil
                                // (A loaded object is read again only to show this state: see
                                // ``Context/followsFetches``.)
                                if !sorted && !object.isFault && (object.baseVersion == version || !context.followsFetches) {
                                    matches.append(FetchRow(id: id, values: [], version: nil, registered: known))
                                    return
                                }
                            }
                        }
                        // (Kept undecoded where it can be, for an object and its sort.)
                        let fetched = wanted == .all ? .decoded(try Store.decodeRecord(record, id: id, entity: entity))
                            : try context.keptRecords.row(record, id: id, entity: entity)
                        matches.append(FetchRow(id: id, fetched: fetched, version: version, registered: known))
                        if limited && matches.count >= enough { throw ScanEnough() }
                    }
                } else {
                    var scratch: [Value] = []
                    try context.coordinator.scanVersioned(entity: entity.number, at: context.readGeneration) { id, version, record in
                        if limited && matches.count >= enough { throw ScanEnough() }
                        if plan.filterPending && plan.pending.contains(id) { return }
                        try record.decode(into: &scratch)
                        try Store.checkRecord(scratch, id: id, entity: entity)
                        if plan.accepts(scratch) { matches.append(FetchRow(id: id, values: scratch, version: version)) }
                    }
                }
            } catch is ScanEnough {}
        }
    }

    /// A child context's read: the candidates in ID order, tested on the values its parent
    /// sees. With an index, the store's matches and the records whose value in an ancestor
    /// context meets the index's condition (the root's changed objects; every object a
    /// child ancestor holds, which may hold values from before its own parent changed
    /// them); the others are as the store has them. Without an index, every record the
    /// parent sees. (Reading every ID the parent sees through it would make a lookup by an
    /// indexed value in a child context, as DataService.write's scratch child makes, read
    /// the whole entity.)
    struct ThroughParent {
        let parent: Context
        let index: (slot: Int, condition: IndexCondition)?

        func read(_ plan: FetchPlan, in context: Context, into matches: inout [FetchRow]) throws -> PendingCondition? {
            let entity = plan.entity
            var candidates: [RecordID]
            if let (slot, condition) = index {
                var found = Set(try context.coordinator.indexedIDs(entity: entity.number, slot: slot, matching: condition))
                var ancestor: Context? = parent
                while let current = ancestor {
                    current.mergeExternalChangesIfAutomatic()
                    for (id, object) in current.parent == nil ? current.dirty : current.registered
                    where id.entity == entity.number && object.exists {
                        if object.isFault || slot >= object.values.count || SecondaryIndex.matches(object.values[slot], condition) {
                            found.insert(id)
                        }
                    }
                    ancestor = current.parent
                }
                candidates = found.sorted()
            } else {
                candidates = parent.currentIDs(entity: entity.number)
            }
            for id in candidates where !plan.pending.contains(id) {
                if matches.count >= plan.enough { break }
                if let values = try parent.currentValues(for: id)?.values, plan.accepts(values) {
                    matches.append(FetchRow(id: id, values: values, version: nil))
                }
            }
            return index.flatMap { PendingCondition(slot: $0.slot, condition: $0.condition) }
        }
    }
}

extension Context {
    /// The plan for `request` (see ``FetchPlan``).
    func makePlan<T: ManagedObject>(_ request: FetchQuery<T>, values wanted: RowValues,
                                    resolver given: CompiledPredicate.Resolver?) throws -> FetchPlan {
        let entity = try entityDescription(request.entityName)
        let compiled = try request.storedPredicate.map { try CompiledPredicate($0, entity: entity, schema: coordinator.schema) }
        let pending = request.includesPendingChanges ? dirty : IDMap<RecordID, ManagedObject>()
        let order = request.sortKeys.isEmpty ? nil : try RowOrder(request.sortKeys, entity: entity, schema: coordinator.schema)
        // A sorted request with a window wants only the first rows in order: the stored
        // matches are offered to `top` as they are read, which decodes only those among the
        // first so far (the changed objects are offered at the end).
        let windowEnd = sortedWindowEnd(request)
        let top = order.flatMap { order in windowEnd.flatMap { TopRows(order: order, wanted: $0, entity: entity) } }
        let access: FetchPlan.Access
        let chosen = plan(request.storedPredicate, entity: entity).access
        // (A context pinned to a generation scans: the indexes follow the newest state.)
        let pinned = readGeneration != nil
        let index: (slot: Int, condition: IndexCondition)? = {
            guard !pinned, case .index(let attribute, let lookup) = chosen,
                  let slot = entity.attributes.firstIndex(where: { $0.name == attribute }) else { return nil }
            return (slot, lookup.condition)
        }()
        if let parent {
            access = .throughParent(.init(parent: parent, index: index))
        } else if top != nil, !pinned, let order, let walk = indexWalk(request, entity: entity, order: order) {
            access = .indexWalk(.init(slot: walk.slot, ascending: walk.ascending))
        } else if let index {
            access = .indexLookup(.init(slot: index.slot, condition: index.condition))
        } else {
            access = .fullScan(.init())
        }
        let filter: RecordFilter? = switch access {
        case .throughParent: nil
        default: compiled.flatMap(RecordFilter.init)
        }
        let filterPending: Bool = switch access {
        case .throughParent: false
        default: pending.contains { $0.key.entity == entity.number }
        }
        return FetchPlan(entity: entity, compiled: compiled, filter: filter, resolver: given ?? memoizedViewValues(),
                         pending: pending, filterPending: filterPending, order: order, windowEnd: windowEnd, top: top,
                         enough: storedMatchesFillingWindow(request), wanted: wanted,
                         fetchedClass: model.objectClass(for: entity.name).flatMap { $0 is T.Type ? ObjectIdentifier($0) : nil },
                         access: access)
    }
}
