/// A store's schema: its entities, their attributes and relationships. Stored in every
/// snapshot (FORMAT.md §3), so any tool can read a store without the app's classes.
///
/// A record of an entity holds one ``Value`` per attribute, in order, then one per
/// relationship, in order (to-one: `.reference` or `.null`; to-many: `.references`).
public struct Schema: Hashable, Sendable {
    /// The app's own version number for this model.
    public var version: UInt32
    /// The entities, each with its number.
    public var entities: [EntityDescription]

    /// A schema of `entities`, at the app's model version `version`.
    public init(version: UInt32 = 1, entities: [EntityDescription]) {
        self.version = version
        self.entities = entities
    }

    /// The entity named `name`, or nil.
    public func entity(named name: String) -> EntityDescription? { entities.first { $0.name == name } }
    /// The entity of number `number`, or nil.
    public func entity(number: UInt16) -> EntityDescription? { entities.first { $0.number == number } }

    /// Whether an entity has the number `number` (without copying its description out).
    package func hasEntity(number: UInt16) -> Bool { entities.contains { $0.number == number } }

    /// Entities Cairn keeps for itself in a store (the object queues' elements): an app's
    /// model need not name them, and a migration to a model without them keeps them.
    package static let internalEntityNames: Set<String> = ["CairnQueueElement"]

    /// A 64-bit hash of everything that shapes stored records and their rules (not the
    /// app's version number nor renaming identifiers). Equal hashes: the same layout.
    public var versionHash: UInt64 {
        var writer = ByteWriter()
        SchemaCoding.encodeEntities(entities, into: &writer, forHash: true)
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325  // FNV-1a 64
        for byte in writer.bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return hash
    }

