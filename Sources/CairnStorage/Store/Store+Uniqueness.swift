/// Uniqueness decided with the commit: a context checks its save's unique values against
/// the store before it commits, but another context may commit the same values in
/// between; the commit checks them again, in the one place commits are serialised.
extension Store {
    /// What the tickets of a commit batch accepted so far claim and change: the state does
    /// not hold their records until the whole batch is applied.
    package struct BatchClaims {
        package var claims: [UniquenessKey: RecordID] = [:]
        /// Raw IDs the accepted tickets put or delete: the state's values for them are stale.
        package var touched = Set<UInt64>()
    }

    /// Each constrained entity's uniqueness groups, as attribute slots.
    package static func uniquenessSlots(_ schema: Schema) -> [UInt16: [[Int]]] {
        var groups: [UInt16: [[Int]]] = [:]
        for entity in schema.entities where !entity.uniqueness.isEmpty {
            groups[entity.number] = entity.uniqueness.compactMap { group in
                let slots = group.compactMap { name in entity.attributes.firstIndex { $0.name == name } }
                return slots.count == group.count && !slots.isEmpty ? slots : nil
            }
        }
        return groups
    }

    /// The conflict, if a put of `operations` claims unique values another record holds:
    /// one in the store (not changed by this ticket or an earlier one of the batch), one
    /// an earlier ticket of the batch wrote, or another put of the same ticket. Otherwise
    /// records the ticket's claims in `batch`, for the tickets after it (`later`), and
    /// returns nil.
    package func uniquenessConflict(_ operations: [RecordOperation], groups: [UInt16: [[Int]]], batch: inout BatchClaims,
                                    later: Bool) throws -> CairnError? {
        guard operations.contains(where: { groups[$0.id.entity] != nil }) else {
            if later { for operation in operations { batch.touched.insert(operation.id.rawValue) } }
            return nil
        }
        let mine = Set(operations.map(\.id.rawValue))
        var claims: [UniquenessKey: RecordID] = [:]
        let schema = self.schema
        for operation in operations {
            guard case .put(let id, let body) = operation, let slotsOfGroups = groups[id.entity] else { continue }
            let values = try body.withUnsafeBytes { try ValueCoding.decode($0) }
            for (group, slots) in slotsOfGroups.enumerated() {
                guard let key = UniquenessKey(entity: id.entity, group: group, slots: slots, values: values) else { continue }
                var rival: RecordID?
                if let other = claims[key], other != id {
                    rival = other
                } else if let other = batch.claims[key], other != id, !mine.contains(other.rawValue) {
                    rival = other
                } else {
                    for candidate in try indexedIDsHoldingLog(entity: id.entity, slot: slots[0], matching: .equal([values[slots[0]]]))
                    where candidate != id && !mine.contains(candidate.rawValue) && !batch.touched.contains(candidate.rawValue) {
                        if slots.count == 1 { rival = candidate; break }
                        // (Not `get`, whose error path reads the log under the lock held here.)
                        guard let stored = try withBody(of: candidate, { try ValueCoding.decode($0) }) else { continue }
                        if UniquenessKey(entity: id.entity, group: group, slots: slots, values: stored) == key { rival = candidate; break }
                    }
                }
                if let rival {
                    let entity = schema.entity(number: id.entity)
                    let names = entity.map { entity in slots.map { entity.attributes[$0].name } } ?? []
                    let described = zip(names, slots).map { "\($0) = \(values[$1])" }.joined(separator: ", ")
                    return CairnError(.conflict,
                        "uniqueness of \(entity?.name ?? "entity \(id.entity)") (\(names.joined(separator: ", "))): \(described) of \(id) is already held by \(rival)\(mine.contains(rival.rawValue) ? " in the same transaction" : ", which a concurrent save may have written first")")
                }
                claims[key] = id
            }
        }
        if later {
            batch.claims.merge(claims) { _, new in new }
            batch.touched.formUnion(mine)
        }
        return nil
    }
}
