import Foundation

/// How values compare, for predicates, sorting and indexes (one definition for all):
/// numbers compare by value across integer, floating and decimal types (booleans as 0
/// and 1); strings by Unicode scalars, optionally case- and diacritic-folded; dates by
/// time; nil equals only nil and has no order, but sorts first.
@usableFromInline package enum ValueOrder {
    @usableFromInline package static func fold(_ text: String, _ options: ComparisonOptions) -> String {
        var folding: String.CompareOptions = []
        if options.contains(.caseInsensitive) { folding.insert(.caseInsensitive) }
        if options.contains(.diacriticInsensitive) { folding.insert(.diacriticInsensitive) }
        return folding.isEmpty ? text : text.folding(options: folding, locale: nil)
    }

    /// Two strings by Unicode scalar values after canonical composition (FORMAT.md §6.6):
    /// the UTF-8 bytes of their NFC forms. Not Swift's `<`, which is meant to be that order
    /// but is not, with Swift 6.3 on Linux, for text not in NFC: it orders a decomposed
    /// "e\u{301}" neither way against a precomposed "é0", and puts a decomposed "éé" after
    /// "éé1" though it equals "éé"; a sort or an index search then misplaced such strings.
    package static func stringOrder(_ l: String, _ r: String) -> ComparisonResult {
        // (Both read once when both are composed already, as most strings are.)
        let plain: ComparisonResult? = withBytes(l) { x in
            withBytes(r) { y in
                x.contains { $0 >= 0xCC } || y.contains { $0 >= 0xCC } ? nil : bytesOrder(x, y)
            }
        }
        return plain ?? composedOrder(composed(l), composed(r))
    }

    /// `text` in canonical composition (NFC): as it is when every scalar is below U+0300
    /// (every UTF-8 byte below 0xCC: no combining mark, nothing that composes), which
    /// ASCII and most Latin text is; else as Foundation composes it.
    package static func composed(_ text: String) -> String {
        let plain = withBytes(text) { bytes in !bytes.contains { $0 >= 0xCC } }
        return plain ? text : text.precomposedStringWithCanonicalMapping
    }

    /// Two strings in canonical composition by their UTF-8 bytes, which is the order of
    /// their scalars.
    package static func composedOrder(_ a: String, _ b: String) -> ComparisonResult {
        withBytes(a) { x in withBytes(b) { y in bytesOrder(x, y) } }
    }

    /// The first eight UTF-8 bytes of `text` as one big-endian number, zeros after a
    /// shorter string's end. Two strings whose prefixes differ are in the order of their
    /// prefixes, by their bytes (a proper prefix of a string pads with zeros, below or
    /// equal to any byte the longer one has there); equal prefixes say nothing.
    package static func bytePrefix(_ text: String) -> UInt64 {
        withBytes(text) { bytes in
            var prefix: UInt64 = 0
            for i in 0..<8 { prefix = prefix << 8 | UInt64(i < bytes.count ? bytes[i] : 0) }
            return prefix
        }
    }

    @inline(__always)
    private static func bytesOrder(_ x: UnsafeBufferPointer<UInt8>, _ y: UnsafeBufferPointer<UInt8>) -> ComparisonResult {
        let common = min(x.count, y.count)
        if common > 0, let p = x.baseAddress, let q = y.baseAddress {
            let order = memcmp(p, q, common)
            if order != 0 { return order < 0 ? .orderedAscending : .orderedDescending }
        }
        return x.count < y.count ? .orderedAscending : (x.count > y.count ? .orderedDescending : .orderedSame)
    }

    /// `body` with a string's UTF-8 bytes, in place (a short string's on the stack): not
    /// `withUTF8`, which is mutating and makes a short string a native one, an allocation at
    /// each comparison.
    @inline(__always)
    private static func withBytes<R>(_ text: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let result = text.utf8.withContiguousStorageIfAvailable(body) { return result }
        return Array(text.utf8).withUnsafeBufferPointer(body)
    }

    package enum Number { case integer(Int64), real(Double), decimal(Decimal) }

    package static func number(_ value: Value) -> Number? {
        switch value {
        case .int8(let v): return .integer(Int64(v))
        case .int16(let v): return .integer(Int64(v))
        case .int32(let v): return .integer(Int64(v))
        case .int64(let v): return .integer(v)
        case .bool(let v): return .integer(v ? 1 : 0)
        case .float(let v): return .real(Double(v))
        case .double(let v): return .real(v)
        case .decimal(let v): return .decimal(v)
        default: return nil
        }
    }

    package static func equal(_ a: Value, _ b: Value, _ options: ComparisonOptions) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.null, _), (_, .null): return false
        case (.string(let x), .string(let y)): return fold(x, options) == fold(y, options)
        case (.reference(let x), .reference(let y)): return x == y
        default: return order(a, b, options) == .orderedSame
        }
    }

    /// The order of two values, or nil if they cannot be compared (nil, or unlike types).
    package static func order(_ a: Value, _ b: Value, _ options: ComparisonOptions) -> ComparisonResult? {
        if let x = number(a), let y = number(b) {
            switch (x, y) {
            case (.integer(let i), .integer(let j)): return i < j ? .orderedAscending : (i > j ? .orderedDescending : .orderedSame)
            case (.decimal(let d), _), (_, .decimal(let d)):
                _ = d
                let l = decimal(x), r = decimal(y)
                // A real that is not NaN but no decimal holds (infinite, or beyond a decimal's
                // exponent, large or small) against a decimal: as reals, which hold every decimal.
                if case .real(let v) = x, !v.isNaN, l.isNaN, !r.isNaN { return realOrder(v, real(y)) }
                if case .real(let v) = y, !v.isNaN, r.isNaN, !l.isNaN { return realOrder(real(x), v) }
                // A NaN orders with nothing, as a real NaN does (by < and > alone it was the
                // same as every number).
                if l.isNaN || r.isNaN { return nil }
                return l < r ? .orderedAscending : (l > r ? .orderedDescending : .orderedSame)
            default:
                let l = real(x), r = real(y)
                if l.isNaN || r.isNaN { return nil }
                return l < r ? .orderedAscending : (l > r ? .orderedDescending : .orderedSame)
            }
        }
        switch (a, b) {
        case (.string(let x), .string(let y)):
            return stringOrder(fold(x, options), fold(y, options))
        case (.date(let x), .date(let y)):
            // A NaN date orders with nothing, as a real NaN does: by < and > alone it was the
            // same as every date, so a scan found it equal to all of them and an index to
            // those beside it.
            if x.timeIntervalSinceReferenceDate.isNaN || y.timeIntervalSinceReferenceDate.isNaN { return nil }
            return x < y ? .orderedAscending : (x > y ? .orderedDescending : .orderedSame)
        case (.uuid(let x), .uuid(let y)):
            return uuidOrder(x, y)
        case (.url(let x), .url(let y)):
            return stringOrder(x.absoluteString, y.absoluteString)
        case (.bytes(let x), .bytes(let y)), (.archived(let x), .archived(let y)):
            return x == y ? .orderedSame : (x.lexicographicallyPrecedes(y) ? .orderedAscending : .orderedDescending)
        case (.reference(let x), .reference(let y)):
            return x < y ? .orderedAscending : (x > y ? .orderedDescending : .orderedSame)
        default:
            return nil
        }
    }

    package static func real(_ number: Number) -> Double {
        switch number {
        case .integer(let v): return Double(v)
        case .real(let v): return v
        case .decimal(let v): return NSDecimalNumber(decimal: v).doubleValue
        }
    }

    /// The number as a decimal: a real that is NaN or infinite, which `Decimal(_:)` traps
    /// on, is NaN.
    package static func decimal(_ number: Number) -> Decimal {
        switch number {
        case .integer(let v): return Decimal(v)
        case .real(let v): return decimal(v)
        case .decimal(let v): return v
        }
    }

    /// `value` as a decimal: NaN if it is infinite (which `Decimal(_:)` traps on), NaN, or
    /// beyond a decimal's exponent (about 1e-107 ... 1.8e146 in magnitude).
    package static func decimal(_ value: Double) -> Decimal {
        value.isFinite ? Decimal(value) : .nan
    }

    @inline(__always) private static func realOrder(_ l: Double, _ r: Double) -> ComparisonResult {
        l < r ? .orderedAscending : (l > r ? .orderedDescending : .orderedSame)
    }

    /// The order of two values when either is a NaN (a real, decimal or date): after every
    /// other value, nil too, and the same as another NaN; nil if neither is. The order of
    /// a fetch's sort keys and of an index (``IndexOrder``, FORMAT.md §6.6): by
    /// ``sortOrder(_:_:localized:)`` alone, a NaN went by its encoded bytes, which among
    /// numbers is no order at all (NaN before 1.0000000000000002, that before 2.0, and 2.0
    /// before NaN), so a sort kept in part and the whole sort disagreed, and an index
    /// lookup missed values on the far side of a NaN.
    package static func nanOrder(_ x: Value, _ y: Value) -> ComparisonResult? {
        switch (isNaN(x), isNaN(y)) {
        case (false, false): return nil
        case (true, true): return .orderedSame
        case (true, false): return .orderedDescending
        case (false, true): return .orderedAscending
        }
    }

    @inline(__always) package static func isNaN(_ value: Value) -> Bool {
        switch value {
        case .double(let v): return v.isNaN
        case .float(let v): return v.isNaN
        case .decimal(let v): return v.isNaN
        case .date(let v): return v.timeIntervalSinceReferenceDate.isNaN
        default: return false
        }
    }

    /// Sort order: nil first, then by ``order(_:_:_:)``; unlike types by type tag.
    package static func sortOrder(_ a: Value, _ b: Value, localizedCaseInsensitive: Bool) -> ComparisonResult {
        if localizedCaseInsensitive, case .string(let x) = a, case .string(let y) = b {
            // One comparison: not worth setting up a LocalizedOrder (a sort makes one).
            return LocalizedOrder.foundationOrder(x, y, locale: .current)
        }
        return sortOrder(a, b, localized: nil)
    }

    /// ``sortOrder(_:_:localizedCaseInsensitive:)`` with strings compared by `localized`
    /// when given (made once for a whole sort).
    package static func sortOrder(_ a: Value, _ b: Value, localized: LocalizedOrder?) -> ComparisonResult {
        switch (a.isNull, b.isNull) {
        case (true, true): return .orderedSame
        case (true, false): return .orderedAscending
        case (false, true): return .orderedDescending
        default: break
        }
        if let localized, case .string(let x) = a, case .string(let y) = b {
            return localized.compare(x, y)
        }
        if let result = order(a, b, []) { return result }
        let l = ValueCoding.encode([a]), r = ValueCoding.encode([b])
        return l == r ? .orderedSame : (l.lexicographicallyPrecedes(r) ? .orderedAscending : .orderedDescending)
    }
}

