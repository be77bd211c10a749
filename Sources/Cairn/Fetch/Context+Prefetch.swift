import CairnCollections
import CairnStorage

/// Prefetching: the objects a fetch's results hold through the relationships the query
/// names (``FetchQuery/relationshipNamesForPrefetching``), loaded with the results,
/// hop by hop, each hop's records read from the store together.
extension Context {
    /// The relationships `request` prefetches, as paths of names checked against the
    /// model: each name a relationship of the entity the path has reached. Throws for one
    /// that is not, naming it.
    func prefetchPaths<T: ManagedObject>(_ request: FetchQuery<T>) throws -> [[String]] {
        try request.relationshipNamesForPrefetching.map { text in
            let path = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            var entity = try entityDescription(request.entityName)
            for name in path {
                guard let relationship = entity.relationships.first(where: { $0.name == name }) else {
                    throw CairnError(.invalidArgument, "cannot prefetch \"\(text)\" of \(request.entityName): \(entity.name) has no relationship \"\(name)\"")
                }
                entity = try entityDescription(relationship.destination)
            }
            return path
        }
    }

    /// Loads what each path of relationship names reaches from `objects`: the objects of
    /// the first relationship of every one of them, then of the next relationship of
    /// those, and so on. Faults met are read from the store together (a child context reads
    /// them through its parent), so a read of the relationships afterwards finds loaded
    /// objects. Throws for a record that cannot be read.
    func prefetch(_ paths: [[String]], from objects: [ManagedObject]) throws {
        for path in paths {
            var sources = objects
            for (index, name) in path.enumerated() {
                sources = try prefetchHop(name, from: sources, collecting: index < path.count - 1)
                if sources.isEmpty { break }
            }
        }
    }

    /// Loads the objects that relationship `name` of `sources` holds and, if `collecting`,
    /// returns them, each once, less those whose records are gone. The faults are read in
    /// runs of ``prefetchRun`` as they are met, while the objects just made are in the
    /// cache (a run over all of them after would miss it on each).
    private func prefetchHop(_ name: String, from sources: [ManagedObject], collecting: Bool) throws -> [ManagedObject] {
        var targets: [ManagedObject] = []
        var unread: [ManagedObject] = []
        unread.reserveCapacity(Self.prefetchRun)
        // Marks the faults of the run being gathered (their `faultBatch`): one met again is
        // in it already.
        let run = FaultBatch(objects: [])
        // Objects met loaded already, which several sources may hold (the owner of many
        // DVDs): each is collected once.
        var seen = Set<ObjectIdentifier>()
        var runStart = 0
        // The slot of `name`, and the targets' entity and class, looked up once per entity
        // met rather than per object.
        var slots: (entity: UInt16, slot: Int?)?
        var resolved: ResolvedEntity?
        func readRun() throws {
            try loadTogether(unread, marked: run)
            unread.removeAll(keepingCapacity: true)
            if collecting {
                // (Those of the run just read, in the cache still.)
                var kept = runStart
                for index in runStart..<targets.count where !targets[index].isFault && targets[index].exists {
                    targets.swapAt(kept, index)
                    kept += 1
                }
                targets.removeLast(targets.count - kept)
                runStart = targets.count
            }
        }
        for source in sources {
            if source.isFault { try load(source) }
            guard source.exists else { continue }
            if slots?.entity != source.entity.number {
                let entity = source.entity
                slots = (entity.number, entity.relationships.firstIndex { $0.name == name }.map { entity.attributes.count + $0 })
            }
            guard let slot = slots?.slot else { continue }
            let raws: [UInt64]
            switch source.currentValue(at: slot) {
            case .reference(let raw): raws = [raw]
            case .references(let list): raws = list
            default: continue
            }
            for raw in raws {
                let id = RecordID(rawValue: raw)
                var made = false
                // (The probe of ``objectOrFault(_:resolved:made:)``, written out: called, it
                // took this hop's gain over relationship faults away, measured.)
                let found = registered.value(forKey: id) { () -> ManagedObject? in
                    if resolved?.number != id.entity {
                        guard let entity = coordinator.entity(number: id.entity) else { return nil }
                        resolved = (id.entity, entity, model.objectClass(for: entity.name))
                    }
                    made = true
                    return resolved.map { makeFault(id, entity: $0.entity, type: $0.type) }
                }
                guard let target = found else { continue }
                if !made {
                    if target.isFault && target.faultBatch === run { continue }  // in this run already
                    // A fault of a batch (a fetch's, a relationship's) loads with its batch,
                    // and one a fetch read loads from that.
                    if target.isFault && (target.faultBatch != nil || target.prefetchedVersion != nil) { try load(target) }
                    if !target.isFault {
                        if collecting && seen.insert(ObjectIdentifier(target)).inserted { targets.append(target) }
                        continue
                    }
                }
                target.faultBatch = run
                unread.append(target)
                if collecting { targets.append(target) }
                if unread.count == Self.prefetchRun { try readRun() }
            }
        }
        try readRun()
        return targets
    }

    /// Loads `faults`, each marked as of the batch `run`, which it lets go of: from the
    /// store in one look (one lock, however many records); through the parent one by one.
    private func loadTogether(_ faults: [ManagedObject], marked run: FaultBatch) throws {
        for fault in faults where fault.faultBatch === run { fault.faultBatch = nil }
        guard parent == nil else {
            for fault in faults where fault.isFault { try load(fault) }
            return
        }
        guard !faults.isEmpty else { return }
        try coordinator.forEachRow(faults.map(\.recordID), at: readGeneration, keepingIn: keptRecords) { index, row in
            if faults[index].isFault { faults[index].take(row) }
        }
    }

    /// How many records one look at the store reads for a prefetch: enough that the lock
    /// is taken rarely, few enough that a save waiting for it waits briefly, and that the
    /// objects of a run are in the cache still when it is read.
    static let prefetchRun = 512
}
