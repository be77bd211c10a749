/// A reference that does not retain its object, for an owner that clears it before the
/// object goes (the object's deinit clears the reference it is held by): reading it costs
/// no runtime call, where a weak reference's load does, and it gives the object no side
/// table. Reading it after the object went, without clearing, is undefined: the owner's
/// protocol must rule that out.
public struct UnretainedReference<Object: AnyObject> {
    @usableFromInline var unmanaged: Unmanaged<Object>?

    @inlinable public init() {}

    /// Points at `object` (nil: at nothing).
    @inlinable public mutating func set(_ object: Object?) { unmanaged = object.map { .passUnretained($0) } }

    /// Whether it points at an object.
    @inlinable public var isSet: Bool { unmanaged != nil }

    /// The object, retained for the caller.
    @inlinable public var object: Object? { unmanaged?.takeUnretainedValue() }

    /// Calls `body` with the object, if it points at one, without retaining it.
    @inlinable @inline(__always)
    public func withObject<T>(_ body: (Object) throws -> T) rethrows -> T? {
        guard let unmanaged else { return nil }
        return try unmanaged._withUnsafeGuaranteedRef(body)
    }
}
