import CairnCollections
import CairnStorage
import Foundation
import Synchronization

/// Where a property wrapper was declared: how a wrapper finds its property's slot.
///
/// Every object stores one site per property, so a site is one 64-bit word, compared as
/// an integer: the low 32 bits of the address of the file's static string (`#fileID`),
/// then the column in 12 bits and the line in 20, each held at its largest value when
/// past it (column 4,095, line 1,048,575). Two files of one binary image keep their
/// names within far less than 4 GiB of each other, so their low 32 bits differ. Sites
/// can coincide only across images, or past that line or column; a layout that finds
/// two of its properties at one site says so (``PropertyLayout/ambiguity``), and a
/// ``Model`` with that class is refused, rather than one property reading the other.
@usableFromInline
struct DeclarationSite: Hashable, Sendable {
    @usableFromInline let bits: UInt64

    @inlinable
    init(file: StaticString, line: UInt, column: UInt) {
        let address = file.hasPointerRepresentation ? UInt(bitPattern: file.utf8Start) : UInt(file.unicodeScalar.value)
        bits = UInt64(min(line, 0xF_FFFF)) << 44 | UInt64(min(column, 0xFFF)) << 32
            | UInt64(UInt32(truncatingIfNeeded: address))
    }

    /// The line, as kept (at most 1,048,575).
    var line: Int { Int(truncatingIfNeeded: bits >> 44) }
}

/// What a wrapper tells the layout about its property: its site, stored in the wrapper,
/// and the rest of its declaration, noted while a prototype is built.
protocol PropertyDeclaration {
    var site: DeclarationSite { get }
    func describe(name: String, note: PropertyNote) -> PropertyLayout.Property
    /// A relationship's destination class (nil for an attribute).
    var targetType: ManagedObject.Type? { get }
    /// Why the declared initial value cannot be stored (an `@Archived` value that does not
    /// archive), if it cannot: the schema then has no default for the property, and a save
    /// that finds it without a value says why.
    func initialValueProblem() -> String?
}

extension PropertyDeclaration {
    func initialValueProblem() -> String? { nil }
    var targetType: ManagedObject.Type? { nil }
}

/// The parts of a property's declaration that only the layout needs, so wrappers do not
/// store them in every object: an attribute's declared default, and what differs from
/// the defaults here. A wrapper's init passes them to ``PrototypeBuilder/note(_:defaultValue:maker:indexed:renamingIdentifier:inverse:deleteRule:isOptional:)``
/// while a prototype is built.
struct PropertyNote: Sendable {
    /// An attribute's initial value as declared (`@Attribute var n = 5`), stored.
    var defaultValue: Value?
    /// The declared initial value's expression, evaluated again (see ``DefaultMaker``).
    var maker: DefaultMaker?
    var indexed = false
    var renamingIdentifier: String?
    var inverse: String?
    var deleteRule: DeleteRule = .nullify
    var isOptional = true
    /// How a ``Derived`` attribute is computed.
    var derivation: Derivation?
    /// A relationship's inverse named by key path (resolved by ``Model``, once every class
    /// of the model has its layout).
    var inverseKeyPath: KeyPathNames.Key?
}

/// An attribute's declared initial value as an expression that can be evaluated again:
/// one that gives a new value each time (`UUID()`, `Date()`) is evaluated for each new
/// object, as the declaration reads, and is not the entity's default in the schema
/// (whose hash it would change on every launch, and every open would migrate the store).
@usableFromInline
final class DefaultMaker: @unchecked Sendable {
    // `@unchecked Sendable`: `make` is the closure of a property's initial value
    // expression, which cannot refer to the object; it is called wherever objects of the
    // class are made (on any thread), as the expression itself was before it was kept here.
    // (A wrapper made by hand in an `init`, `_x = Attribute(wrappedValue: counter.next())`,
    // would share the prototype's `counter` among objects: its type must be safe to share.)
    let make: () -> Value
    @usableFromInline init(_ make: @escaping () -> Value) { self.make = make }
}

/// A class's properties, in record order, and the slot of each wrapper.
final class PropertyLayout: Sendable {
    enum Property {
        case attribute(AttributeDescription)
        case relationship(RelationshipDescription)
    }

