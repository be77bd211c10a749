import CairnCollections
import CairnStorage
import Foundation

/// Sits between contexts and the store: opens the store with the model's schema,
/// turns a context's save into one store transaction (with optimistic locking on
/// record versions and referential checks), and broadcasts each committed change set to
/// the other contexts. Safe to use from many contexts on many threads at once.
public final class Coordinator: Sendable {
    package let store: Store
    /// The schema in force, with entity numbers as stored.
    public let schema: Schema
    let entitiesByName: [String: EntityDescription]
    let entitiesByNumber: EntityMap<EntityDescription>
    /// Whether any entity declares a uniqueness constraint (saves skip the check otherwise).
    let hasUniquenessConstraints: Bool
    /// Whether the entity of each number has uniqueness constraints (indexed by number).
    let constrainedEntities: [Bool]
    private let subscribers = Protected<[WeakInbox]>([])
    private let observers = Protected<[UUID: @Sendable (ChangeSet) -> Void]>([:])

    /// Opens (or creates) the store at `path` for `schema`. Entities keep the numbers the
    /// store gave them (matched by name or renaming identifier); new entities get fresh
    /// numbers. If the layout differs from the stored one, `migration` decides: migrate
    /// (lightweight by default, or through given stages), refuse with `.schemaMismatch`,
    /// or recreate an empty store.
    public init(path: String, schema requested: Schema, options: StoreOptions = StoreOptions(),
                migration: MigrationPolicy = .lightweight) throws {
        var noCreate = options
        noCreate.createIfMissing = false
        let store: Store
        if options.fileSystem.exists(joinPath(path, StoreFileName.manifest)) {
            var existing = try Store.open(at: path, options: noCreate)
            let aligned = SchemaMapping.align(requested, with: existing.schema)
            if aligned.versionHash != existing.schema.versionHash {
                let stored = existing.schema
                try existing.close()
                switch migration {
                case .refuse:
                    throw CairnError(.schemaMismatch, Self.mismatchMessage(path: path, stored: stored, requested: aligned))
                case .lightweight:
                    try Store.migrate(at: path, to: [MigrationStage(requested)], options: options)
                case .lightweightAllowingDataLoss:
                    try Store.migrate(at: path, to: [MigrationStage(requested, allowingDataLoss: true)], options: options)
                case .stages(let stages):
                    try Store.migrate(at: path, to: stages, options: options)
                case .recreate:
                    try Store.recreate(at: path, schema: requested, options: options)
                }
                existing = try Store.open(at: path, options: options)
                let reopened = SchemaMapping.align(requested, with: existing.schema)
                guard reopened.versionHash == existing.schema.versionHash else {
                    let stored = existing.schema
                    try existing.close()
                    throw CairnError(.schemaMismatch, Self.mismatchMessage(path: path, stored: stored, requested: reopened))
                }
            }
            store = existing
        } else {
            store = try Store.open(at: path, schema: requested, options: options)
        }
        self.store = store
        self.schema = store.schema
        entitiesByName = Dictionary(uniqueKeysWithValues: self.schema.entities.map { ($0.name, $0) })
        var byNumber = EntityMap<EntityDescription>()
        for entity in self.schema.entities { byNumber[entity.number] = entity }
        entitiesByNumber = byNumber
        hasUniquenessConstraints = self.schema.entities.contains { !$0.uniqueness.isEmpty }
        var constrained = [Bool](repeating: false, count: Int(self.schema.entities.map(\.number).max() ?? 0) + 1)
        for entity in self.schema.entities where !entity.uniqueness.isEmpty { constrained[Int(entity.number)] = true }
        constrainedEntities = constrained
    }

    static func mismatchMessage(path: String, stored: Schema, requested: Schema) -> String {
        var differences: [String] = []
        for entity in requested.entities {
            guard let old = stored.entity(named: entity.name) else { differences.append("+\(entity.name)"); continue }
            if old != entity { differences.append("~\(entity.name)") }
        }
        for entity in stored.entities where requested.entity(named: entity.name) == nil { differences.append("-\(entity.name)") }
        return "store at \(path) was made with a different model (entities \(differences.joined(separator: ", "))); migrate the store or open it with its own model"
    }

