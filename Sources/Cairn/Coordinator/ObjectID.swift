import CairnCollections
import CairnStorage
/// A managed object's permanent identity: Sendable, Hashable, stable across launches.
/// Objects stay in their context; IDs cross isolations (`context.object(with: id)`).
public struct ObjectID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The record's ID in the store. Two object IDs are equal, and ordered, by it alone.
    public let recordID: RecordID
    /// The name of the object's entity.
    public let entityName: String

    /// The ID of the record `recordID`, of the entity named `entityName`.
    public init(recordID: RecordID, entityName: String) {
        self.recordID = recordID
        self.entityName = entityName
    }

    public static func == (a: ObjectID, b: ObjectID) -> Bool { a.recordID == b.recordID }
    public func hash(into hasher: inout Hasher) { hasher.combine(recordID) }
    public static func < (a: ObjectID, b: ObjectID) -> Bool { a.recordID < b.recordID }

    /// `Person/E1-5`.
    public var description: String { "\(entityName)/\(recordID)" }

    /// `cairn:///Person/E1-5`, parseable by ``init(uri:)``.
    public var uriRepresentation: String { "cairn:///\(entityName)/\(recordID)" }

    /// Parses ``uriRepresentation`` (`cairn:///Person/E1-5`); nil for any other string.
    public init?(uri: String) {
        guard uri.hasPrefix("cairn:///") else { return nil }
        let parts = uri.dropFirst("cairn:///".count).split(separator: "/")
        guard parts.count == 2, let id = RecordID(String(parts[1])) else { return nil }
        self.init(recordID: id, entityName: String(parts[0]))
    }
}

extension CairnError {
    /// The object an error is about (a validation failure), if one.
    public var objectID: ObjectID? {
        guard let recordID, let entityName else { return nil }
        return ObjectID(recordID: recordID, entityName: entityName)
    }
}

extension MergeConflict {
    /// The conflicting record as an object ID.
    public var objectID: ObjectID { ObjectID(recordID: recordID, entityName: entityName) }
}

/// What one save changed, as delivered to other contexts and observers.
public struct ChangeSet: Sendable, Equatable {
    /// Inserted objects.
    public var inserted: Set<ObjectID> {
        get { pending?.sets.inserted ?? sets.inserted }
        set { takePending(); sets.inserted = newValue }
    }
    /// Updated objects and the names of the keys that changed.
    public var updated: [ObjectID: Set<String>] {
        get { pending?.sets.updated ?? sets.updated }
        set { takePending(); sets.updated = newValue }
    }
    /// Deleted objects.
    public var deleted: Set<ObjectID> {
        get { pending?.sets.deleted ?? sets.deleted }
        set { takePending(); sets.deleted = newValue }
    }
    /// The store transaction's sequence number.
    public var sequence: UInt64 = 0

    private var sets = ChangeSets()
    /// The sets, when they are built only on their first read (see ``PendingChangeSets``).
    private var pending: PendingChangeSets?

    /// An empty change set.
    public init() {}

    /// The change set of transaction `sequence`.
    init(sequence: UInt64, sets: ChangeSets) {
        self.sequence = sequence
        self.sets = sets
    }

    /// The change set of transaction `sequence`, whose sets `pending` builds when first read.
    init(sequence: UInt64, pending: PendingChangeSets) {
        self.sequence = sequence
        self.pending = pending
    }

    /// Whether the save inserted, updated and deleted nothing.
    public var isEmpty: Bool {
        if let pending { return pending.isEmpty }
        return sets.inserted.isEmpty && sets.updated.isEmpty && sets.deleted.isEmpty
    }

    public static func == (a: ChangeSet, b: ChangeSet) -> Bool {
        a.sequence == b.sequence && a.inserted == b.inserted && a.updated == b.updated && a.deleted == b.deleted
    }

    /// Makes the sets this value's own, built if they were pending, before one is set.
    private mutating func takePending() {
        guard let pending else { return }
        sets = pending.sets
        self.pending = nil
    }
}

/// The three sets of a ``ChangeSet``.
struct ChangeSets: Sendable {
    var inserted: Set<ObjectID> = []
    var updated: [ObjectID: Set<String>] = [:]
    var deleted: Set<ObjectID> = []
}

/// The sets of a change set built on their first read, once, from what its transaction
/// changed: a reader's ``Coordinator/advance()`` returns what each transaction it moved
/// past changed, which a caller that only moves on never reads (sets of a large import
/// cost a reader as much as taking the records in).
final class PendingChangeSets: Sendable {
    /// Whether the transaction changed nothing.
    let isEmpty: Bool
    private let build: @Sendable () -> ChangeSets
    private let built = Protected<ChangeSets?>(nil)

    init(isEmpty: Bool, build: @escaping @Sendable () -> ChangeSets) {
        self.isEmpty = isEmpty
        self.build = build
    }

    /// The sets, built by the first reader (copies of a change set share them).
    var sets: ChangeSets {
        built.withLock { built in
            if let built { return built }
            let made = build()
            built = made
            return made
        }
    }
}
