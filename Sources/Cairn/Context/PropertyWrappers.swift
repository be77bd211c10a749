import CairnStorage
import Foundation

/// A persistent attribute of a ``ManagedObject`` subclass.
///
/// ```swift
/// @Attribute var title: String = ""
/// @Attribute(indexed: true) var age: Int = 0
/// @Attribute var purchaseDate: Date? = nil
/// ```
/// The initial value is the attribute's default. An `Optional` type makes it optional.
@propertyWrapper
public struct Attribute<T: AttributeValue>: PropertyDeclaration {
    // Only the site is stored, in every object: 8 bytes a property. The rest of the
    // declaration, its default too, goes to the layout builder while a prototype is built
    // (``PrototypeBuilder/note(_:defaultValue:maker:indexed:renamingIdentifier:inverse:deleteRule:isOptional:)``),
    // and a read that finds no value of type `T` falls back to the layout's default. A
    // stored default would make every object larger, which every insert writes and every
    // fetch allocates.
    @usableFromInline let site: DeclarationSite

    // Inlinable so each use is specialized in the client: a generic init asks the runtime
    // for `Attribute<T>`'s metadata on every object created.
    //
    // The initial value is taken as an expression (an autoclosure), evaluated only while a
    // prototype is built: one that gives a new value each time (`UUID()`, `Date()`) is then
    // evaluated for each new object (``DefaultMaker``); any other is the entity's default.
    /// An attribute whose initial value is its default: `@Attribute var title: String = ""`.
    /// An initial value that differs each time it is evaluated (`UUID()`, `Date()`) is made
    /// anew for each object. `indexed: true` indexes the attribute; `renamingIdentifier` is
    /// its name in an earlier model version, for migration. (`file`, `line` and `column`
    /// tell the declaration apart: leave them to their defaults.)
    @inlinable
    public init(wrappedValue: @autoclosure @escaping () -> T, indexed: Bool = false, renamingIdentifier: String? = nil,
                file: StaticString = #fileID, line: UInt = #line, column: UInt = #column) {
        site = DeclarationSite(file: file, line: line, column: column)
        if PrototypeBuilder.wantsNote(site) {
            PrototypeBuilder.note(site, defaultValue: wrappedValue().cairnValue, maker: DefaultMaker { wrappedValue().cairnValue },
                                  indexed: indexed, renamingIdentifier: renamingIdentifier)
        }
    }

    /// An optional attribute declared without an initial value, nil by default:
    /// `@Attribute var note: String?`.
    @inlinable
    public init(indexed: Bool = false, renamingIdentifier: String? = nil,
                file: StaticString = #fileID, line: UInt = #line, column: UInt = #column) where T: ExpressibleByNilLiteral {
        self.init(wrappedValue: nil, indexed: indexed, renamingIdentifier: renamingIdentifier, file: file, line: line, column: column)
    }

    func describe(name: String, note: PropertyNote) -> PropertyLayout.Property {
        let stored = note.defaultValue ?? .null
        return .attribute(AttributeDescription(name: name, type: T.attributeType, isOptional: T.isOptionalAttribute,
                                               defaultValue: stored.isNull ? nil : stored, isIndexed: note.indexed,
                                               renamingIdentifier: note.renamingIdentifier))
    }

    @inlinable
    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, T>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, Self>
    ) -> T {
        get {
            let site = object[keyPath: storageKeyPath].site
            let slot = object.slot(for: site)
            object.observeAccess(slot: slot)
            if slot >= 0, let value = T(cairnValue: object.read(slot)) { return value }
            return T(cairnValue: object.declaredDefault(site)) ?? T.fallback
        }
        set {
            object.setValue(newValue.cairnValue, at: object[keyPath: storageKeyPath].site)
        }
    }

    @available(*, unavailable, message: "@Attribute is only for properties of ManagedObject subclasses")
    public var wrappedValue: T {
        get { fatalError("unreachable") }
        set { fatalError("unreachable") }  // swiftlint:disable:this unused_setter_value
    }
}