    /// Makes every save durable, closes the store's files and releases its lock; later
    /// saves throw `.closed`. Safe to call more than once. A failed sync is thrown: the
    /// store is closed all the same, and saves made with `.deferred` durability since
    /// the last sync may be lost (every durable one is kept).
    public func close() throws { try store.close() }

    /// Makes every save so far durable (one sync of the log): for saves made with
    /// ``Durability/deferred``.
    public func sync() throws { try store.sync() }

    /// The entity named `name`, with its number as stored; nil if the schema has none.
    public func entity(named name: String) -> EntityDescription? { entitiesByName[name] }
    /// The entity of number `number` (the top 16 bits of its records' IDs); nil if the
    /// schema has none.
    public func entity(number: UInt16) -> EntityDescription? { entitiesByNumber[number] }

    /// The object ID of the record `id`; nil if the schema has no entity of its number.
    public func objectID(for id: RecordID) -> ObjectID? {
        entitiesByNumber[id.entity].map { ObjectID(recordID: id, entityName: $0.name) }
    }

    /// A new permanent object ID for an entity.
    public func newObjectID(entity name: String) throws -> ObjectID {
        guard let entity = entitiesByName[name] else {
            throw CairnError(.invalidArgument, "entity \(name) is not in the model")
        }
        return ObjectID(recordID: try store.allocateID(entity: entity.number), entityName: name)
    }

    // MARK: Saving

    /// One object's part of a save.
    struct SaveItem: Sendable {
        enum Kind: Sendable { case insert, update, delete }
        var id: RecordID
        var kind: Kind
        /// The record's values, which the save checks the references of. Empty for an
        /// entity without relationships: nothing to check, and no reason to hold (or, for
        /// a kept record, decode) them.
        var values: [Value]
        /// The version the context read (updates and deletes).
        var baseVersion: UInt64
        /// Which keys an update changed (turned into names only if a listener hears of it).
        var changedKeys: ChangedKeys = .names([])
        /// What the store writes, made by a ``makePreparer()`` preparer from `values`.
        var operation: RecordOperation
    }

    /// Checks and encodes the records of a save for the store (see ``Store/Preparer``).
    func makePreparer() -> Store.Preparer { Store.Preparer(schema: schema) }

    /// The keys an update changed: bit `i` of a mask for the value at `i`, named by
    /// `names` (the record's property names in value order), or the names themselves.
    enum ChangedKeys: Sendable {
        case mask(UInt64, names: [String])
        case names(Set<String>)

        var isEmpty: Bool {
            switch self {
            case .mask(let mask, _): return mask == 0
            case .names(let names): return names.isEmpty
            }
        }
    }

    /// Changed-key sets by entity and mask: a save has few patterns (usually one per
    /// entity), so a short list searched in order beats building a set for each object.
    private struct ChangedKeyNames {
        private var known: [(entity: UInt16, mask: UInt64, names: Set<String>)] = []

        mutating func names(_ keys: ChangedKeys, entity: UInt16) -> Set<String> {
            switch keys {
            case .names(let names): return names
            case .mask(let mask, let all):
                if let found = known.first(where: { $0.entity == entity && $0.mask == mask }) { return found.names }
                var names = Set<String>()
                for index in all.indices where index < 64 && mask & (1 << UInt64(index)) != 0 { names.insert(all[index]) }
                if known.count < 64 { known.append((entity, mask, names)) }
                return names
            }
        }
    }

