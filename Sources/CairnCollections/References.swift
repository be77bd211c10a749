import Foundation

/// Class references gathered one by one and handed over as an array of a subclass by
/// moving them, not copying them: a copy, a cast or a `map` of an array of references
/// retains every object again, each a cache miss once a large scan has passed it.
///
/// Not for sharing: one thread appends, then takes.
public final class GatheredReferences<Base: AnyObject> {
    @usableFromInline var base: UnsafeMutablePointer<Base>
    @usableFromInline var count = 0
    @usableFromInline var capacity: Int

    @inlinable public init() {
        capacity = 16
        base = .allocate(capacity: capacity)
    }

    deinit {
        base.deinitialize(count: count)
        base.deallocate()
    }

    /// How many references are held.
    @inlinable public var gathered: Int { count }

    @inlinable public func append(_ object: Base) {
        if count == capacity { grow() }
        (base + count).initialize(to: object)
        count += 1
    }

    @usableFromInline func grow() {
        let larger = UnsafeMutablePointer<Base>.allocate(capacity: capacity * 2)
        larger.moveInitialize(from: base, count: count)
        base.deallocate()
        base = larger
        capacity *= 2
    }

    /// The references, in the order appended, as an array of `T`, leaving none here.
    ///
    /// - Precondition: every reference is an instance of `T` (a class that is `Base` or
    ///   a subclass of it); checked in debug builds.
    @inlinable public func take<T: AnyObject>(as _: T.Type) -> [T] {
        let taken = count
        // With nothing to take, an empty array: `init(unsafeUninitializedCapacity: 0)`
        // writes its count into the standard library's one shared empty storage, which
        // other threads read (the thread sanitizer reports it as a race).
        guard taken > 0 else { return [] }
        assert((0..<taken).allSatisfy { base[$0] is T }, "a gathered reference is not a \(T.self)")
        count = 0
        // A class reference is the same bits whatever its static class: each one moves
        // from this buffer into the array, which then owns it.
        return [T](unsafeUninitializedCapacity: taken) { buffer, initialized in
            if let target = buffer.baseAddress {
                UnsafeMutableRawPointer(target).copyMemory(from: base, byteCount: taken * MemoryLayout<Base>.stride)
            }
            initialized = taken
        }
    }
}

@available(*, unavailable)
extension GatheredReferences: Sendable {}

/// Object identity by address, for lists of class references compared as a whole: the
/// addresses of a list handed out are kept without retaining its objects, and a list is
/// later compared with them in one pass over the bytes.
public enum ReferenceAddresses {
    /// Appends the addresses of `objects`, in order, to `addresses` (nothing is retained).
    @inlinable public static func append<T: AnyObject>(_ objects: ArraySlice<T>, to addresses: inout [UInt]) {
        let start = addresses.count
        addresses.append(contentsOf: repeatElement(0, count: objects.count))
        objects.withUnsafeBytes { bytes in
            addresses.withUnsafeMutableBytes {
                UnsafeMutableRawBufferPointer(rebasing: $0[(start * MemoryLayout<UInt>.stride)...]).copyMemory(from: bytes)
            }
        }
    }

    /// Whether `objects` begins with the objects whose addresses are `addresses`, in order.
    @inlinable public static func starts<T: AnyObject>(_ objects: [T], with addresses: [UInt]) -> Bool {
        guard objects.count >= addresses.count else { return false }
        return objects.withUnsafeBytes { new in addresses.withUnsafeBytes { old in sameBytes(new, old) } }
    }

    /// Whether `objects` begins with the objects of `prefix`, the same instances in order.
    @inlinable public static func starts<T: AnyObject, U: AnyObject>(_ objects: [T], with prefix: [U]) -> Bool {
        guard objects.count >= prefix.count else { return false }
        return objects.withUnsafeBytes { new in prefix.withUnsafeBytes { old in sameBytes(new, old) } }
    }

    /// Whether `bytes` begins with `prefix` (which is no longer).
    @usableFromInline static func sameBytes(_ bytes: UnsafeRawBufferPointer, _ prefix: UnsafeRawBufferPointer) -> Bool {
        guard let new = bytes.baseAddress, let old = prefix.baseAddress else { return prefix.isEmpty }
        return memcmp(new, old, prefix.count) == 0
    }
}
