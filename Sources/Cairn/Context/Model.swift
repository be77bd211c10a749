import CairnStorage
/// The entities an app works with: ``ManagedObject`` subclasses, and entities built at
/// run time (the dynamic API). The classes a listed class reaches through its
/// relationships join the model without being listed. Entities are numbered in the order
/// given, reached classes after the listed ones; an existing store keeps its own numbers
/// (matched by name).
///
/// ```swift
/// let model = try Model(Person.self, DVD.self)
/// ```
public struct Model: Sendable {
    /// The model's entities as a schema, numbered in the model's order (a store keeps its
    /// own numbers: see ``Coordinator/schema``).
    public let schema: Schema
    let classes: [String: ClassBox]

    /// A model of the classes `types`, those they reach, and the run-time `entities`, at the
    /// app's model version `version`. Throws `.invalidArgument` for a class it cannot describe
    /// (a stored property declared with no wrapper, a key path that reads no property of its
    /// class, two classes of one entity name) or a schema that does not hold together.
    public init(_ types: ManagedObject.Type..., entities: [EntityDescription] = [], version: UInt32 = 1) throws {
        try self.init(types: types, entities: entities, version: version)
    }

    /// ``init(_:entities:version:)`` with the classes in an array.
    public init(types: [ManagedObject.Type], entities: [EntityDescription] = [], version: UInt32 = 1) throws {
        var descriptions: [EntityDescription] = []
        var classes: [String: ClassBox] = [:]
        // The listed classes, then those their relationships reach, breadth first (the
        // order numbers them for a new store, so listing them all or some gives one schema).
        var all = types
        var seen = Set(types.map(ObjectIdentifier.init))
        let dynamic = Set(entities.map(\.name))
        var next = 0
        while next < all.count {
            let type = all[next]
            next += 1
            let layout = PropertyLayout.of(type)
            if let ambiguity = layout.ambiguity { throw CairnError(.invalidArgument, ambiguity) }
            if let unstored = layout.unstored { throw CairnError(.invalidArgument, unstored) }
            if let other = classes[layout.entity.name] {
                throw CairnError(.invalidArgument, other.type == type ? "entity \(layout.entity.name) is declared twice in the model"
                                 : "entity \(layout.entity.name) is declared by two classes, \(other.type) and \(type)")
            }
            classes[layout.entity.name] = ClassBox(type: type)
            descriptions.append(layout.entity)
            for target in layout.relationshipTargets where target != ManagedObject.self && !dynamic.contains(target.entityName) {
                if seen.insert(ObjectIdentifier(target)).inserted { all.append(target) }
            }
        }
        for (index, type) in all.enumerated() { try Self.resolveKeyPaths(of: type, at: index, in: &descriptions) }
        descriptions += entities
        for index in descriptions.indices { descriptions[index].number = UInt16(index + 1) }
        let schema = Schema(version: version, entities: descriptions)
        try schema.validate()
        self.schema = schema
        self.classes = classes
    }

    /// Names what `type` declared by key path: inverses, uniqueness groups and indexes.
    /// (Done once every class has its layout: an inverse's key path is read on an instance
    /// of the destination, whose own layout may name this class's.)
    ///
    /// An inverse is declared on one side, as in SwiftData (a key path on each side of a
    /// pair makes a circular reference Swift's type checker refuses): the other side takes
    /// it too, unless it names one of its own.
    private static func resolveKeyPaths(of type: ManagedObject.Type, at index: Int, in descriptions: inout [EntityDescription]) throws {
        var entity = descriptions[index]
        for pending in PropertyLayout.of(type).inverseKeyPaths where pending.relationship < entity.relationships.count {
            let relationship = entity.relationships[pending.relationship]
            guard let name = KeyPathNames.name(of: pending.keyPath.keyPath, in: pending.target, target: type) else {
                throw CairnError(.invalidArgument, "the inverse of \(entity.name).\(relationship.name) is a key path that reads "
                                 + "no relationship of \(pending.target.entityName) to \(entity.name)")
            }
            entity.relationships[pending.relationship].inverse = name
            if let other = descriptions.firstIndex(where: { $0.name == pending.target.entityName }), other != index,
               let back = descriptions[other].relationships.firstIndex(where: { $0.name == name }),
               descriptions[other].relationships[back].inverse == nil {
                descriptions[other].relationships[back].inverse = relationship.name
            } else if pending.target.entityName == entity.name,
                      let back = entity.relationships.firstIndex(where: { $0.name == name }), entity.relationships[back].inverse == nil {
                entity.relationships[back].inverse = relationship.name
            }
        }
        defer { descriptions[index] = entity }
        func names(_ groups: [[AnyKeyPath]], _ what: String) throws -> [[String]] {
            try groups.map { group in
                try group.map { keyPath in
                    guard let name = KeyPathNames.name(of: keyPath, in: type, target: nil) else {
                        throw CairnError(.invalidArgument, "a key path in \(entity.name)'s \(what) reads no attribute of \(entity.name)")
                    }
                    return name
                }
            }
        }
        entity.uniqueness += try names(type.uniqueKeyPaths, "uniqueKeyPaths")
        entity.indexes += try names(type.indexKeyPaths, "indexKeyPaths")
    }

    /// The class of an entity, or nil for a run-time entity.
    public func objectClass(for entityName: String) -> ManagedObject.Type? { classes[entityName]?.type }
}

/// A class reference. Metatypes carry no state, so sharing them is safe.
struct ClassBox: @unchecked Sendable {
    let type: ManagedObject.Type
}
