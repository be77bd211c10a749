import CairnStorage
/// A stored attribute computed from the object's other properties (Core Data's derived
/// attribute): a fetch can filter and sort on it, and index it, like any attribute.
///
/// ```swift
/// final class Person: ManagedObject {
///     @Attribute var name: String = ""
///     @Derived({ (person: Person) in person.name.lowercased() }, indexed: true) var searchName: String
/// }
/// let found = try context.fetch(Person.self, where: #Predicate { $0.searchName == "ann" })
/// ```
///
/// The value is computed again whenever an attribute of the object is set in a context,
/// when the object is inserted, and before it is saved (also by a batch insert or update),
/// so a fetch that includes unsaved changes finds it current. A closure that reads
/// relationships sees their changes at the next attribute set or save. The closure must
/// only read: it runs inside the context's writes. Undo puts the value back with the
/// change that caused it. It cannot be set; `setValue(_:forKey:)` on it is overwritten by
/// the next computation.
@propertyWrapper
public struct Derived<T: AttributeValue>: PropertyDeclaration {
    @usableFromInline let site: DeclarationSite

    /// An attribute whose value `derive` computes from the object; `indexed: true` indexes it.
    /// (`file`, `line` and `column` tell the declaration apart: leave them to their defaults.)
    @inlinable
    public init<Object: ManagedObject>(_ derive: @escaping @Sendable (Object) -> T, indexed: Bool = false,
                                       file: StaticString = #fileID, line: UInt = #line, column: UInt = #column) {
        site = DeclarationSite(file: file, line: line, column: column)
        if PrototypeBuilder.wantsNote(site) {
            PrototypeBuilder.note(site, indexed: indexed, derivation: Derivation { object in
                guard let object = object as? Object else { return .null }
                return derive(object).cairnValue
            })
        }
    }

    func describe(name: String, note: PropertyNote) -> PropertyLayout.Property {
        .attribute(AttributeDescription(name: name, type: T.attributeType, isOptional: T.isOptionalAttribute,
                                        defaultValue: nil, isIndexed: note.indexed))
    }

    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: KeyPath<Object, T>,
        storage storageKeyPath: KeyPath<Object, Self>
    ) -> T {
        let site = object[keyPath: storageKeyPath].site
        let slot = object.slot(for: site)
        object.observeAccess(slot: slot)
        if slot >= 0, let value = T(cairnValue: object.read(slot)) { return value }
        return T.fallback
    }

    @available(*, unavailable, message: "@Derived is only for properties of ManagedObject subclasses")
    public var wrappedValue: T { fatalError("unreachable") }
}

/// How a ``Derived`` attribute is computed from its object.
@usableFromInline
final class Derivation: @unchecked Sendable {
    // `@unchecked Sendable`: `compute` holds the declaration's `@Sendable` closure and the
    // metatypes it casts to and from (class and value types, never mutated); it is called
    // on the isolation of the object it is given.
    let compute: (ManagedObject) -> Value
    @usableFromInline init(_ compute: @escaping (ManagedObject) -> Value) { self.compute = compute }
}

extension ManagedObject {
    /// Computes the object's derived attributes into their slots, untracked (an object in
    /// no context: one being inserted, or a batch operation's).
    func applyDerivations() {
        for (slot, derivation) in layout.derivations where slot < values.count {
            let value = derivation.compute(self)
            if !Value.same(values[slot], value) { setValue(value, at: slot) }
        }
    }
}

extension Context {
    /// Computes `object`'s derived attributes again, each change tracked and undoable
    /// (inside an undo group).
    func updateDerivations(of object: ManagedObject) {
        guard object.exists else { return }
        for (slot, derivation) in object.layout.derivations { setPrimitive(object, slot, derivation.compute(object)) }
    }
}