/// How `Codable` values are archived, by ``Archived`` and the object queue: JSON, keys
/// sorted (the same value archives to the same bytes). JSON has no number for NaN or the
/// infinities: a value holding one does not archive, and is refused with the encoder's
/// error. (Written as strings, they would read back ambiguously: a type that tries a
/// `Double` before a `String` would take an archived string "NaN" for the number.)
enum JSONArchive {
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    static func decoder() -> JSONDecoder { JSONDecoder() }
}

/// A `Codable` value stored archived (as JSON bytes) in one attribute.
///
/// ```swift
/// @Archived var settings: Settings = Settings()
/// ```
@propertyWrapper
public struct Archived<T: Codable>: PropertyDeclaration {
    /// The initial value as an expression, evaluated only where a value is needed and
    /// none is stored: evaluated in every init, it would be made (and, holding a `UUID()`,
    /// made anew) for each fetched object, which then reads its stored value instead.
    /// (Kept with each object: a wrapper made by hand in an `init` must not capture the
    /// object in it.)
    @usableFromInline let initialValue: () -> T
    @usableFromInline let site: DeclarationSite

    // As `Attribute`'s: an initial value that archives differently each time it is
    // evaluated (one holding a `UUID()` or a `Date()`) is made for each object and is no
    // default in the schema (``DefaultMaker``).
    /// A `Codable` value whose initial value is its default:
    /// `@Archived var settings: Settings = Settings()`. One that archives differently each
    /// time it is evaluated (holding a `UUID()` or a `Date()`) is made anew for each object.
    /// (`file`, `line` and `column` tell the declaration apart: leave them to their defaults.)
    @inlinable
    public init(wrappedValue: @autoclosure @escaping () -> T, file: StaticString = #fileID, line: UInt = #line, column: UInt = #column) {
        initialValue = wrappedValue
        site = DeclarationSite(file: file, line: line, column: column)
        if PrototypeBuilder.wantsNote(site) {
            PrototypeBuilder.note(site, defaultValue: Self.archive(wrappedValue()), maker: DefaultMaker { Self.archive(wrappedValue()) })
        }
    }

    func describe(name: String, note: PropertyNote) -> PropertyLayout.Property {
        .attribute(AttributeDescription(name: name, type: .archived, isOptional: false,
                                        defaultValue: note.maker == nil ? Self.archive(initialValue()) : note.defaultValue))
    }

    func initialValueProblem() -> String? {
        guard case .failure(let error) = Self.archiving(initialValue()) else { return nil }
        return "its initial value, \(T.self), does not archive: \(error)"
    }

    /// The value archived; nil if it does not archive, with the encoder's complaint.
    @usableFromInline
    static func archive(_ value: T) -> Value {
        (try? archiving(value).get()) ?? .null
    }

    /// The value archived (``JSONArchive``).
    static func archiving(_ value: T) -> Result<Value, any Error> {
        Result { .archived(try JSONArchive.encoder().encode(value)) }
    }

    /// The archived value read back (``JSONArchive``); nil if the bytes do not decode as `T`.
    static func unarchive(_ data: Data) -> T? {
        try? JSONArchive.decoder().decode(T.self, from: data)
    }

    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, T>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, Self>
    ) -> T {
        get {
            let wrapper = object[keyPath: storageKeyPath]
            let slot = object.slot(for: wrapper.site)
            object.observeAccess(slot: slot)
            guard slot >= 0, case .archived(let data) = object.read(slot),
                  let value = unarchive(data) else { return wrapper.initialValue() }
            return value
        }
        set {
            let slot = object.slot(for: object[keyPath: storageKeyPath].site)
            guard slot >= 0 else { return }
            switch archiving(newValue) {
            case .success(let value): object.write(slot, value)
            case .failure(let error):
                // Not written: the old value stays, and the context's next save or fetch
                // throws (a setter cannot).
                object.refuseWrite(slot, CairnError(.invalidArgument, "\(T.self) does not archive: \(error)"))
            }
        }
    }

    @available(*, unavailable, message: "@Archived is only for properties of ManagedObject subclasses")
    public var wrappedValue: T {
        get { fatalError("unreachable") }
        set { fatalError("unreachable") }
    }
}