    /// Commits a context's changes as one transaction. Throws `.conflict` if a record
    /// changed since it was read, `.validation` if a reference points nowhere. Returns
    /// the change set delivered to the other contexts and observers; when there are
    /// none, only its sequence number is filled in.
    /// `uniquenessCheckedAt`: the store's last sequence number when the context checked
    /// the save's unique values (``Store/commit(prepared:for:expecting:durability:uniquenessCheckedAt:)``).
    /// `reads`: versions of records the save relied on without writing them, expected too.
    /// `extra`: operations on Cairn's own records (kept undo) in the same transaction.
    func save(_ items: [SaveItem], from source: Inbox?, durability: Durability? = nil,
              uniquenessCheckedAt: UInt64? = nil, reads: [ExpectedVersion] = [], author: String? = nil,
              keptOnDeletion: [UInt16: [Int]] = [:], also extra: [RecordOperation] = []) throws -> ChangeSet {
        var operations: [RecordOperation] = []
        operations.reserveCapacity(items.count)
        var expected: [ExpectedVersion] = []
        expected.reserveCapacity(items.reduce(0) { $0 + ($1.kind == .insert ? 0 : 1) })
        // Built only if a saved entity has relationships to check.
        var saved: (deleted: [RecordID: UInt64], inserted: Set<RecordID>)?
        // Items are read in place, field by field: `for item in items` would copy each whole
        // item (retaining its values, key names and encoded body, then releasing them).
        try items.withUnsafeBufferPointer { items in
            for index in items.indices {
                let id = items[index].id, kind = items[index].kind
                if kind != .delete, entitiesByNumber[id.entity]?.relationships.isEmpty != true {
                    let sets = saved ?? (Dictionary(items.filter { $0.kind == .delete }.map { ($0.id, $0.baseVersion) }) { first, _ in first },
                                         Set(items.filter { $0.kind == .insert }.map(\.id)))
                    saved = sets
                    try checkReferences(of: items[index], deleted: sets.deleted, inserted: sets.inserted)
                }
                operations.append(items[index].operation)
                if kind != .insert || items[index].baseVersion != 0 {
                    expected.append(ExpectedVersion(id: id, version: items[index].baseVersion))
                }
            }
        }
        expected += reads
        // (Cairn's own records written with the save, such as kept undo: no version expected,
        // and no listener told.)
        operations += extra
        // For history: the slots each update changed, which the context knows (a record it
        // read at the version this commit expects); only in a store that keeps history.
        let slots: [UInt64?]? = store.options.history == nil ? nil : items.map { item in
            guard item.kind == .update, case .mask(let mask, _) = item.changedKeys else { return nil }
            return mask
        } + extra.map { _ in nil }
        let sequence = try store.commit(prepared: operations, for: schema, expecting: expected, durability: durability,
                                        uniquenessCheckedAt: uniquenessCheckedAt, author: author, changedSlots: slots,
                                        keptOnDeletion: keptOnDeletion)
        return announce(sequence, except: source, count: items.count) { (items[$0].id, items[$0].kind, items[$0].changedKeys) }
    }

    /// Commits the records a batch operation prepared (``Context/batchInsert(_:from:durability:_:)``,
    /// ``Context/batchUpdate(_:durability:_:)``, ``Context/batchDelete(_:durability:)``) as
    /// one transaction, expecting the versions it read them at, and tells the other
    /// contexts and the observers what changed (the caller, `source`, takes its own batch
    /// in itself). Every operation is of one `kind`; `id(i)` is the record of operation `i`,
    /// and `keys` the changed keys of each update, in operation order (empty when there
    /// are none). The IDs come from the caller, which has them, rather than from the
    /// operations (reading an operation back copies its body, a retain and a release each).
    func commitBatch(_ operations: [RecordOperation], from source: Inbox, kind: SaveItem.Kind, id: (Int) -> RecordID,
                     expecting expected: [ExpectedVersion], keys: [ChangedKeys], durability: Durability?,
                     author: String? = nil, keptOnDeletion: [UInt16: [Int]] = [:]) throws -> ChangeSet {
        let sequence = try store.commit(prepared: operations, for: schema, expecting: expected, durability: durability, author: author,
                                        keptOnDeletion: keptOnDeletion)
        return announce(sequence, except: source, count: operations.count) { index in
            (id(index), kind, keys.isEmpty ? .names([]) : keys[index])
        }
    }

