import CairnStorage
/// The store's reads, for the layers above: contexts, fetches, live results and the app
/// conveniences reach the store through the coordinator only (one door), which hands each
/// call on as it is.
extension Coordinator {
    /// The sequence number of the last committed transaction.
    var lastSequence: UInt64 { store.lastSequence }

    func get(_ id: RecordID, at generation: StoreGeneration? = nil) throws -> Record? { try store.get(id, at: generation) }

    func getVersioned(_ id: RecordID, at generation: StoreGeneration? = nil) throws -> (record: Record, version: UInt64)? {
        try store.getVersioned(id, at: generation)
    }

    /// ``getVersioned(_:at:)`` of a row kept in `arena` where it can be (``Store/getRow(_:at:keepingIn:)``).
    func getRow(_ id: RecordID, at generation: StoreGeneration? = nil, keepingIn arena: RecordArena) throws -> (row: StoredRow, version: UInt64)? {
        try store.getRow(id, at: generation, keepingIn: arena)
    }

    /// ``getRow(_:at:keepingIn:)`` of each of `ids`, in one state, handed to `body` one by
    /// one (``Store/forEachRow(_:at:keepingIn:_:)``).
    func forEachRow(_ ids: [RecordID], at generation: StoreGeneration? = nil, keepingIn arena: RecordArena,
                    _ body: (Int, (row: StoredRow, version: UInt64)?) throws -> Void) throws {
        try store.forEachRow(ids, at: generation, keepingIn: arena, body)
    }

    func version(of id: RecordID, at generation: StoreGeneration? = nil) -> UInt64 { store.version(of: id, at: generation) }

    func contains(_ id: RecordID, at generation: StoreGeneration? = nil) -> Bool { store.contains(id, at: generation) }

    func versionsAndPresence(_ ids: [RecordID], at generation: StoreGeneration? = nil) -> [(version: UInt64, exists: Bool)] {
        store.versionsAndPresence(ids, at: generation)
    }

    func containsEach(_ ids: [RecordID], at generation: StoreGeneration? = nil) -> [Bool] { store.containsEach(ids, at: generation) }

    func ids(entity: UInt16, at generation: StoreGeneration? = nil) -> [RecordID] { store.ids(entity: entity, at: generation) }

    func count(entity: UInt16, at generation: StoreGeneration? = nil) -> Int { store.count(entity: entity, at: generation) }

    func allocateID(entity: UInt16) throws -> RecordID { try store.allocateID(entity: entity) }

    func lastChange(entities: [UInt16], at generation: StoreGeneration? = nil) -> UInt64 {
        store.lastChange(entities: entities, at: generation)
    }

    func changedRecords(entity: UInt16, after sequence: UInt64) -> [UInt64]? { store.changedRecords(entity: entity, after: sequence) }

    func indexedIDs(entity: UInt16, slot: Int, matching condition: IndexCondition) throws -> [RecordID] {
        try store.indexedIDs(entity: entity, slot: slot, matching: condition)
    }

    func scanVersioned(entity: UInt16, at generation: StoreGeneration? = nil,
                       _ body: (RecordID, UInt64, borrowing StoredRecord) throws -> Void) throws {
        try store.scanVersioned(entity: entity, at: generation, body)
    }

    func scanVersioned(entity: UInt16, parts: Int, minimumPerRun: Int, at generation: StoreGeneration? = nil,
                       where tester: (@Sendable (Int) -> Store.RecordTest)?,
                       _ body: (RecordID, UInt64, borrowing StoredRecord) throws -> Void) throws {
        try store.scanVersioned(entity: entity, parts: parts, minimumPerRun: minimumPerRun, at: generation, where: tester, body)
    }

    @discardableResult
    func scanIndexed(entity: UInt16, slot: Int, matching condition: IndexCondition, first: Int? = nil,
                     _ body: (RecordID, UInt64, borrowing StoredRecord) throws -> Void) throws -> Bool {
        try store.scanIndexed(entity: entity, slot: slot, matching: condition, first: first, body)
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