/// A to-one relationship. Setting it updates the inverse on both sides.
///
/// ```swift
/// final class Person: ManagedObject {
///     @ToMany(inverse: \DVD.owner, deleteRule: .cascade) var dvds: [DVD]
/// }
///
/// final class DVD: ManagedObject {
///     @ToOne var owner: Person?
/// }
/// ```
/// The inverse is named once, on one side, by key path (Swift refuses a key path on each
/// side of a pair, a circular reference); the other side, as `owner` here, takes it.
@propertyWrapper
public struct ToOne<Target: ManagedObject>: PropertyDeclaration {
    // Only the site is stored per object; the declaration goes to the layout builder.
    @usableFromInline let site: DeclarationSite

    /// A to-one relationship with no inverse named here: `@ToOne var owner: Person?`, whose
    /// inverse the other side names by key path (or which has none). `inverse` names one
    /// by string, for a name known only at run time; prefer a key path, which the compiler
    /// checks. `deleteRule` says what deleting this object does to its target;
    /// `optional: false` makes a save refuse the object while the relationship is empty;
    /// `renamingIdentifier` is the relationship's name in an earlier model version.
    /// (`file`, `line` and `column` tell the declaration apart: leave them to their defaults.)
    @inlinable
    public init(inverse: String? = nil, deleteRule: DeleteRule = .nullify, optional: Bool = true,
                renamingIdentifier: String? = nil,
                file: StaticString = #fileID, line: UInt = #line, column: UInt = #column) {
        site = DeclarationSite(file: file, line: line, column: column)
        // (Asked first: outside a prototype's build, the call alone would cost every object
        // made a few hundred instructions.)
        if PrototypeBuilder.wantsNote(site), inverse != nil || deleteRule != .nullify || !optional || renamingIdentifier != nil {
            PrototypeBuilder.note(site, renamingIdentifier: renamingIdentifier, inverse: inverse,
                                  deleteRule: deleteRule, isOptional: optional)
        }
    }

    /// A to-one relationship whose inverse, a relationship of `Target`, is named by key path:
    /// `@ToOne(inverse: \Passport.holder) var passport: Passport?`, checked when the ``Model``
    /// is made. The other side is declared without an inverse and takes this one.
    /// (The key path is made only while the layout is built: made for every object, as a
    /// literal argument is, it would cost a runtime call per relationship of each.)
    @inlinable
    public init(inverse: @autoclosure () -> PartialKeyPath<Target>, deleteRule: DeleteRule = .nullify, optional: Bool = true,
                renamingIdentifier: String? = nil,
                file: StaticString = #fileID, line: UInt = #line, column: UInt = #column) {
        site = DeclarationSite(file: file, line: line, column: column)
        if PrototypeBuilder.wantsNote(site) {
            PrototypeBuilder.note(site, renamingIdentifier: renamingIdentifier, deleteRule: deleteRule, isOptional: optional,
                                  inverseKeyPath: inverse())
        }
    }

    var targetType: ManagedObject.Type? { Target.self }

    func describe(name: String, note: PropertyNote) -> PropertyLayout.Property {
        .relationship(RelationshipDescription(name: name, destination: Target.entityName, isToMany: false,
                                              inverse: note.inverse, deleteRule: note.deleteRule, isOptional: note.isOptional,
                                              renamingIdentifier: note.renamingIdentifier))
    }

    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, Target?>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, Self>
    ) -> Target? {
        get {
            let slot = object.slot(for: object[keyPath: storageKeyPath].site)
            object.observeAccess(slot: slot)
            guard slot >= 0 else { return nil }
            return object.related(slot).first as? Target
        }
        set {
            let slot = object.slot(for: object[keyPath: storageKeyPath].site)
            if slot >= 0 { object.setRelated(slot, newValue.map { [$0] } ?? []) }
        }
    }

    @available(*, unavailable, message: "@ToOne is only for properties of ManagedObject subclasses")
    public var wrappedValue: Target? {
        get { fatalError("unreachable") }
        set { fatalError("unreachable") }
    }
}