    let entity: EntityDescription
    let names: [String]
    let defaults: [Value]
    /// The attributes whose declared initial value is new each time it is evaluated, with
    /// that expression: evaluated for each new object (``DefaultMaker``).
    let madeDefaults: [(slot: Int, maker: DefaultMaker)]
    /// The ``Derived`` attributes, with how each is computed.
    let derivations: [(slot: Int, derivation: Derivation)]
    /// Relationships whose inverse was declared by key path: the relationship's index, the
    /// key path (on the destination) and the destination class, for ``Model`` to name.
    let inverseKeyPaths: [(relationship: Int, keyPath: KeyPathNames.Key, target: ManagedObject.Type)]
    /// Why two of the class's properties cannot be told apart (they were declared at one
    /// ``DeclarationSite``), or nil; a ``Model`` refuses such a class.
    let ambiguity: String?
    /// The class's stored properties that no Cairn wrapper declares and that are not
    /// ignored (``Ignored``, ``ManagedObject/ignoredProperties``), said as a ``Model``
    /// refuses them; nil if none.
    let unstored: String?
    /// The destination class of each relationship, in relationship order: a ``Model``
    /// takes in the classes its listed ones reach.
    let relationshipTargets: [ManagedObject.Type]
    /// Why the initial value of the attribute in a slot could not be stored (see
    /// ``PropertyDeclaration/initialValueProblem()``), by slot.
    let initialValueProblems: [Int: String]
    private let indexByName: [String: Int]

