/// The entities an app works with: ``ManagedObject`` subclasses, and entities built at
/// run time (the dynamic API). Entities are numbered in the order given; an existing
/// store keeps its own numbers (matched by name).
///
/// ```swift
/// let model = try Model(Person.self, DVD.self)
/// ```
public struct Model: Sendable {
    public let schema: Schema
    let classes: [String: ClassBox]

    public init(_ types: ManagedObject.Type..., entities: [EntityDescription] = [], version: UInt32 = 1) throws {
        try self.init(types: types, entities: entities, version: version)
    }

    public init(types: [ManagedObject.Type], entities: [EntityDescription] = [], version: UInt32 = 1) throws {
        var descriptions: [EntityDescription] = []
        var classes: [String: ClassBox] = [:]
        for type in types {
            let layout = PropertyLayout.of(type)
            if let ambiguity = layout.ambiguity { throw CairnError(.invalidArgument, ambiguity) }
            guard classes[layout.entity.name] == nil else {
                throw CairnError(.invalidArgument, "entity \(layout.entity.name) is declared twice in the model")
            }
            classes[layout.entity.name] = ClassBox(type: type)
            descriptions.append(layout.entity)
        }
        descriptions += entities
        for index in descriptions.indices { descriptions[index].number = UInt16(index + 1) }
        let schema = Schema(version: version, entities: descriptions)
        try schema.validate()
        self.schema = schema
        self.classes = classes
    }

    /// The class of an entity, or nil for a run-time entity.
    public func objectClass(for entityName: String) -> ManagedObject.Type? { classes[entityName]?.type }
}

/// A class reference. Metatypes carry no state, so sharing them is safe.
struct ClassBox: @unchecked Sendable {
    let type: ManagedObject.Type
}