/// A to-many relationship, kept in insertion order without duplicates. Setting it
/// updates the inverse on both sides.
///
/// ```swift
/// @ToMany(inverse: \DVD.owner, deleteRule: .cascade) var dvds: [DVD]
/// ```
/// The inverse is named once, on one side, by key path; the other side (here
/// `@ToOne var owner: Person?` in `DVD`) takes it. `$dvds` edits the relationship by the
/// element (see ``ToManyEdits``).
@propertyWrapper
public struct ToMany<Target: ManagedObject>: PropertyDeclaration {
    // Only the site is stored per object; the declaration goes to the layout builder.
    @usableFromInline let site: DeclarationSite

    /// A to-many relationship with no inverse named here: `@ToMany var tags: [Tag]`, whose
    /// inverse the other side names by key path (or which has none). `inverse` names one
    /// by string, for a name known only at run time; prefer a key path, which the compiler
    /// checks. `deleteRule` says what deleting this object does to its targets;
    /// `renamingIdentifier` is the relationship's name in an earlier model version.
    /// (`file`, `line` and `column` tell the declaration apart: leave them to their defaults.)
    @inlinable
    public init(inverse: String? = nil, deleteRule: DeleteRule = .nullify, renamingIdentifier: String? = nil,
                file: StaticString = #fileID, line: UInt = #line, column: UInt = #column) {
        site = DeclarationSite(file: file, line: line, column: column)
        if PrototypeBuilder.wantsNote(site), inverse != nil || deleteRule != .nullify || renamingIdentifier != nil {
            PrototypeBuilder.note(site, renamingIdentifier: renamingIdentifier, inverse: inverse, deleteRule: deleteRule)
        }
    }

    /// A to-many relationship whose inverse, a relationship of `Target`, is named by key
    /// path: `@ToMany(inverse: \DVD.owner, deleteRule: .cascade) var dvds: [DVD]`, checked
    /// when the ``Model`` is made. The other side is declared without an inverse
    /// (`@ToOne var owner: Person?`) and takes this one.
    @inlinable
    public init(inverse: @autoclosure () -> PartialKeyPath<Target>, deleteRule: DeleteRule = .nullify,
                renamingIdentifier: String? = nil,
                file: StaticString = #fileID, line: UInt = #line, column: UInt = #column) {
        site = DeclarationSite(file: file, line: line, column: column)
        if PrototypeBuilder.wantsNote(site) {
            PrototypeBuilder.note(site, renamingIdentifier: renamingIdentifier, deleteRule: deleteRule, inverseKeyPath: inverse())
        }
    }

    var targetType: ManagedObject.Type? { Target.self }

    func describe(name: String, note: PropertyNote) -> PropertyLayout.Property {
        .relationship(RelationshipDescription(name: name, destination: Target.entityName, isToMany: true,
                                              inverse: note.inverse, deleteRule: note.deleteRule, isOptional: true,
                                              renamingIdentifier: note.renamingIdentifier))
    }