/// `[c]` case-insensitive, `[d]` diacritic-insensitive.
public struct ComparisonOptions: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// `[c]`: strings compare ignoring case.
    public static let caseInsensitive = ComparisonOptions(rawValue: 1)
    /// `[d]`: strings compare ignoring diacritics (`é` as `e`).
    public static let diacriticInsensitive = ComparisonOptions(rawValue: 2)

    public var description: String {
        if isEmpty { return "" }
        return "[" + (contains(.caseInsensitive) ? "c" : "") + (contains(.diacriticInsensitive) ? "d" : "") + "]"
    }
}



extension ValueOrder {
    /// UUIDs in the order of their upper-case hex strings (FORMAT.md §6.6), which is the
    /// order of their 16 bytes: each byte is two hex digits, and the dashes stand at the
    /// same places in every string. Comparing the strings would allocate two of them per
    /// comparison.
    static func uuidOrder(_ x: UUID, _ y: UUID) -> ComparisonResult {
        withUnsafeBytes(of: x.uuid) { a in
            withUnsafeBytes(of: y.uuid) { b in
                for index in 0..<16 where a[index] != b[index] {
                    return a[index] < b[index] ? .orderedAscending : .orderedDescending
                }
                return .orderedSame
            }
        }
    }
}

/// Localized, case-insensitive string order (`SortKey(localizedCaseInsensitive:)`),
/// set up once for a sort. Foundation's locale-aware comparison is slow (it bridges both
/// strings and the locale at each call). Strings of ASCII letters, digits and spaces
/// only, in a locale whose collation orders them as their bytes with letters folded to
/// lower case, are compared so; others (and all strings in other locales: Danish sorts
/// "aa" last, Czech "ch" after "h") go through Foundation. `LocalizedOrderTests` checks
/// the fast path against Foundation's comparison in every listed language.
package struct LocalizedOrder {
    package let locale: Locale
    /// Whether ASCII letters, digits and spaces compare as folded bytes in `locale`.
    package let foldsASCII: Bool

    /// Languages whose collation does not reorder ASCII letters, digits or spaces (no
    /// tailoring of them, no numeric ordering by default).
    package static let asciiLanguages: Set<String> = ["en", "de", "fr", "it", "pt", "nl", "es"]

    package init(locale: Locale = .current) {
        self.locale = locale
        let identifier = locale.identifier
        foldsASCII = locale.language.languageCode.map { Self.asciiLanguages.contains($0.identifier) } ?? false
            && !identifier.contains("@") && !identifier.contains("-u-") && !identifier.contains("_u_")
            && !identifier.uppercased().contains("POSIX")
    }

    package func compare(_ x: String, _ y: String) -> ComparisonResult {
        if foldsASCII, let order = Self.foldedASCIIOrder(x, y) { return order }
        return Self.foundationOrder(x, y, locale: locale)
    }

    /// Foundation's locale-aware, case-insensitive order: what the fast path must agree with.
    package static func foundationOrder(_ x: String, _ y: String, locale: Locale) -> ComparisonResult {
        x.compare(y, options: [.caseInsensitive], range: nil, locale: locale)
    }

    /// The order of `x` and `y` as bytes with A–Z folded to a–z, or nil unless both are
    /// made of ASCII letters, digits and spaces only (checked to the end of each).
    package static func foldedASCIIOrder(_ x: String, _ y: String) -> ComparisonResult? {
        var x = x, y = y
        return x.withUTF8 { a in
            y.withUTF8 { b -> ComparisonResult? in
                var order = ComparisonResult.orderedSame
                let common = min(a.count, b.count)
                for index in 0..<max(a.count, b.count) {
                    if index < a.count, !isPlain(a[index]) { return nil }
                    if index < b.count, !isPlain(b[index]) { return nil }
                    if order == .orderedSame, index < common {
                        let l = folded(a[index]), r = folded(b[index])
                        if l != r { order = l < r ? .orderedAscending : .orderedDescending }
                    }
                }
                if order == .orderedSame, a.count != b.count { order = a.count < b.count ? .orderedAscending : .orderedDescending }
                return order
            }
        }
    }

    @inline(__always) private static func isPlain(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x20
    }

    @inline(__always) private static func folded(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte
    }
}

/// The key of a value whose equality to another keyed value (``ValueOrder/equal(_:_:_:)``)
/// is equality of keys: integers and booleans by value, strings folded as the options say,
/// references, UUIDs and nil. Sets and dictionaries of them find equal values without
/// comparing with each. The other kinds (reals, decimals, dates, …) have none.
package enum ValueKey: Hashable {
    case null, integer(Int64), string(String), reference(UInt64), uuid(UUID)

    /// Nil for a kind without a key.
    package init?(_ value: Value, _ options: ComparisonOptions) {
        switch value {
        case .null: self = .null
        case .bool(let v): self = .integer(v ? 1 : 0)
        case .int8(let v): self = .integer(Int64(v))
        case .int16(let v): self = .integer(Int64(v))
        case .int32(let v): self = .integer(Int64(v))
        case .int64(let v): self = .integer(v)
        case .string(let v): self = .string(ValueOrder.fold(v, options))
        case .reference(let v): self = .reference(v)
        case .uuid(let v): self = .uuid(v)
        default: return nil
        }
    }
}