    init(entity: EntityDescription, slots: [DeclarationSite: Int] = [:], ambiguity: String? = nil, unstored: String? = nil,
         madeDefaults: [(slot: Int, maker: DefaultMaker)] = [], initialValueProblems: [Int: String] = [:],
         derivations: [(slot: Int, derivation: Derivation)] = [],
         inverseKeyPaths: [(relationship: Int, keyPath: KeyPathNames.Key, target: ManagedObject.Type)] = [],
         relationshipTargets: [ManagedObject.Type] = []) {
        self.ambiguity = ambiguity
        self.unstored = unstored
        self.relationshipTargets = relationshipTargets
        self.derivations = derivations
        self.inverseKeyPaths = inverseKeyPaths
        self.initialValueProblems = initialValueProblems
        self.entity = entity
        self.madeDefaults = madeDefaults
        names = entity.attributes.map(\.name) + entity.relationships.map(\.name)
        defaults = entity.attributes.map { $0.defaultValue ?? .null }
            + entity.relationships.map { $0.isToMany ? .references([]) : .null }
        var ordered = [DeclarationSite](repeating: DeclarationSite(file: "", line: 0, column: 0), count: slots.count)
        for (site, index) in slots where index < ordered.count { ordered[index] = site }
        sites = ordered
        (firstLine, slotByLine) = Self.lineTable(ordered)
        indexByName = Dictionary(names.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
    }

    func index(of name: String) -> Int? { indexByName[name] }

    /// Sites in slot order, for ``slot(for:)``.
    private let sites: [DeclarationSite]
    /// The slot of the one site on line `firstLine + i` at `i`; ``sharedLine`` where
    /// several sites are on that line (in several files, or side by side), ``noSite``
    /// where none is. Empty when the lines are too far apart for a table.
    private let slotByLine: [Int32]
    private let firstLine: Int
    private static let noSite: Int32 = -1, sharedLine: Int32 = -2

    /// The slot of the wrapper declared at `site`, -1 if none is. Every property access
    /// asks, so the line picks the one candidate (a table lookup and one comparison);
    /// only sites that share a line are searched for.
    @inline(__always)
    func slot(for site: DeclarationSite) -> Int {
        let line = site.line &- firstLine
        return slotByLine.withUnsafeBufferPointer { table in
            sites.withUnsafeBufferPointer { sites in
                if line >= 0, line < table.count {
                    let candidate = Int(table[line])
                    if candidate >= 0 { return sites[candidate] == site ? candidate : -1 }
                    if candidate == Int(Self.noSite) { return -1 }
                }
                for index in sites.indices where sites[index] == site { return index }
                return -1
            }
        }
    }

    /// ``slotByLine`` and ``firstLine`` for `sites`: a table of at most a few entries per
    /// site plus a page (larger gaps leave it empty, and every lookup searches).
    private static func lineTable(_ sites: [DeclarationSite]) -> (Int, [Int32]) {
        let lines = sites.map(\.line)
        guard let low = lines.min(), let high = lines.max(), high - low < 4 * lines.count + 512 else { return (0, []) }
        var table = [Int32](repeating: noSite, count: high - low + 1)
        for (slot, line) in lines.enumerated() {
            table[line - low] = table[line - low] == noSite ? Int32(slot) : sharedLine
        }
        return (low, table)
    }

    /// The layout of a prototype under construction (its wrappers are all that is read).
    static let placeholder = PropertyLayout(entity: EntityDescription(name: "", number: 0))

    private static let cache = Protected<[ObjectIdentifier: PropertyLayout]>([:])
    /// The same layouts, read without a lock (every object creation reads one).
    private static let published = ClassTable<PropertyLayout>()

    /// The layout of a class if it was derived already.
    @inline(__always)
    static func cached(_ type: ManagedObject.Type) -> PropertyLayout? {
        published.value(for: type) ?? cache.withLock { $0[ObjectIdentifier(type)] }
    }

    /// How the storage of a `lazy var` is named in a mirror.
    private static let lazyPrefix = "$__lazy_storage_$_"

    /// The layout of a class, derived once from a prototype instance's wrappers.
    static func of(_ type: ManagedObject.Type) -> PropertyLayout {
        if let known = cached(type) { return known }
        var attributes: [(AttributeDescription, DeclarationSite)] = []
        var relationships: [(RelationshipDescription, DeclarationSite)] = []
        // Walk the wrappers of a bare instance. Its own layout is not needed for this:
        // `reflecting` reads stored properties only.
        let (prototype, notes) = PrototypeBuilder.instance(of: type)
        var mirrors: [Mirror] = []
        var mirror: Mirror? = Mirror(reflecting: prototype)
        while let current = mirror { mirrors.insert(current, at: 0); mirror = current.superclassMirror }
        var madeDefaults: [(slot: Int, maker: DefaultMaker)] = []
        var initialValueProblems: [Int: String] = [:]
        var derivations: [(slot: Int, derivation: Derivation)] = []
        var inverseKeyPaths: [(relationship: Int, keyPath: KeyPathNames.Key, target: ManagedObject.Type)] = []
        var relationshipTargets: [ManagedObject.Type] = []
        var unstored: [String] = []
        let ignored = type.ignoredProperties
        for current in mirrors {
            for child in current.children {
                guard let label = child.label else { continue }
                guard let declaration = child.value as? PropertyDeclaration else {
                    // A stored property of the app's classes that no wrapper of Cairn's
                    // declares would silently not be stored. (`ManagedObject`'s own are its.)
                    let plain = label.hasPrefix(Self.lazyPrefix) ? String(label.dropFirst(Self.lazyPrefix.count)) : label
                    if current.subjectType != ManagedObject.self, !(child.value is UnstoredDeclaration), !ignored.contains(plain) {
                        let declared = current.subjectType == type ? "" : ", declared in \(current.subjectType)"
                        unstored.append("\(type.entityName).\(plain) (\(Swift.type(of: child.value))\(declared))")
                    }
                    continue
                }
                let name = label.hasPrefix("_") ? String(label.dropFirst()) : label
                var note = notes[declaration.site] ?? PropertyNote()
                // An initial value that comes out different when evaluated again (up to eight
                // times: `Bool.random()` repeats itself half the time) is made for each
                // object, and the schema has no default for it.
                if let maker = note.maker, (0..<8).contains(where: { _ in !Value.same(maker.make(), note.defaultValue ?? .null) }) {
                    madeDefaults.append((attributes.count, maker))
                    note.defaultValue = nil
                }
                switch declaration.describe(name: name, note: note) {
                case .attribute(let attribute):
                    if let problem = declaration.initialValueProblem() { initialValueProblems[attributes.count] = problem }
                    if let derivation = note.derivation { derivations.append((attributes.count, derivation)) }
                    attributes.append((attribute, declaration.site))
                case .relationship(let relationship):
                    if let keyPath = note.inverseKeyPath, let target = declaration.targetType {
                        inverseKeyPaths.append((relationships.count, keyPath, target))
                    }
                    relationshipTargets.append(declaration.targetType ?? ManagedObject.self)
                    relationships.append((relationship, declaration.site))
                }
            }
        }
        let entity = EntityDescription(name: type.entityName, number: 0, attributes: attributes.map(\.0),
                                       relationships: relationships.map(\.0), uniqueness: type.uniqueness,
                                       indexes: type.indexes, renamingIdentifier: type.renamingIdentifier)
        var slots: [DeclarationSite: Int] = [:]
        var ambiguity: String?
        let names = attributes.map(\.0.name) + relationships.map(\.0.name)
        for (index, site) in (attributes.map(\.1) + relationships.map(\.1)).enumerated() {
            if let earlier = slots[site] {
                ambiguity = ambiguity ?? "properties \(names[earlier]) and \(names[index]) of \(type) were declared at sites "
                    + "Cairn cannot tell apart (past column 4,095 or line 1,048,575 of a file, or in files of two binaries); "
                    + "declare them on lines of their own"
            } else {
                slots[site] = index
            }
        }
        var refusal: String?
        if !unstored.isEmpty {
            refusal = (unstored.count == 1 ? "\(unstored[0]) is a stored property" : "\(unstored.joined(separator: ", ")) are stored properties")
                + " that Cairn would not store: declare it @Attribute to store it, @Transient to track it unsaved, or @Ignored "
                + "to keep it a plain Swift property (a let, weak or lazy one: name it in ignoredProperties)"
        }
        let layout = PropertyLayout(entity: entity, slots: slots, ambiguity: ambiguity, unstored: refusal,
                                    madeDefaults: madeDefaults, initialValueProblems: initialValueProblems, derivations: derivations,
                                    inverseKeyPaths: inverseKeyPaths, relationshipTargets: relationshipTargets)
        cache.withLock { $0[ObjectIdentifier(type)] = layout }
        published.insert(layout, for: type)
        return layout
    }
}

/// Makes prototype instances for layouts. A prototype's own `init` must not ask for the
/// layout being built, so a per-thread build marks the class under construction. While a
/// prototype is built, its wrappers' inits note their declarations in that build.
@usableFromInline
enum PrototypeBuilder {
    private static let key = "cairn.prototype"
    /// Prototypes under construction, on any thread: outside of that, a wrapper's init
    /// notes nothing, after one load (``isActive``).
    @usableFromInline static let building = Atomic<Int>(0)

