import CairnStorage
import Observation

/// What few objects need, kept apart so that the others pay one nil reference: the values
/// of ``Transient`` properties, observation for an object of a context that observes its
/// objects (``Context/observesObjects``), and relationships set before an insert.
@usableFromInline
final class ObjectExtras {
    /// The transient values set, by the site of their declaration.
    var transients: [DeclarationSite: Any] = [:]
    /// Whether a transient value changed since the object's last save.
    var transientsChanged = false
    /// Relationships set before the object was inserted into a context.
    var detachedRelations: [Int: [ManagedObject]] = [:]
    /// The object's observation registrar, once it is observable.
    var registrar: ObservationRegistrar? { didSet { isObserved = registrar != nil } }
    /// Whether `registrar` is set: what a write tests (a flag of this class, not an
    /// optional of another module's type, read through its value witnesses).
    private(set) var isObserved = false

    /// Records a read of the property in `slot` (or of the transient declared at `site`)
    /// for the observation under way, if any.
    @usableFromInline
    func access(_ object: ManagedObject, slot: Int, site: DeclarationSite? = nil) {
        guard isObserved, let registrar else { return }
        if let site {
            registrar.access(object, keyPath: \ManagedObject.[observedTransient: site])
        } else if slot >= 0 {
            registrar.access(object, keyPath: ObservedSlot.keyPath(slot))
        }
    }

    /// Runs `change` of the value in `slot` of `object` (nil: of every value), telling the
    /// observers of the properties concerned before and after.
    func changing(_ object: ManagedObject, slot: Int?, _ change: () -> Void) {
        changing(object, slots: slot.map { [$0] } ?? Array(0..<object.layout.names.count), change)
    }

    /// ``changing(_:slot:_:)`` for the values in `slots`.
    func changing(_ object: ManagedObject, slots: [Int], _ change: () -> Void) {
        guard isObserved else { return change() }
        for slot in slots { willChange(object, slot: slot) }
        change()
        for slot in slots { didChange(object, slot: slot) }
    }

    /// Tells the observers of the property in `slot` that it is about to change (out of
    /// line: the common path of a write only tests whether there are observers).
    @inline(never)
    func willChange(_ object: ManagedObject, slot: Int) {
        registrar?.willSet(object, keyPath: ObservedSlot.keyPath(slot))
    }

    /// Tells the observers of the property in `slot` that it changed.
    @inline(never)
    func didChange(_ object: ManagedObject, slot: Int) {
        registrar?.didSet(object, keyPath: ObservedSlot.keyPath(slot))
    }

    /// ``changing(_:slot:_:)`` for the transient declared at `site`.
    func changingTransient(_ object: ManagedObject, site: DeclarationSite, _ change: () -> Void) {
        guard isObserved, let registrar else { return change() }
        let keyPath = \ManagedObject.[observedTransient: site]
        registrar.willSet(object, keyPath: keyPath)
        change()
        registrar.didSet(object, keyPath: keyPath)
    }
}

/// The key paths observation knows an object's properties by: one per slot, so that a
/// change reached by any path (a set, an inverse, undo, a merge) names the property by its
/// slot, and a wrapper's read passes no key path of its own (which its caller would make
/// on every read, observed or not).
enum ObservedSlot {
    /// The key paths of the first 256 slots, made once.
    private struct Common: @unchecked Sendable {
        // (Unchecked: a key path is immutable once made, and only compared and hashed;
        // `ManagedObject` not being `Sendable` keeps its key paths from being so.)
        let keyPaths: [KeyPath<ManagedObject, Int>] = (0..<256).map { \ManagedObject.[observedSlot: $0] }
    }
    private static let common = Common()

    static func keyPath(_ slot: Int) -> KeyPath<ManagedObject, Int> {
        slot < common.keyPaths.count ? common.keyPaths[slot] : \ManagedObject.[observedSlot: slot]
    }
}

extension ManagedObject: Observable {}

extension ManagedObject {
    /// Stands for the property in `slot` in observation (see ``ObservedSlot``).
    subscript(observedSlot slot: Int) -> Int { slot }
    /// Stands for the transient property declared at `site` in observation.
    subscript(observedTransient site: DeclarationSite) -> Int { 0 }

    /// Makes the object observable: its property wrappers report reads to its registrar, and
    /// its changes (by any path: a set, an inverse, undo, a merge) to the observers of the
    /// properties read.
    func makeObservable() {
        let extras = self.extras ?? ObjectExtras()
        if extras.registrar == nil { extras.registrar = ObservationRegistrar() }
        self.extras = extras
    }

    /// Whether the object reports reads and changes to observers.
    public var isObservable: Bool { extras?.isObserved ?? false }

    /// Records a read of the property in `slot` for the observation under way: nothing but
    /// one load for an object that is not observable.
    @inlinable @inline(__always)
    func observeAccess(slot: Int) {
        if let extras { extras.access(self, slot: slot) }
    }
}
