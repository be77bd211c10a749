import Foundation

/// The values of a uniqueness group in one record, as the group's check compares them: two
/// keys are equal when their values are equal as ``ValueOrder/equal(_:_:_:)`` compares them
/// with no options (strings by Unicode equivalence, integers by value, 0.0 as -0.0), so
/// that one check within a save (`Context.enforceUniqueness`), one at commit
/// (`Store.uniquenessConflict`) and `verify` agree. Nil, and NaN, which equal nothing,
/// make no key.
package struct UniquenessKey: Hashable {
    package enum Part: Hashable {
        case integer(Int64)
        case string(String)
        case reference(UInt64)
        case uuid(UUID)
        case real(UInt64)
        case decimal(Decimal)
        case text(String)
        case bytes(Data)

        /// Nil for nil and for a NaN.
        package init?(_ value: Value) {
            switch value {
            case .null: return nil
            case .bool(let v): self = .integer(v ? 1 : 0)
            case .int8(let v): self = .integer(Int64(v))
            case .int16(let v): self = .integer(Int64(v))
            case .int32(let v): self = .integer(Int64(v))
            case .int64(let v): self = .integer(v)
            case .string(let v): self = .string(v)
            case .reference(let v): self = .reference(v)
            case .uuid(let v): self = .uuid(v)
            case .float(let v):
                guard !v.isNaN else { return nil }
                self = .real((v == 0 ? 0 : Double(v)).bitPattern)
            case .double(let v):
                guard !v.isNaN else { return nil }
                self = .real((v == 0 ? 0 : v).bitPattern)
            case .date(let v):
                let t = v.timeIntervalSinceReferenceDate
                guard !t.isNaN else { return nil }  // a NaN date equals nothing, as a NaN real
                self = .real((t == 0 ? 0 : t).bitPattern)
            case .decimal(let v):
                guard !v.isNaN else { return nil }
                self = .decimal(v)
            case .url(let v): self = .text(v.absoluteString)
            case .bytes(let v), .archived(let v): self = .bytes(v)
            case .references: self = .text("\(value)")
            }
        }
    }

    package let entity: UInt16
    package let group: Int
    package let parts: [Part]

    /// The key of `values` at `slots` for group `group` of `entity`; nil if one of them
    /// is nil or NaN (such a record collides with none).
    package init?(entity: UInt16, group: Int, slots: [Int], values: [Value]) {
        var parts: [Part] = []
        parts.reserveCapacity(slots.count)
        for slot in slots {
            guard slot < values.count, let part = Part(values[slot]) else { return nil }
            parts.append(part)
        }
        (self.entity, self.group, self.parts) = (entity, group, parts)
    }
}