    /// Checks names are unique and non-empty, entity numbers are unique and non-zero,
    /// relationship destinations and inverses exist and agree, and defaults match types.
    public func validate() throws {
        func fail(_ message: String) -> CairnError { CairnError(.invalidArgument, "invalid schema: \(message)") }
        guard entities.count <= FormatLimits.maxEntities else { throw fail("too many entities") }
        // Every name is stored length-prefixed, and an empty optional name reads as none.
        func checkName(_ name: String?, _ what: @autoclosure () -> String) throws {
            guard let name else { return }
            guard !name.isEmpty else { throw fail("\(what()) is empty") }
            guard name.utf8.count <= FormatLimits.maxNameBytes else {
                throw fail("\(what()) is \(name.utf8.count) bytes long; the limit is \(FormatLimits.maxNameBytes)")
            }
        }
        // Lookups by name are hashed, so validation stays linear in the schema's size.
        var byName: [String: EntityDescription] = [:]
        var relationshipsOf: [String: [String: RelationshipDescription]] = [:]
        var numbers = Set<UInt16>()
        for entity in entities {
            guard !entity.name.isEmpty else { throw fail("an entity has an empty name") }
            try checkName(entity.name, "entity name \(entity.name.prefix(40))")
            try checkName(entity.renamingIdentifier, "renaming identifier of \(entity.name)")
            guard byName.updateValue(entity, forKey: entity.name) == nil else { throw fail("entity \(entity.name) is declared twice") }
            relationshipsOf[entity.name] = Dictionary(entity.relationships.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        }
        for entity in entities {
            guard entity.attributes.count <= FormatLimits.maxProperties, entity.relationships.count <= FormatLimits.maxProperties,
                  entity.attributes.count + entity.relationships.count <= FormatLimits.maxValuesPerRecord,
                  entity.uniqueness.count <= FormatLimits.maxProperties, entity.indexes.count <= FormatLimits.maxProperties else {
                throw fail("\(entity.name) has more properties, uniqueness groups or indexes than the format allows (\(FormatLimits.maxProperties))")
            }
            guard entity.number != 0 else { throw fail("entity \(entity.name) has number 0 (numbers start at 1)") }
            guard numbers.insert(entity.number).inserted else { throw fail("entity number \(entity.number) is used twice") }
            var properties = Set<String>()
            for attribute in entity.attributes {
                guard !attribute.name.isEmpty else { throw fail("\(entity.name) has an attribute with an empty name") }
                try checkName(attribute.name, "attribute name \(entity.name).\(attribute.name.prefix(40))")
                try checkName(attribute.renamingIdentifier, "renaming identifier of \(entity.name).\(attribute.name)")
                guard properties.insert(attribute.name).inserted else {
                    throw fail("\(entity.name).\(attribute.name) is declared twice")
                }
                if let value = attribute.defaultValue, !value.isNull, !attribute.type.accepts(value) {
                    throw fail("default \(value) of \(entity.name).\(attribute.name) is not a \(attribute.type)")
                }
                try attribute.defaultValue?.checkLimits("default of \(entity.name).\(attribute.name)")
            }
            for relationship in entity.relationships {
                guard !relationship.name.isEmpty else { throw fail("\(entity.name) has a relationship with an empty name") }
                try checkName(relationship.name, "relationship name \(entity.name).\(relationship.name.prefix(40))")
                try checkName(relationship.inverse, "inverse of \(entity.name).\(relationship.name)")
                try checkName(relationship.renamingIdentifier, "renaming identifier of \(entity.name).\(relationship.name)")
                guard properties.insert(relationship.name).inserted else {
                    throw fail("\(entity.name).\(relationship.name) is declared twice")
                }
                guard let destination = byName[relationship.destination] else {
                    throw fail("\(entity.name).\(relationship.name) points at unknown entity \(relationship.destination)")
                }
                if let inverseName = relationship.inverse {
                    guard let inverse = relationshipsOf[destination.name]?[inverseName] else {
                        throw fail("inverse \(destination.name).\(inverseName) of \(entity.name).\(relationship.name) does not exist")
                    }
                    guard inverse.destination == entity.name, inverse.inverse == relationship.name else {
                        throw fail("\(entity.name).\(relationship.name) and \(destination.name).\(inverseName) are not each other's inverse")
                    }
                }
            }
            let attributeNames = Set(entity.attributes.map(\.name))
            for group in entity.uniqueness + entity.indexes {
                guard !group.isEmpty, group.count <= FormatLimits.maxProperties else {
                    throw fail("\(entity.name) has an empty or oversized uniqueness or index group")
                }
                for name in group where !attributeNames.contains(name) {
                    throw fail("\(entity.name) has no attribute \(name) to index or make unique")
                }
            }
        }
    }
}

/// An entity of the schema: its name, number, attributes and relationships.
///
/// A value type whose fields live in one shared, copy-on-write box: every managed
/// object, save item and lookup holds an entity, and copying one is a single retain
/// rather than one per field.
public struct EntityDescription: Hashable, Sendable {
    /// The fields. Mutated only through ``unique()``, i.e. while this struct holds the
    /// only reference, so no other thread can observe a write, and no two accesses to a
    /// field overlap: the fields skip the run-time exclusivity check that the getters,
    /// inlined into other modules, would otherwise pay.
    @usableFromInline final class Box: @unchecked Sendable {
        @usableFromInline @exclusivity(unchecked) var name: String
        @usableFromInline @exclusivity(unchecked) var number: UInt16
        @usableFromInline @exclusivity(unchecked) var attributes: [AttributeDescription] { didSet { kinds = Kinds(attributes, relationships) } }
        @usableFromInline @exclusivity(unchecked) var relationships: [RelationshipDescription] { didSet { kinds = Kinds(attributes, relationships) } }
        @usableFromInline @exclusivity(unchecked) var uniqueness: [[String]]
        @usableFromInline @exclusivity(unchecked) var indexes: [[String]]
        @usableFromInline @exclusivity(unchecked) var renamingIdentifier: String?
        /// Derived from the properties, kept with them (every record checked reads them).
        @usableFromInline @exclusivity(unchecked) private(set) var kinds: Kinds

