/// A fixed number of elements in storage of their own, read and written in place without
/// the checks an `Array` makes at each access (uniqueness, and bounds outside debug
/// builds): the program and scratch values of a predicate tested against every record of
/// a scan. Not copyable, so the storage has one owner, which frees it.
///
/// Not for sharing between threads unless the owner says how writes are ordered.
public struct FixedArray<Element>: ~Copyable {
    @usableFromInline let elements: UnsafeMutableBufferPointer<Element>

    /// The elements of `source`, in order.
    @inlinable public init(_ source: some Collection<Element>) {
        elements = .allocate(capacity: source.count)
        _ = elements.initialize(from: source)
    }

    /// `count` copies of `value`.
    @inlinable public init(repeating value: Element, count: Int) {
        elements = .allocate(capacity: count)
        elements.initialize(repeating: value)
    }

    deinit { elements.deinitialize().deallocate() }

    @inlinable public var count: Int { elements.count }
    @inlinable public var isEmpty: Bool { elements.isEmpty }

    /// The element at `index` (checked to be in bounds in debug builds only).
    @inlinable public subscript(index: Int) -> Element {
        @inline(__always) get {
            assert(index >= 0 && index < elements.count, "index \(index) out of 0..<\(elements.count)")
            return elements[index]
        }
        @inline(__always) nonmutating set {
            assert(index >= 0 && index < elements.count, "index \(index) out of 0..<\(elements.count)")
            elements[index] = newValue
        }
    }

    /// A copy of the elements, as an array.
    @inlinable public var array: [Element] { Array(elements) }
}
