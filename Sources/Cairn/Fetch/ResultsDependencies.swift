import CairnCollections
import CairnStorage
/// The records live results depend on: their entity's, and the records their predicate,
/// sorts and sections reach through relationships (`owner.name`, `group.title`,
/// `ANY tags.name`), with the way back from a changed related record to the results'
/// records that reach it: the relationship's inverse, which every change keeps in step
/// with it. So a save of another entity costs the results nothing, and a change of a
/// related record places again only the records that reach it, without a fetch.
struct ResultsDependencies {
    /// One relationship a key path follows: its slot in the records it starts from, the
    /// entity it leads to, and the slot of its inverse in that entity's records.
    struct Hop: Equatable {
        let slot: Int
        let entity: UInt16
        let inverseSlot: Int
    }

    /// The results' entity first, then each other entity a key path reaches, once.
    let entities: [UInt16]
    /// The hops of each key path that follows relationships, from the results' entity on.
    let chains: [[Hop]]
    /// The entities the hops lead to.
    let hopEntities: Set<UInt16>
    /// The slots the key paths read in each related entity's records: a change elsewhere
    /// in such a record (most often its inverse list gaining or losing one record) moves
    /// none of the records that reach it.
    let readSlots: [UInt16: [Int]]

    /// Nil when a key path follows a relationship without an inverse (a changed record
    /// there cannot be traced back to the records that reach it), or names no property
    /// (the fetch says what is wrong).
    init?(keyPaths: [[String]], entity: EntityDescription, schema: Schema) {
        var entities = [entity.number], chains: [[Hop]] = [], readSlots: [UInt16: [Int]] = [:]
        for parts in keyPaths {
            var current = entity, chain: [Hop] = []
            // A relationship followed by a key of its destination is a hop (`owner.name`);
            // one that ends the path (`owner`) or is counted (`dvds.@count`) is read from
            // the record itself.
            for index in parts.indices.dropLast() where parts[index + 1] != "@count" {
                guard let offset = current.relationships.firstIndex(where: { $0.name == parts[index] }),
                      case let relationship = current.relationships[offset],
                      let destination = schema.entity(named: relationship.destination),
                      let inverseName = relationship.inverse,
                      let inverse = destination.relationships.firstIndex(where: { $0.name == inverseName }) else { return nil }
                chain.append(Hop(slot: current.attributes.count + offset, entity: destination.number,
                                 inverseSlot: destination.attributes.count + inverse))
                if !entities.contains(destination.number) { entities.append(destination.number) }
                let next = parts[index + 1]
                guard let read = destination.attributes.firstIndex(where: { $0.name == next })
                    ?? destination.relationships.firstIndex(where: { $0.name == next }).map({ destination.attributes.count + $0 })
                else { return nil }
                if readSlots[destination.number]?.contains(read) != true { readSlots[destination.number, default: []].append(read) }
                current = destination
            }
            if !chain.isEmpty && !chains.contains(chain) { chains.append(chain) }
        }
        self.entities = entities
        self.chains = chains
        hopEntities = Set(chains.joined().map(\.entity))
        self.readSlots = readSlots
    }

    /// ``readDigest(_:context:)`` of the related records that `rows` (the values of the
    /// records just fetched) reach, as the fetch read them; up to 65,536 at each hop (a
    /// record left out is placed again on its first change).
    func reachedDigests(_ rows: IDMap<RecordID, [Value]>, context: Context) -> IDMap<RecordID, Int> {
        var digests = IDMap<RecordID, Int>()
        for chain in chains {
            var level: [[Value]] = []
            var first = true
            for hop in chain {
                var reached = IDMap<RecordID, Bool>()
                func note(_ values: [Value]) {
                    guard hop.slot < values.count, reached.count < 65_536 else { return }
                    for raw in values[hop.slot].referencedIDs { reached[RecordID(rawValue: raw)] = true }
                }
                if first { for (_, values) in rows { note(values) } } else { for values in level { note(values) } }
                first = false
                level = []
                for (id, _) in reached {
                    guard let values = context.viewValues(id) else { continue }
                    if digests[id] == nil { digests[id] = readDigest(of: values, entity: id.entity) }
                    level.append(values)
                }
            }
        }
        return digests
    }