        @usableFromInline init(name: String, number: UInt16, attributes: [AttributeDescription], relationships: [RelationshipDescription],
             uniqueness: [[String]], indexes: [[String]], renamingIdentifier: String?) {
            self.name = name
            self.number = number
            self.attributes = attributes
            self.relationships = relationships
            self.uniqueness = uniqueness
            self.indexes = indexes
            self.renamingIdentifier = renamingIdentifier
            kinds = Kinds(attributes, relationships)
        }

        @usableFromInline func copy() -> Box {
            Box(name: name, number: number, attributes: attributes, relationships: relationships,
                uniqueness: uniqueness, indexes: indexes, renamingIdentifier: renamingIdentifier)
        }
    }

    @usableFromInline var box: Box

    @inlinable mutating func unique() -> Box {
        if !isKnownUniquelyReferenced(&box) { box = box.copy() }
        return box
    }

    /// The entity's name, unique in the schema.
    @inlinable public var name: String {
        get { box.name }
        set { unique().name = newValue }
    }
    /// The entity's number in record IDs (FORMAT.md §2.3); unique in the schema, from 1.
    @inlinable public var number: UInt16 {
        get { box.number }
        set { unique().number = newValue }
    }
    /// The attributes, in the order of their values in each record.
    @inlinable public var attributes: [AttributeDescription] {
        get { box.attributes }
        set { unique().attributes = newValue }
    }
    /// The relationships, in the order of their values in each record, after the attributes'.
    @inlinable public var relationships: [RelationshipDescription] {
        get { box.relationships }
        set { unique().relationships = newValue }
    }
    /// Groups of attribute names whose combined values must be unique.
    @inlinable public var uniqueness: [[String]] {
        get { box.uniqueness }
        set { unique().uniqueness = newValue }
    }
    /// Compound indexes (single-attribute indexes are flagged on the attribute).
    @inlinable public var indexes: [[String]] {
        get { box.indexes }
        set { unique().indexes = newValue }
    }
    /// The name this entity had in an earlier model version, for migration.
    @inlinable public var renamingIdentifier: String? {
        get { box.renamingIdentifier }
        set { unique().renamingIdentifier = newValue }
    }

    /// An entity described at run time, whose objects are read and written by key
    /// (``ManagedObject/subscript(_:)``): give it to a ``Container`` as one of its
    /// `dynamicEntities`. A model numbers its entities itself, whatever `number` says.
    public init(name: String, number: UInt16, attributes: [AttributeDescription] = [],
                relationships: [RelationshipDescription] = [], uniqueness: [[String]] = [],
                indexes: [[String]] = [], renamingIdentifier: String? = nil) {
        box = Box(name: name, number: number, attributes: attributes, relationships: relationships,
                  uniqueness: uniqueness, indexes: indexes, renamingIdentifier: renamingIdentifier)
    }

    public static func == (lhs: EntityDescription, rhs: EntityDescription) -> Bool {
        if lhs.box === rhs.box { return true }
        return lhs.name == rhs.name && lhs.number == rhs.number && lhs.attributes == rhs.attributes
            && lhs.relationships == rhs.relationships && lhs.uniqueness == rhs.uniqueness
            && lhs.indexes == rhs.indexes && lhs.renamingIdentifier == rhs.renamingIdentifier
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(number)
        hasher.combine(attributes)
        hasher.combine(relationships)
        hasher.combine(uniqueness)
        hasher.combine(indexes)
        hasher.combine(renamingIdentifier)
    }

    /// The number of values in each record: attributes, then relationships.
    @inlinable public var valueCount: Int { attributes.count + relationships.count }

