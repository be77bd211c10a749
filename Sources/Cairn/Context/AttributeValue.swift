import CairnStorage
import Foundation

/// A Swift type that can be a managed object's attribute: it knows its stored type and
/// converts to and from ``Value``. Optionals of these types are attributes too.
public protocol AttributeValue {
    /// The attribute type a property of this type is stored as.
    static var attributeType: AttributeType { get }
    /// Whether `nil` is a valid value (true only for `Optional`).
    static var isOptionalAttribute: Bool { get }
    /// The value for a stored ``Value``, or nil if the stored value has another type.
    init?(cairnValue: Value)
    /// The value as it is stored.
    var cairnValue: Value { get }
    /// What a required attribute reads as before anything is stored (a fault that failed).
    static var fallback: Self { get }
}

extension AttributeValue {
    public static var isOptionalAttribute: Bool { false }
}

extension Bool: AttributeValue {
    public static var attributeType: AttributeType { .bool }
    public init?(cairnValue: Value) { guard case .bool(let v) = cairnValue else { return nil }; self = v }
    public var cairnValue: Value { .bool(self) }
    public static var fallback: Bool { false }
}

extension Int: AttributeValue {
    public static var attributeType: AttributeType { .int64 }
    public init?(cairnValue: Value) {
        guard case .int64(let v) = cairnValue, let narrow = Int(exactly: v) else { return nil }
        self = narrow
    }
    public var cairnValue: Value { .int64(Int64(self)) }
    public static var fallback: Int { 0 }
}

extension Int8: AttributeValue {
    public static var attributeType: AttributeType { .int8 }
    public init?(cairnValue: Value) { guard case .int8(let v) = cairnValue else { return nil }; self = v }
    public var cairnValue: Value { .int8(self) }
    public static var fallback: Int8 { 0 }
}

extension Int16: AttributeValue {
    public static var attributeType: AttributeType { .int16 }
    public init?(cairnValue: Value) { guard case .int16(let v) = cairnValue else { return nil }; self = v }
    public var cairnValue: Value { .int16(self) }
    public static var fallback: Int16 { 0 }
}

extension Int32: AttributeValue {
    public static var attributeType: AttributeType { .int32 }
    public init?(cairnValue: Value) { guard case .int32(let v) = cairnValue else { return nil }; self = v }
    public var cairnValue: Value { .int32(self) }
    public static var fallback: Int32 { 0 }
}

extension Int64: AttributeValue {
    public static var attributeType: AttributeType { .int64 }
    public init?(cairnValue: Value) { guard case .int64(let v) = cairnValue else { return nil }; self = v }
    public var cairnValue: Value { .int64(self) }
    public static var fallback: Int64 { 0 }
}

extension Double: AttributeValue {
    public static var attributeType: AttributeType { .double }
    public init?(cairnValue: Value) { guard case .double(let v) = cairnValue else { return nil }; self = v }
    public var cairnValue: Value { .double(self) }
    public static var fallback: Double { 0 }
}

extension Float: AttributeValue {
    public static var attributeType: AttributeType { .float }
    public init?(cairnValue: Value) { guard case .float(let v) = cairnValue else { return nil }; self = v }
    public var cairnValue: Value { .float(self) }
    public static var fallback: Float { 0 }
}

extension String: AttributeValue {
    public static var attributeType: AttributeType { .string }
    public init?(cairnValue: Value) { guard case .string(let v) = cairnValue else { return nil }; self = v }
    public var cairnValue: Value { .string(self) }
    public static var fallback: String { "" }
}

extension Data: AttributeValue {
    public static var attributeType: AttributeType { .binary }
    public init?(cairnValue: Value) { guard case .bytes(let v) = cairnValue else { return nil }; self = v }
    public var cairnValue: Value { .bytes(self) }
    public static var fallback: Data { Data() }
}

extension Date: AttributeValue {
    public static var attributeType: AttributeType { .date }
    public init?(cairnValue: Value) { guard case .date(let v) = cairnValue else { return nil }; self = v }
    public var cairnValue: Value { .date(self) }
    public static var fallback: Date { Date(timeIntervalSinceReferenceDate: 0) }
}

extension UUID: AttributeValue {
    public static var attributeType: AttributeType { .uuid }
    public init?(cairnValue: Value) { guard case .uuid(let v) = cairnValue else { return nil }; self = v }
    public var cairnValue: Value { .uuid(self) }
    public static var fallback: UUID { UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) }
}

extension URL: AttributeValue {
    public static var attributeType: AttributeType { .url }
    public init?(cairnValue: Value) { guard case .url(let v) = cairnValue else { return nil }; self = v }
    public var cairnValue: Value { .url(self) }
    public static var fallback: URL { URL(fileURLWithPath: "/") }
}

extension Decimal: AttributeValue {
    public static var attributeType: AttributeType { .decimal }
    public init?(cairnValue: Value) { guard case .decimal(let v) = cairnValue else { return nil }; self = v }
    public var cairnValue: Value { .decimal(self) }
    public static var fallback: Decimal { 0 }
}

extension Optional: AttributeValue where Wrapped: AttributeValue {
    public static var attributeType: AttributeType { Wrapped.attributeType }
    public static var isOptionalAttribute: Bool { true }
    public init?(cairnValue: Value) {
        if case .null = cairnValue { self = .none; return }
        guard let wrapped = Wrapped(cairnValue: cairnValue) else { return nil }
        self = .some(wrapped)
    }
    public var cairnValue: Value { map(\.cairnValue) ?? .null }
    public static var fallback: Wrapped? { nil }
}
