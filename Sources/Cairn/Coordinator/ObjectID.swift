import CairnStorage
/// A managed object's permanent identity: Sendable, Hashable, stable across launches.
/// Objects stay in their context; IDs cross isolations (`context.object(with: id)`).
public struct ObjectID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let recordID: RecordID
    public let entityName: String

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
    public var objectID: ObjectID { ObjectID(recordID: recordID, entityName: entityName) }
}

/// What one save changed, as delivered to other contexts and observers.
public struct ChangeSet: Sendable, Equatable {
    public var inserted: Set<ObjectID> = []
    /// Updated objects and the names of the keys that changed.
    public var updated: [ObjectID: Set<String>] = [:]
    public var deleted: Set<ObjectID> = []
    /// The store transaction's sequence number.
    public var sequence: UInt64 = 0

    public init() {}

    public var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty }
}