    /// The kinds of value each slot may hold, as ``Value/kindBit`` masks: what a check
    /// of a record's values compares each value's bit with, one AND per value.
    @usableFromInline package struct Kinds: Sendable {
        /// Per slot, attributes then relationships: what the store takes there (an
        /// attribute's type or null, a to-one reference or null, a to-many's list).
        @usableFromInline package let stored: [UInt32]
        /// Per attribute: its type's kinds, and null only where it is optional (what a
        /// save validates).
        @usableFromInline package let required: [UInt32]

        init(_ attributes: [AttributeDescription], _ relationships: [RelationshipDescription]) {
            let null = Value.nullKindBit
            stored = attributes.map { $0.type.acceptedKinds | null }
                + relationships.map { $0.isToMany ? 1 << UInt32(Value.Tag.references.rawValue) : 1 << UInt32(Value.Tag.reference.rawValue) | null }
            required = attributes.map { $0.type.acceptedKinds | ($0.isOptional ? null : 0) }
        }
    }

    package var kinds: Kinds { box.kinds }

    /// ``firstValueOfWrongKind(in:from:)`` of `count` values read one by one by `value`;
    /// only those of the slots in `onlySlots`, if given (a mask: bit `i` for slot `i`).
    package func firstValueOfWrongKind(count: Int, from start: Int = 0, onlySlots: UInt64? = nil, value: (Int) -> Value) -> Int? {
        let required = box.kinds.required
        let end = min(required.count, count)
        guard var rest = onlySlots else {
            for index in start..<max(start, end) where value(index).kindBit & required[index] == 0 { return index }
            return nil
        }
        while rest != 0 {
            let index = rest.trailingZeroBitCount
            rest &= rest &- 1
            guard index < end else { break }
            if index >= start, value(index).kindBit & required[index] == 0 { return index }
        }
        return nil
    }

    /// The first attribute at or after `start` whose value in `values` is of a kind the
    /// attribute does not take (nil for a required one included); nil when all fit. The
    /// values are compared as kind bits in place, none copied: the check on every object
    /// a save validates.
    package func firstValueOfWrongKind(in values: [Value], from start: Int = 0) -> Int? {
        let required = box.kinds.required
        return values.withUnsafeBufferPointer { values -> Int? in
            required.withUnsafeBufferPointer { required in
                for index in start..<max(start, min(required.count, values.count)) where values[index].kindBit & required[index] == 0 {
                    return index
                }
                return nil
            }
        }
    }

    /// The positions of the attributes a snapshot stores an index for (FORMAT.md §6.6),
    /// ascending: those marked indexed, and the first attribute of each compound index and
    /// uniqueness group (the ones lookups go through).
    package var storedIndexSlots: [Int] {
        var slots = Set(attributes.indices.filter { attributes[$0].isIndexed })
        for group in indexes + uniqueness {
            if let first = group.first, let slot = attributes.firstIndex(where: { $0.name == first }) { slots.insert(slot) }
        }
        return slots.sorted()
    }
}

/// The type of an attribute's values (each takes one ``Value`` case).
public enum AttributeType: UInt8, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// A Boolean; a signed integer of 8, 16, 32 or 64 bits; a 32- or 64-bit floating-point
    /// number.
    case bool = 1, int8 = 2, int16 = 3, int32 = 4, int64 = 5, float = 6, double = 7
    /// A string, binary data, a date, a UUID, a URL, a decimal number.
    case string = 8, binary = 9, date = 10, uuid = 11, url = 12, decimal = 13
    /// A `Codable` value stored archived (as bytes).
    case archived = 14

    public var description: String {
        switch self {
        case .bool: "bool"
        case .int8: "int8"
        case .int16: "int16"
        case .int32: "int32"
        case .int64: "int64"
        case .float: "float"
        case .double: "double"
        case .string: "string"
        case .binary: "binary"
        case .date: "date"
        case .uuid: "uuid"
        case .url: "url"
        case .decimal: "decimal"
        case .archived: "archived"
        }
    }

    /// The ``Value/kindBit`` of the values this type accepts (null aside).
    package var acceptedKinds: UInt32 {
        let tag: Value.Tag
        switch self {
        case .bool: tag = .boolFalse
        case .int8: tag = .int8
        case .int16: tag = .int16
        case .int32: tag = .int32
        case .int64: tag = .int64
        case .float: tag = .float
        case .double: tag = .double
        case .string: tag = .string
        case .binary: tag = .bytes
        case .date: tag = .date
        case .uuid: tag = .uuid
        case .url: tag = .url
        case .decimal: tag = .decimal
        case .archived: tag = .archived
        }
        return 1 << UInt32(tag.rawValue)
    }