    /// The change set of committed transaction `sequence`, given to the contexts other
    /// than `source` and to the observers. `change(i)` is the transaction's change `i` of
    /// `count`. When nobody listens, only the sequence number is filled in: the sets are
    /// built only for someone to give them to (most saves have nobody), or when `filled`.
    func announce(_ sequence: UInt64, except source: Inbox?, count: Int, filled: Bool = false,
                  _ change: (Int) -> (id: RecordID, kind: SaveItem.Kind, keys: ChangedKeys)) -> ChangeSet {
        announce(sequence, to: listeners(except: source), count: count, filled: filled, change)
    }

    /// ``announce(_:except:count:filled:_:)`` to `listening`, found by ``listeners(except:)``.
    func announce(_ sequence: UInt64, to listening: Listeners, count: Int, filled: Bool = false,
                  _ change: (Int) -> (id: RecordID, kind: SaveItem.Kind, keys: ChangedKeys)) -> ChangeSet {
        guard filled || !listening.isEmpty else { return ChangeSet(sequence: sequence, sets: ChangeSets()) }
        let changeSet = ChangeSet(sequence: sequence, sets: Self.changeSets(count: count, entities: entitiesByNumber, change))
        for inbox in listening.inboxes { inbox.post(changeSet) }
        for callback in listening.observers { callback(changeSet) }
        return changeSet
    }

    /// The sets of a change set: `change(i)` is the transaction's change `i` of `count`;
    /// changes to entities that `entities` lacks are left out.
    static func changeSets(count: Int, entities: EntityMap<EntityDescription>,
                           _ change: (Int) -> (id: RecordID, kind: SaveItem.Kind, keys: ChangedKeys)) -> ChangeSets {
        var sets = ChangeSets()
        var counts = (inserted: 0, updated: 0, deleted: 0)
        for index in 0..<count {
            switch change(index).kind {
            case .insert: counts.inserted += 1
            case .update: counts.updated += 1
            case .delete: counts.deleted += 1
            }
        }
        sets.inserted.reserveCapacity(counts.inserted)
        sets.updated.reserveCapacity(counts.updated)
        sets.deleted.reserveCapacity(counts.deleted)
        var names = ChangedKeyNames()
        // Changes come in runs of one entity: each run's name is looked up once.
        var last: (number: UInt16, name: String)?
        for index in 0..<count {
            let (recordID, kind, keys) = change(index)
            let name: String
            if let last, last.number == recordID.entity {
                name = last.name
            } else {
                guard let entity = entities[recordID.entity] else { continue }
                name = entity.name
                last = (recordID.entity, name)
            }
            let id = ObjectID(recordID: recordID, entityName: name)
            switch kind {
            case .insert: sets.inserted.insert(id)
            case .update: sets.updated[id] = names.names(keys, entity: recordID.entity)
            case .delete: sets.deleted.insert(id)
            }
        }
        return sets
    }

    /// Each reference of `item` must name a record that exists after the save: one in the
    /// store that the save does not delete (`deleted`: each with the version its delete
    /// expects), or one it inserts.
    private func checkReferences(of item: SaveItem, deleted: [RecordID: UInt64], inserted: Set<RecordID>) throws {
        guard let entity = entitiesByNumber[item.id.entity] else {
            throw CairnError(.invalidArgument, "\(item.id) belongs to no entity of the model")
        }
        for (offset, relationship) in entity.relationships.enumerated() {
            let value = item.values[entity.attributes.count + offset]
            let targets = value.referencedIDs
            for raw in targets {
                let target = RecordID(rawValue: raw)
                let deletedVersion = deleted[target]
                let exists = deletedVersion == nil && (inserted.contains(target) || store.contains(target))
                guard exists else {
                    // A record deleted by a concurrent save (it has a version: it changed since
                    // the store opened) is a conflict for the merge policy, not a mistake.
                    if deletedVersion == nil, store.version(of: target) != 0 {
                        throw CairnError(.conflict,
                                         "\(entity.name) \(item.id): relationship '\(relationship.name)' points at \(target), which a concurrent save deleted")
                    }
                    // A link to a record this save deletes, where another save changed either
                    // record since it was read (and may have made or undone the link): the
                    // commit would conflict, and the merge by the policy settles the link.
                    if let deletedVersion, store.version(of: target) != deletedVersion
                        || (item.kind == .update && store.version(of: item.id) != item.baseVersion) {
                        throw CairnError(.conflict,
                                         "\(entity.name) \(item.id): relationship '\(relationship.name)' points at \(target), which this save deletes, and a concurrent save changed one of them")
                    }
                    throw CairnError(.validation,
                                     "\(entity.name) \(item.id): relationship '\(relationship.name)' points at \(target), which does not exist")
                }
            }
        }
    }