    /// A hash of what the key paths read of a related record, as a fetch's sort and test
    /// read it (``Context/viewValues(_:)``); nil if it cannot be read.
    func readDigest(_ id: RecordID, context: Context) -> Int? {
        context.viewValues(id).map { readDigest(of: $0, entity: id.entity) }
    }

    /// ``readDigest(_:context:)`` of values already read.
    private func readDigest(of values: [Value], entity: UInt16) -> Int {
        ResultsInputs.digest((readSlots[entity] ?? []).map { $0 < values.count ? values[$0] : .null })
    }

    /// The results' entity's records that `changed` (records of ``entities``) touches:
    /// those in it, and those whose key paths reach a changed record whose read values
    /// moved: whose hash differs from the one `seen` holds for it (the values the records
    /// that reach it were placed by; `seen` takes the new hashes of all changed records).
    /// Those reaching it are found through the inverses as the context sees them, as a
    /// fetch there reads them, and as its source has them. Records with unsaved changes in
    /// the context or its ancestors (`pending`) count as reaching a record that moved
    /// further along: such a record keeps the relationship it was given, which a save
    /// elsewhere may have taken out of the inverse. Nil when there are more than `limit`,
    /// or when a changed related record can no longer be read (deleted: which records
    /// reached it is not known).
    func rowsTouched(by changed: IDMap<RecordID, Bool>, pending: [RecordID], seen: inout IDMap<RecordID, Int>, limit: Int,
                     context: Context) throws -> IDMap<RecordID, Bool>? {
        var rows = IDMap<RecordID, Bool>()
        for (id, _) in changed where id.entity == entities[0] { rows[id] = true }
        // Every changed record of an entity a hop leads to is hashed once, against the hash
        // held before this update (a record reached on two paths, or both changed and
        // reached from further along, is judged the same way on each).
        let before = seen
        var moved = IDMap<RecordID, Bool>()
        for (id, _) in changed where hopEntities.contains(id.entity) {
            guard let digest = readDigest(id, context: context) else { return nil }
            if before[id] != digest { moved[id] = true }
            seen[id] = digest
        }
        guard !moved.isEmpty else { return rows.count > limit ? nil : rows }
        for id in pending where id.entity == entities[0] { rows[id] = true }
        for chain in chains {
            // From the far end back: the records at each hop's end that moved, or lead to
            // one that did; then the records one hop nearer that lead to those.
            var level = IDMap<RecordID, Bool>()
            var fartherMoved = false
            for hop in chain.reversed() {
                // (A record with unsaved changes may point past here at a record that moved,
                // whose list no longer names it.)
                if fartherMoved {
                    for id in pending where id.entity == hop.entity { level[id] = true }
                }
                for (id, _) in moved where id.entity == hop.entity {
                    level[id] = true
                    fartherMoved = true
                }
                var nearer = IDMap<RecordID, Bool>()
                for (id, _) in level {
                    guard let versions = try Self.versions(of: id, context: context) else { return nil }
                    for values in versions where hop.inverseSlot < values.count {
                        for raw in values[hop.inverseSlot].referencedIDs { nearer[RecordID(rawValue: raw)] = true }
                    }
                    if nearer.count > limit { return nil }
                }
                level = nearer
            }
            for (id, _) in level { rows[id] = true }
            if rows.count > limit { return nil }
        }
        return rows.count > limit ? nil : rows
    }

    /// Every copy of record `id`'s values the context's chain holds: as a fetch here reads
    /// it, as the context sees it, each context's unsaved copy, and the store's. A record
    /// changed in a context keeps the lists it had while other contexts' saves move records
    /// in and out of the stored one. Nil if the record is gone as the context sees it.
    private static func versions(of id: RecordID, context: Context) throws -> [[Value]]? {
        let fetched = try context.fetchedValues(id), viewed = context.viewValues(id)
        guard fetched != nil || viewed != nil else { return nil }
        var result = [fetched, viewed].compactMap { $0 }
        var level: Context? = context
        var changedSomewhere = false
        while let current = level {
            if let object = current.dirty[id], object.exists, !object.isFault {
                result.append(object.values)
                changedSomewhere = true
            }
            level = current.parent
        }
        if changedSomewhere, let stored = try context.coordinator.get(id, at: context.readGeneration) { result.append(stored.values) }
        return result
    }
}
