import CairnCollections
import CairnStorage
import Foundation

/// A Foundation predicate expression with a Boolean value that has a ``FetchPredicate`` form.
protocol FetchPredicateConvertible {
    func fetchPredicate() throws -> FetchPredicate
}

/// A Foundation predicate expression with a value that has a ``PredicateExpression`` form.
protocol FetchExpressionConvertible {
    func fetchExpression() throws -> PredicateExpression
}

/// A part of a typed predicate with no ``FetchPredicate`` form, named by its type.
struct UnsupportedPredicate: Error, CustomStringConvertible {
    var part: String?
    init(_ part: Any? = nil) { self.part = part.map { "\(type(of: $0))" } }
    var description: String { "a part the store cannot test" + (part.map { ": \($0)" } ?? "") }
}

private func convert(_ expression: Any) throws -> PredicateExpression {
    guard let convertible = expression as? any FetchExpressionConvertible else { throw UnsupportedPredicate(expression) }
    return try convertible.fetchExpression()
}

func convertBool(_ expression: Any) throws -> FetchPredicate {
    if let convertible = expression as? any FetchPredicateConvertible { return try convertible.fetchPredicate() }
    // A Boolean key path (`$0.flag`) is `flag == YES`.
    return .comparison(try convert(expression), .equal, .constant(.bool(true)), [], .direct)
}

extension PredicateExpressions.Conjunction: FetchPredicateConvertible {
    func fetchPredicate() throws -> FetchPredicate { .and([try convertBool(lhs), try convertBool(rhs)]) }
}

extension PredicateExpressions.Disjunction: FetchPredicateConvertible {
    func fetchPredicate() throws -> FetchPredicate { .or([try convertBool(lhs), try convertBool(rhs)]) }
}

extension PredicateExpressions.Negation: FetchPredicateConvertible {
    func fetchPredicate() throws -> FetchPredicate { .not(try convertBool(wrapped)) }
}

extension PredicateExpressions.Equal: FetchPredicateConvertible {
    func fetchPredicate() throws -> FetchPredicate { .comparison(try convert(lhs), .equal, try convert(rhs), [], .direct) }
}

extension PredicateExpressions.NotEqual: FetchPredicateConvertible {
    func fetchPredicate() throws -> FetchPredicate { .comparison(try convert(lhs), .notEqual, try convert(rhs), [], .direct) }
}

extension PredicateExpressions.Comparison: FetchPredicateConvertible {
    func fetchPredicate() throws -> FetchPredicate {
        let mapped: ComparisonOperator
        switch op {
        case .lessThan: mapped = .less
        case .lessThanOrEqual: mapped = .lessOrEqual
        case .greaterThan: mapped = .greater
        case .greaterThanOrEqual: mapped = .greaterOrEqual
        @unknown default: throw UnsupportedPredicate()
        }
        return .comparison(try convert(lhs), mapped, try convert(rhs), [], .direct)
    }
}

extension PredicateExpressions.SequenceContains: FetchPredicateConvertible {
    /// `[a, b].contains($0.x)` is `x IN {a, b}`.
    func fetchPredicate() throws -> FetchPredicate {
        .comparison(try convert(element), .in, try convert(sequence), [], .direct)
    }
}

extension PredicateExpressions.SequenceStartsWith: FetchPredicateConvertible {
    func fetchPredicate() throws -> FetchPredicate {
        .comparison(try convert(base), .beginsWith, try convert(prefix), [], .direct)
    }
}

extension PredicateExpressions.CollectionContainsCollection: FetchPredicateConvertible {
    /// `$0.name.contains("x")` is `name CONTAINS "x"`.
    func fetchPredicate() throws -> FetchPredicate {
        .comparison(try convert(base), .contains, try convert(other), [], .direct)
    }
}

extension PredicateExpressions.Value: FetchExpressionConvertible {
    func fetchExpression() throws -> PredicateExpression {
        if let attribute = value as? any AttributeValue { return .constant(attribute.cairnValue) }
        if let object = value as? ManagedObject { return .constant(.reference(object.recordID.rawValue)) }
        if let list = value as? [any AttributeValue] { return .list(list.map { .constant($0.cairnValue) }) }
        if let flag = value as? Bool { return .constant(.bool(flag)) }
        throw UnsupportedPredicate()
    }
}