    /// Whether a (non-null) value is of this type.
    public func accepts(_ value: Value) -> Bool {
        switch (self, value) {
        case (.bool, .bool), (.int8, .int8), (.int16, .int16), (.int32, .int32), (.int64, .int64),
             (.float, .float), (.double, .double), (.string, .string), (.binary, .bytes), (.date, .date),
             (.uuid, .uuid), (.url, .url), (.decimal, .decimal), (.archived, .archived):
            return true
        default:
            return false
        }
    }
}

/// An attribute of an entity: its name, its type, and the rules its values follow.
public struct AttributeDescription: Hashable, Sendable {
    /// The attribute's name.
    public var name: String
    /// The type of its values.
    public var type: AttributeType
    /// Whether it may be nil: a save refuses an object whose required attribute is.
    public var isOptional: Bool
    /// The value a new object starts with; nil for none (`.null`).
    public var defaultValue: Value?
    /// Whether the attribute is indexed, so that a fetch can look its values up.
    public var isIndexed: Bool
    /// The attribute's name in an earlier model version, for migration.
    public var renamingIdentifier: String?

    /// An attribute named `name` of `type`: required, with no default and no index, unless
    /// given.
    public init(name: String, type: AttributeType, isOptional: Bool = false, defaultValue: Value? = nil,
                isIndexed: Bool = false, renamingIdentifier: String? = nil) {
        self.name = name
        self.type = type
        self.isOptional = isOptional
        self.defaultValue = defaultValue
        self.isIndexed = isIndexed
        self.renamingIdentifier = renamingIdentifier
    }
}

/// What deleting an object does to the objects a relationship of it points at.
public enum DeleteRule: UInt8, Hashable, Sendable, CaseIterable {
    /// Remove the deleted object from the other side (the default).
    case nullify = 0
    /// Delete the objects on the other side too.
    case cascade = 1
    /// Refuse the delete while the relationship is not empty.
    case deny = 2
    /// Leave the other side as it is.
    case noAction = 3
}

/// A relationship of an entity: its name, the entity it points at, its inverse and its
/// rules. A record holds a to-one relationship as a `.reference` (or `.null`), a to-many
/// one as `.references`.
public struct RelationshipDescription: Hashable, Sendable {
    /// The relationship's name.
    public var name: String
    /// The name of the entity it points at.
    public var destination: String
    /// Whether it holds a list of objects rather than at most one.
    public var isToMany: Bool
    /// The name of the destination's relationship that points back, if any: the two are
    /// kept in step.
    public var inverse: String?
    /// What deleting an object does to the objects this relationship points at.
    public var deleteRule: DeleteRule
    /// Whether a to-one relationship may be empty: a save refuses an object whose required
    /// one is.
    public var isOptional: Bool
    /// The relationship's name in an earlier model version, for migration.
    public var renamingIdentifier: String?

    /// A relationship named `name` to the entity named `destination`: to-one, optional, with
    /// no inverse and `.nullify` on delete, unless given.
    public init(name: String, destination: String, isToMany: Bool = false, inverse: String? = nil,
                deleteRule: DeleteRule = .nullify, isOptional: Bool = true, renamingIdentifier: String? = nil) {
        self.name = name
        self.destination = destination
        self.isToMany = isToMany
        self.inverse = inverse
        self.deleteRule = deleteRule
        self.isOptional = isOptional
        self.renamingIdentifier = renamingIdentifier
    }
}

extension EntityDescription {
    /// The name of slot `slot` of a record (attributes, then relationships, FORMAT.md §2.2),
    /// or nil past them.
    package func propertyName(slot: Int) -> String? {
        if slot < attributes.count { return slot >= 0 ? attributes[slot].name : nil }
        return slot - attributes.count < relationships.count ? relationships[slot - attributes.count].name : nil
    }
}