    // MARK: Broadcasting

    func subscribe(_ inbox: Inbox) {
        subscribers.withLock { list in
            list.removeAll { $0.inbox == nil }
            list.append(WeakInbox(inbox: inbox))
        }
    }

    /// Who hears of a save made from `source`: the other contexts' inboxes and the observers.
    func listeners(except source: Inbox?) -> Listeners {
        let inboxes = subscribers.withLock { list in list.compactMap { $0.inbox === source ? nil : $0.inbox } }
        return Listeners(inboxes: inboxes, observers: observers.withLock { Array($0.values) })
    }

    /// Who hears of a save (``listeners(except:)``).
    struct Listeners {
        let inboxes: [Inbox]
        let observers: [@Sendable (ChangeSet) -> Void]
        var isEmpty: Bool { inboxes.isEmpty && observers.isEmpty }
    }

    /// Calls `observer` (on the saving thread) after every committed save. Returns a
    /// token for ``removeObserver(_:)``.
    @discardableResult
    public func addObserver(_ observer: @escaping @Sendable (ChangeSet) -> Void) -> UUID {
        let token = UUID()
        observers.withLock { $0[token] = observer }
        return token
    }

    /// Stops calling the observer that ``addObserver(_:)`` returned `token` for.
    public func removeObserver(_ token: UUID) {
        observers.withLock { $0[token] = nil }
    }
}

/// Change sets waiting for a context to merge them, on its own isolation: at its next use,
/// or, for a context that merges on an executor it knows (``Context/mergeAutomatically(on:)``),
/// as soon as that executor runs the job a post schedules (one for a burst of posts).
final class Inbox: Sendable {
    private struct State {
        var pending: [ChangeSet] = []
        /// Whether a merge job is scheduled and has not drained yet.
        var scheduled = false
        var wake: (@Sendable () -> Void)?
        /// Whether posts are let go of: the context reads a past state and merges nothing.
        var ignoring = false
    }
    private let state = Protected(State())

    func post(_ changes: ChangeSet) {
        let wake = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.ignoring else { return nil }
            state.pending.append(changes)
            guard let wake = state.wake, !state.scheduled else { return nil }
            state.scheduled = true
            return wake
        }
        wake?()  // (outside the lock: it schedules a job, which drains it)
    }

    var hasPending: Bool { state.withLock { !$0.pending.isEmpty } }

    /// Lets go of what is pending and of every post from now on.
    func ignore() {
        state.withLock { state in
            state.ignoring = true
            state.pending = []
        }
    }

    func drain() -> [ChangeSet] {
        state.withLock { state in
            state.scheduled = false
            defer { state.pending = [] }
            return state.pending
        }
    }

    /// The change sets of transactions up to `sequence`, taken out; later ones stay.
    func drain(through sequence: UInt64) -> [ChangeSet] {
        state.withLock { state in
            state.scheduled = false
            let taken = state.pending.filter { $0.sequence <= sequence }
            state.pending.removeAll { $0.sequence <= sequence }
            return taken
        }
    }

    /// The job a post scheduled has run, whether it drained or not (a context that keeps
    /// a stable snapshot leaves the change sets waiting): the next post schedules another.
    func jobRan() {
        state.withLock { $0.scheduled = false }
    }

    /// Has every post from now on schedule a merge through `wake` (nil: none).
    func setWake(_ wake: (@Sendable () -> Void)?) {
        let now = state.withLock { state -> (@Sendable () -> Void)? in
            state.wake = wake
            guard let wake, !state.pending.isEmpty, !state.scheduled else { return nil }
            state.scheduled = true
            return wake
        }
        now?()
    }
}

struct WeakInbox: Sendable {
    weak var inbox: Inbox?
}