extension PredicateExpressions.Value: FetchPredicateConvertible where Output == Bool {
    func fetchPredicate() throws -> FetchPredicate { .constant(value) }
}

extension PredicateExpressions.NilLiteral: FetchExpressionConvertible {
    func fetchExpression() throws -> PredicateExpression { .constant(.null) }
}

extension PredicateExpressions.KeyPath: FetchExpressionConvertible {
    /// `$0.a.b`: the names of the properties, found by probing a bare object.
    func fetchExpression() throws -> PredicateExpression {
        var prefix: [String] = []
        if !(root is any VariableExpression) {
            guard case .keyPath(let parts) = try convert(root) else { throw UnsupportedPredicate() }
            prefix = parts
        }
        guard let type = Root.Output.self as? ManagedObject.Type,
              let name = KeyPathNames.name(of: keyPath, in: type, target: objectType(Output.self)) else { throw UnsupportedPredicate() }
        return .keyPath(prefix + [name])
    }
}

extension PredicateExpressions.OptionalFlatMap: FetchExpressionConvertible {
    /// `$0.owner?.username`: the key path through the optional.
    func fetchExpression() throws -> PredicateExpression {
        guard case .keyPath(let base) = try convert(wrapped) else { throw UnsupportedPredicate() }
        guard case .keyPath(let rest) = try convert(transform) else { throw UnsupportedPredicate() }
        return .keyPath(base + rest)
    }
}

extension PredicateExpressions.Variable: FetchExpressionConvertible {
    func fetchExpression() throws -> PredicateExpression { .keyPath([]) }
}

protocol VariableExpression {}

/// The managed-object class inside `T?` or `[T]`, if any.
private protocol ObjectContainer { static var objectType: ManagedObject.Type? { get } }
extension Optional: ObjectContainer { static var objectType: ManagedObject.Type? { Wrapped.self as? ManagedObject.Type } }
extension Array: ObjectContainer { static var objectType: ManagedObject.Type? { Element.self as? ManagedObject.Type } }

private func objectType(_ type: Any.Type) -> ManagedObject.Type? {
    (type as? ManagedObject.Type) ?? (type as? ObjectContainer.Type)?.objectType
}
extension PredicateExpressions.Variable: VariableExpression {}

/// Finds the property a key path reads by setting one slot at a time of a bare object
/// to a marker value and seeing which one the key path returns.
enum KeyPathNames {
    /// Key paths are immutable once made, so sharing them between threads is safe.
    struct Key: Hashable, @unchecked Sendable {
        let keyPath: AnyKeyPath
    }

    private static let cache = Protected<[Key: String]>([:])

    static func name(of keyPath: AnyKeyPath, in type: ManagedObject.Type, target targetType: ManagedObject.Type?) -> String? {
        if let known = cache.withLock({ $0[Key(keyPath: keyPath)] }) { return known }
        let layout = PropertyLayout.of(type)
        let entity = layout.entity
        for slot in layout.names.indices {
            let probe = type.init()
            let marker: Value?
            let target = targetType.map { $0.init() } ?? ManagedObject(dynamic: EntityDescription(name: "probe", number: 0))
            if slot < entity.attributes.count {
                // (Two values cannot mark one slot among many: a Bool is marked alone.)
                marker = mark(probe, slot: slot, of: entity)
            } else {
                marker = nil
                probe.detachedRelations[slot] = [target]
            }
            guard let read = probe[keyPath: keyPath] else { continue }
            let found: Bool
            if let marker {
                found = reads(read, marker)
            } else if let object = read as? ManagedObject {
                found = object === target
            } else if let objects = read as? [ManagedObject] {
                found = objects.count == 1 && objects[0] === target
            } else {
                found = false
            }
            if found {
                let name = layout.names[slot]
                cache.withLock { $0[Key(keyPath: keyPath)] = name }
                return name
            }
        }
        return nil
    }

    private static let paths = Protected<[Key: [String]]>([:])