    /// One build on one thread: the class built, and the declarations its wrappers noted.
    /// Kept per build, so sites of other classes' objects made meanwhile (on this thread or
    /// any other) are not taken for the prototype's.
    private final class Build {
        let type: ObjectIdentifier
        var notes: [DeclarationSite: PropertyNote] = [:]
        init(type: ObjectIdentifier) { self.type = type }
    }

    /// A prototype of `type` and the declarations its wrappers noted.
    static func instance(of type: ManagedObject.Type) -> (ManagedObject, [DeclarationSite: PropertyNote]) {
        let dictionary = Thread.current.threadDictionary
        let previous = dictionary[key]
        let build = Build(type: ObjectIdentifier(type))
        dictionary[key] = build
        building.add(1, ordering: .sequentiallyConsistent)
        defer {
            building.subtract(1, ordering: .sequentiallyConsistent)
            dictionary[key] = previous
        }
        let prototype = type.init()
        return (prototype, build.notes)
    }

    /// Whether a prototype may be under construction (on some thread): what a wrapper's
    /// init checks before it computes a note.
    @inlinable
    static var isActive: Bool { building.load(ordering: .relaxed) > 0 }

    /// Whether a wrapper made now should compute a note for `site`: a prototype is built
    /// on this thread and has no note for `site` yet. One atomic load while no prototype is
    /// built anywhere. ``isActive`` alone is true while any thread builds a prototype, and a
    /// wrapper made on another thread meanwhile would evaluate its initial value (a
    /// `UUID()`, or a counter a test reads) for a note then thrown away.
    ///
    /// A wrapper asks this before it computes its note, rather than passing the note's
    /// parts as closures: closures capturing the wrapper's initial value would cost two
    /// allocations in every wrapper's init, noting or not.
    @inlinable
    static func wantsNote(_ site: DeclarationSite) -> Bool { isActive && buildWantsNote(site) }

    @usableFromInline
    static func buildWantsNote(_ site: DeclarationSite) -> Bool {
        guard let build = Thread.current.threadDictionary[key] as? Build else { return false }
        return build.notes[site] == nil
    }

    /// Called by a wrapper's init (after ``wantsNote(_:)`` where the note costs anything to
    /// make): notes its declaration in the build under way on this thread, if any. A site's
    /// first note stands: the prototype's own wrappers are made before anything its `init`
    /// makes.
    @usableFromInline
    static func note(_ site: DeclarationSite, defaultValue: Value? = nil, maker: DefaultMaker? = nil, indexed: Bool = false,
                     renamingIdentifier: String? = nil, inverse: String? = nil, deleteRule: DeleteRule = .nullify,
                     isOptional: Bool = true, derivation: Derivation? = nil, inverseKeyPath: AnyKeyPath? = nil) {
        guard isActive, let build = Thread.current.threadDictionary[key] as? Build, build.notes[site] == nil else { return }
        build.notes[site] = PropertyNote(defaultValue: defaultValue, maker: maker, indexed: indexed, renamingIdentifier: renamingIdentifier,
                                         inverse: inverse, deleteRule: deleteRule, isOptional: isOptional, derivation: derivation,
                                         inverseKeyPath: inverseKeyPath.map(KeyPathNames.Key.init))
    }

    /// The default noted for `site` in the build under way on this thread: what a
    /// prototype's `init` reads of its own attributes.
    static func notedDefault(at site: DeclarationSite) -> Value? {
        (Thread.current.threadDictionary[key] as? Build)?.notes[site]?.defaultValue
    }

    static func isBuilding(_ type: ManagedObject.Type) -> Bool {
        (Thread.current.threadDictionary[key] as? Build)?.type == ObjectIdentifier(type)
    }
}
