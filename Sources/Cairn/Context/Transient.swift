import CairnStorage
/// A transient property of a ``ManagedObject`` subclass: tracked and undoable like an
/// attribute, never stored (Core Data's transient attribute).
///
/// ```swift
/// final class Person: ManagedObject {
///     @Attribute var name: String = ""
///     @Transient var isSelected = false
/// }
/// ```
///
/// A set makes the object and its context report changes (``ManagedObject/hasChanges``),
/// is undone by ``Context/undo()`` with the event it belongs to, and is merged into no
/// store or parent: a save leaves the value as it is and counts it as saved. The value
/// goes back to its initial one when the object's changes are dropped:
/// ``Context/refresh(_:mergeChanges:)`` with `mergeChanges: false`, and
/// ``Context/rollback()``. A refresh that merges changes, and a merge of another
/// context's save, keep it. The initial value is evaluated once per object, as a stored
/// property's is. A fetch cannot filter or sort on a transient property: nothing about it
/// is in the store (see ``Derived`` for a value computed from the others and stored).
@propertyWrapper
public struct Transient<Value> {
    @usableFromInline let initialValue: Value
    @usableFromInline let site: DeclarationSite

    /// A transient property whose initial value is `wrappedValue`: `@Transient var isSelected = false`.
    /// (`file`, `line` and `column` tell the declaration apart: leave them to their defaults.)
    public init(wrappedValue: Value, file: StaticString = #fileID, line: UInt = #line, column: UInt = #column) {
        initialValue = wrappedValue
        site = DeclarationSite(file: file, line: line, column: column)
    }

    public static subscript<Object: ManagedObject>(
        _enclosingInstance object: Object,
        wrapped wrappedKeyPath: ReferenceWritableKeyPath<Object, Value>,
        storage storageKeyPath: ReferenceWritableKeyPath<Object, Self>
    ) -> Value {
        get {
            let wrapper = object[keyPath: storageKeyPath]
            guard let extras = object.extras else { return wrapper.initialValue }
            extras.access(object, slot: -1, site: wrapper.site)
            if let set = extras.transients[wrapper.site], let value = set as? Value { return value }
            return wrapper.initialValue
        }
        set {
            object.setTransient(newValue, at: object[keyPath: storageKeyPath].site)
        }
    }

    @available(*, unavailable, message: "@Transient is only for properties of ManagedObject subclasses")
    public var wrappedValue: Value {
        get { fatalError("unreachable") }
        set { fatalError("unreachable") }  // swiftlint:disable:this unused_setter_value
    }
}

/// A stored Swift property of a ``ManagedObject`` subclass that Cairn neither stores nor
/// tracks: a cache, a formatter, a handle the object keeps for the app alone.
///
/// ```swift
/// final class Photo: ManagedObject {
///     @Attribute var path: String = ""
///     @Ignored var thumbnail: Image? = nil
/// }
/// ```
///
/// A ``Model`` refuses a stored property declared with none of Cairn's wrappers, naming
/// it, since it would silently not be saved: declare it ``Attribute`` to store it,
/// ``Transient`` to track it unsaved, or `@Ignored` to keep it a plain Swift property
/// (``ManagedObject/ignoredProperties`` names one `@Ignored` cannot wrap: a `let`, a
/// `weak` or a `lazy` property).
@propertyWrapper
public struct Ignored<Value> {
    /// The property's value, held by the object as a plain Swift property.
    public var wrappedValue: Value
    /// A property whose initial value is `wrappedValue`.
    public init(wrappedValue: Value) { self.wrappedValue = wrappedValue }
}

extension Ignored: Sendable where Value: Sendable {}

/// A wrapper whose property Cairn knows it is not to store.
protocol UnstoredDeclaration {}
extension Transient: UnstoredDeclaration {}
extension Ignored: UnstoredDeclaration {}

/// What undo puts back of one transient property: the value it held, nil for the initial one.
final class TransientChange {
    let site: DeclarationSite
    let value: Any?
    init(site: DeclarationSite, value: Any?) {
        self.site = site
        self.value = value
    }
}

extension ManagedObject {
    /// Sets a transient value: through the context (tracked and undoable) when in one; on a
    /// new object not yet inserted, as its value. An invalidated object changes nothing.
    func setTransient(_ value: Any, at site: DeclarationSite) {
        if let context {
            context.writeTransient(self, site: site, value: value)
        } else if isInvalidated {
            reportInvalidAccess("change a transient property of")
        } else {
            putTransient(value, at: site, changed: false)
        }
    }

    /// Stores `value` (nil: back to the initial value) as the transient at `site`.
    func putTransient(_ value: Any?, at site: DeclarationSite, changed: Bool) {
        let extras = self.extras ?? ObjectExtras()
        self.extras = extras
        extras.changingTransient(self, site: site) { extras.transients[site] = value }
        if changed { extras.transientsChanged = true }
    }

    /// The transient value set at `site`, if one is.
    func transientValue(at site: DeclarationSite) -> Any? { extras?.transients[site] }

    /// Whether a transient property changed since the object's last save.
    var hasTransientChanges: Bool { extras?.transientsChanged ?? false }

    /// Every transient property back to its initial value, unchanged.
    func clearTransients() {
        guard let extras, !extras.transients.isEmpty || extras.transientsChanged else { return }
        for site in Array(extras.transients.keys) { extras.changingTransient(self, site: site) { extras.transients[site] = nil } }
        extras.transientsChanged = false
    }
}

extension Context {
    /// Sets a transient value of `object`, recorded for undo in the current event, and
    /// notes the object as changed.
    func writeTransient(_ object: ManagedObject, site: DeclarationSite, value: Any) {
        guard object.exists else {
            recordRefusedWrite(CairnError(.invalidArgument, "cannot change \(object.entity.name) \(object.recordID): it is deleted"))
            return
        }
        undoManager.withGroup(in: self) {
            undoManager.record(object, transient: site, replacing: object.transientValue(at: site))
            object.putTransient(value, at: site, changed: true)
        }
        hasTransientChanges = true
        dirty[object.recordID] = object
    }

    /// Puts back a transient value undo recorded.
    func restoreTransient(_ object: ManagedObject, _ change: TransientChange) {
        object.putTransient(change.value, at: change.site, changed: true)
        hasTransientChanges = true
    }

    /// After a save: the transient values of the changed objects count as saved.
    func clearTransientChanges() {
        guard hasTransientChanges else { return }
        hasTransientChanges = false
        for (_, object) in dirty { object.extras?.transientsChanged = false }
    }
}