    /// The attribute `keyPath` reads, as a key path of names: an attribute of `type`
    /// (`["name"]`), or of the class a to-one relationship of `type` holds
    /// (`["owner", "username"]`, for `\DVD.owner?.username`); nil for anything else.
    static func path(of keyPath: AnyKeyPath, in type: ManagedObject.Type) -> [String]? {
        if let known = paths.withLock({ $0[Key(keyPath: keyPath)] }) { return known }
        let layout = PropertyLayout.of(type)
        let entity = layout.entity
        var found: [String]?
        if let name = name(of: keyPath, in: type, target: nil), entity.attributes.contains(where: { $0.name == name }) {
            found = [name]
        }
        // Through each to-one relationship: its destination's attributes marked one at a time.
        search: for (index, relationship) in entity.relationships.enumerated() where found == nil && !relationship.isToMany {
            guard index < layout.relationshipTargets.count, layout.relationshipTargets[index] != ManagedObject.self else { continue }
            let targetType = layout.relationshipTargets[index]
            let targetEntity = PropertyLayout.of(targetType).entity
            for slot in targetEntity.attributes.indices {
                let target = targetType.init()
                guard let marker = mark(target, slot: slot, of: targetEntity) else { continue }
                let probe = type.init()
                probe.detachedRelations[entity.attributes.count + index] = [target]
                if let read = probe[keyPath: keyPath], reads(read, marker) {
                    found = [relationship.name, targetEntity.attributes[slot].name]
                    break search
                }
            }
        }
        if let found { paths.withLock { $0[Key(keyPath: keyPath)] = found } }
        return found
    }

    /// `keyPath` as a person reads it, where the runtime can spell it (names are lost for
    /// the computed properties Cairn's wrappers make, on some platforms): else its type.
    /// The relationship of `type` that `keyPath` reads (`\Person.pets`, `\DVD.owner`), by
    /// name; nil for anything else.
    static func relationship(of keyPath: AnyKeyPath, in type: ManagedObject.Type) -> String? {
        let layout = PropertyLayout.of(type)
        let relationships = layout.entity.relationships
        // The probe's relationship holds an object of the relationship's own class, so that
        // a typed read of it finds the object: one probe per class of target.
        var tried = Set<ObjectIdentifier>()
        for index in relationships.indices {
            let target: ManagedObject.Type? = index < layout.relationshipTargets.count && layout.relationshipTargets[index] != ManagedObject.self
                ? layout.relationshipTargets[index] : nil
            guard tried.insert(ObjectIdentifier(target ?? ManagedObject.self)).inserted else { continue }
            if let name = name(of: keyPath, in: type, target: target), relationships.contains(where: { $0.name == name }) { return name }
        }
        return nil
    }

    static func spelled(_ keyPath: AnyKeyPath) -> String {
        let text = keyPath.debugDescription
        return text.contains("<computed") ? "a \(Swift.type(of: keyPath))" : text
    }

    /// Sets attribute `slot` of `object` to a marker value and returns it (nil for a type
    /// that has none); a Bool is marked by setting it and clearing the entity's others.
    private static func mark(_ object: ManagedObject, slot: Int, of entity: EntityDescription) -> Value? {
        let marker: Value?
        if entity.attributes[slot].type == .bool {
            for other in entity.attributes.indices where entity.attributes[other].type == .bool {
                object.values[other] = .bool(false)
            }
            marker = .bool(true)
        } else {
            marker = markerValue(for: entity.attributes[slot].type)
        }
        if let marker { object.values[slot] = marker }
        return marker
    }

    /// Whether `read`, what a key path gave, is `marker` (optional or not).
    private static func reads(_ read: Any, _ marker: Value) -> Bool {
        (read as? any AttributeValue)?.cairnValue == marker || ((read as? (any AttributeValue)?) ?? nil)?.cairnValue == marker
    }

    private static func markerValue(for type: AttributeType) -> Value? {
        switch type {
        case .bool: return .bool(true)
        case .int8: return .int8(91)
        case .int16: return .int16(23_117)
        case .int32: return .int32(1_515_870_810)
        case .int64: return .int64(6_510_615_555_426_900_570)
        case .float: return .float(1234.5)
        case .double: return .double(-98_765.4321)
        case .string: return .string("\u{1}cairn.probe")
        case .binary: return .bytes(Data([0xCA, 0x12, 0xFE]))
        case .date: return .date(Date(timeIntervalSinceReferenceDate: 123_456_789.25))
        case .uuid: return .uuid(UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)))
        case .url: return .url(URL(string: "cairn-probe://x")!)
        case .decimal: return .decimal(Decimal(string: "4242.4242")!)
        case .archived: return nil
        }
    }
}