    // Inlinable so each use is specialized in the client: unspecialized, `compactMap`
    // runs the standard library's generic code and asks for array metadata per target.
    @inlinable
    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, [Target]>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, Self>
    ) -> [Target] {
        get {
            let slot = object.slot(for: object[keyPath: storageKeyPath].site)
            object.observeAccess(slot: slot)
            guard slot >= 0 else { return [] }
            return read(object, slot)
        }
        set {
            let slot = object.slot(for: object[keyPath: storageKeyPath].site)
            if slot >= 0 { object.setRelated(slot, newValue) }
        }
        // An edit in place (`person.dvds.append(dvd)`) is handed the list its context kept
        // from the last edit, as the only holder of its storage, and ends by setting it: an
        // append then neither looks up the list's objects nor copies them, and the set
        // checks only what was added (see Context+RelatedLists.swift). A list not kept is
        // read (and kept, if long), and a short one set as by `set`.
        _modify {
            let slot = object.slot(for: object[keyPath: storageKeyPath].site)
            object.observeAccess(slot: slot)
            var targets: [Target] = []
            var edit: RelatedListEdit?
            if slot >= 0 {
                var taken: [ManagedObject] = []
                edit = object.takeRelated(slot, checked: Target.self, into: &taken)
                if edit == nil {
                    targets = read(object, slot, keeping: true)  // a long list kept, to be taken
                    edit = object.takeRelated(slot, checked: Target.self, into: &taken)
                }
                if edit != nil {
                    // (Every object was found to be a `Target`; see `read`.)
                    targets = unsafeBitCast(taken, to: [Target].self)
                    taken = []  // `targets` the only holder
                }
            }
            defer {
                if slot >= 0 { object.endRelatedEdit(slot, unsafeBitCast(targets, to: [ManagedObject].self), edit, checked: Target.self) }
            }
            yield &targets
        }
    }

    /// The list in `slot` as `Target`s. The context's kept list, when every object of it
    /// was found to be a `Target`, is the same array reinterpreted: an array of class
    /// references is laid out alike whatever the class (the standard library's `as! [T]`
    /// reinterprets the buffer the same way, on platforms where it does not copy).
    @inlinable
    static func read(_ object: ManagedObject, _ slot: Int, keeping: Bool = false) -> [Target] {
        if let kept = object.keptRelated(slot, checked: Target.self) { return unsafeBitCast(kept, to: [Target].self) }
        let related = object.related(slot, keeping: keeping)
        var targets: [Target] = []
        targets.reserveCapacity(related.count)
        for item in related { if let target = item as? Target { targets.append(target) } }
        if targets.count == related.count { object.noteRelatedChecked(slot, as: Target.self, count: targets.count) }
        return targets
    }

    /// `$dvds`: edits of the relationship that cost what they change (see ``ToManyEdits``).
    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        projected projectedKeyPath: KeyPath<Object, ToManyEdits<Target>>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, Self>
    ) -> ToManyEdits<Target> {
        ToManyEdits(object: object, slot: object.slot(for: object[keyPath: storageKeyPath].site))
    }

    @available(*, unavailable, message: "@ToMany is only for properties of ManagedObject subclasses")
    public var wrappedValue: [Target] {
        get { fatalError("unreachable") }
        set { fatalError("unreachable") }
    }

    @available(*, unavailable, message: "@ToMany is only for properties of ManagedObject subclasses")
    public var projectedValue: ToManyEdits<Target> { fatalError("unreachable") }
}

/// Edits of one object's to-many relationship (`person.$dvds`) that cost what they
/// change: `person.$dvds.append(dvd)` adds one target. (`person.dvds.append(dvd)` edits
/// the list its context kept from the last edit in place, and compares it with what it
/// was: a copy and a comparison of the list's references, no lookup of its objects.)
/// Inverses and undo are kept as for a set.
///
/// ```swift
/// person.$dvds.append(dvd)        // at the end, unless the list holds it already
/// person.$dvds.remove(dvd)
/// person.$dvds.contains(dvd)
/// person.$dvds.count              // no object made for each DVD
/// ```
public struct ToManyEdits<Target: ManagedObject> {
    let object: ManagedObject
    let slot: Int

    /// Adds `target` at the end, unless the relationship holds it already.
    public func append(_ target: Target) { append(contentsOf: [target]) }

    /// Adds the targets not held already at the end, in order.
    public func append(contentsOf targets: some Sequence<Target>) {
        guard slot >= 0 else { return }
        object.editRelated(slot, targets.map { $0 as ManagedObject }, removing: false)
    }

    /// Takes `target` out (nothing if the relationship does not hold it).
    public func remove(_ target: Target) { remove(contentsOf: [target]) }

    /// Takes every one of `targets` out.
    public func remove(contentsOf targets: some Sequence<Target>) {
        guard slot >= 0 else { return }
        object.editRelated(slot, targets.map { $0 as ManagedObject }, removing: true)
    }

    /// Whether the relationship holds `target` (a comparison of IDs per element; no
    /// object is made for the others).
    public func contains(_ target: Target) -> Bool {
        slot >= 0 && object.relatedContains(slot, target)
    }

    /// How many targets the relationship holds: `person.dvds.count`, answered from the
    /// IDs the object's record holds, without making an object for each target (when the
    /// list is as saved and the relationship has an inverse; otherwise the targets are
    /// looked up, as the relationship's getter does).
    public var count: Int { slot >= 0 ? object.relatedCount(slot) : 0 }

    /// Whether the relationship holds no target (see ``count``).
    public var isEmpty: Bool { count == 0 }
}

@available(*, unavailable, message: "relationship edits are confined to their object's context")
extension ToManyEdits: Sendable {}
