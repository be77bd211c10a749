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
    public var inserted: Set<ObjectID> = []
    /// Updated objects and the names of the keys that changed.
    public var updated: [ObjectID: Set<String>] = [:]
    /// Deleted objects.
    public var deleted: Set<ObjectID> = []
    /// The store transaction's sequence number.
    public var sequence: UInt64 = 0

    /// An empty change set.
    public init() {}

    /// Whether the save inserted, updated and deleted nothing.
    public var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty }
}
