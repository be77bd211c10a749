import CairnStorage
/// The store's reads, for the layers above: contexts, fetches, live results and the app
/// conveniences reach the store through the coordinator only (one door), which hands each
/// call on as it is.
extension Coordinator {
    /// The sequence number of the last committed transaction.
    var lastSequence: UInt64 { store.lastSequence }

    func get(_ id: RecordID) throws -> Record? { try store.get(id) }

    func getVersioned(_ id: RecordID) throws -> (record: Record, version: UInt64)? { try store.getVersioned(id) }

    func version(of id: RecordID) -> UInt64 { store.version(of: id) }

    func contains(_ id: RecordID) -> Bool { store.contains(id) }

    func containsEach(_ ids: [RecordID]) -> [Bool] { store.containsEach(ids) }

    func ids(entity: UInt16) -> [RecordID] { store.ids(entity: entity) }

    func count(entity: UInt16) -> Int { store.count(entity: entity) }

    func allocateID(entity: UInt16) throws -> RecordID { try store.allocateID(entity: entity) }

    func lastChange(entities: [UInt16]) -> UInt64 { store.lastChange(entities: entities) }

    func changedRecords(entity: UInt16, after sequence: UInt64) -> [UInt64]? { store.changedRecords(entity: entity, after: sequence) }

    func indexedIDs(entity: UInt16, slot: Int, matching condition: IndexCondition) throws -> [RecordID] {
        try store.indexedIDs(entity: entity, slot: slot, matching: condition)
    }

    func scanVersioned(entity: UInt16, _ body: (RecordID, UInt64, borrowing StoredRecord) throws -> Void) throws {
        try store.scanVersioned(entity: entity, body)
    }

    func scanVersioned(entity: UInt16, parts: Int, minimumPerRun: Int,
                       where tester: (@Sendable (Int) -> Store.RecordTest)?,
                       _ body: (RecordID, UInt64, borrowing StoredRecord) throws -> Void) throws {
        try store.scanVersioned(entity: entity, parts: parts, minimumPerRun: minimumPerRun, where: tester, body)
    }

    func scanIndexed(entity: UInt16, slot: Int, matching condition: IndexCondition,
                     _ body: (RecordID, UInt64, borrowing StoredRecord) throws -> Void) throws {
        try store.scanIndexed(entity: entity, slot: slot, matching: condition, body)
    }

    func scanInIndexOrder(entity: UInt16, slot: Int, ascending: Bool,
                          _ body: (RecordID, UInt64, Value, borrowing StoredRecord) throws -> Bool) throws {
        try store.scanInIndexOrder(entity: entity, slot: slot, ascending: ascending, body)
    }
}

/// The writes that do not come from a context's save.
extension Coordinator {
    /// Commits an object queue's records (``ObjectQueue``): its own entity, which no
    /// context holds objects of. The contexts and observers hear of it as of any save (a
    /// put is a new element).
    func commitQueue(_ changes: [Change], durability: Durability) throws {
        let sequence = try store.commit(changes, durability: durability)
        _ = announce(sequence, except: nil, count: changes.count) { index in
            switch changes[index] {
            case .put(let id, _): (id, .insert, .names([]))
            case .delete(let id): (id, .delete, .names([]))
            }
        }
    }

}
