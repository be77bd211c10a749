import CairnStorage
import Foundation

/// A fetch predicate: the tree that string predicates (NSPredicate format syntax) and
/// typed `#Predicate`s are both turned into. The planner reads it to pick an index; the
/// evaluator runs it against stored records or live objects.
public indirect enum FetchPredicate: Sendable, Hashable, CustomStringConvertible {
    /// `TRUEPREDICATE` / `FALSEPREDICATE`.
    case constant(Bool)
    /// `NOT`: true where the predicate is false.
    case not(FetchPredicate)
    /// `AND`: true where every one of the predicates is.
    case and([FetchPredicate])
    /// `OR`: true where any one of the predicates is.
    case or([FetchPredicate])
    /// `lhs op rhs`, optionally quantified over a to-many key path (`ANY`, `ALL`, `NONE`).
    case comparison(PredicateExpression, ComparisonOperator, PredicateExpression, ComparisonOptions, Quantifier)

    /// Parses NSPredicate format syntax, with stored ``Value``s as arguments (or none):
    /// `%@` takes the next argument as a value, `%K` the next as a key path (a `.string`).
    /// Errors name the column and what was expected. Plain Swift values are taken by
    /// ``init(format:_:_:)``: `FetchPredicate(format: "age >= %@", 18)`.
    public init(format: String, _ arguments: Value...) throws {
        try self.init(format: format, arguments: arguments)
    }

    /// ``init(format:_:)`` with the arguments in an array.
    public init(format: String, arguments: [Value]) throws {
        var parser = PredicateParser(format, arguments: arguments.map(PredicateExpression.constant))
        self = try parser.parse()
    }

    /// Parses NSPredicate format syntax with plain Swift values as arguments (any
    /// ``PredicateArgument``): `%@` takes a `String`, a number, a `Bool`, a `Date`, a `UUID`,
    /// a `URL`, `Data`, a `Decimal`, an object's ``ObjectID`` (to compare with a to-one
    /// relationship), a ``Value``, `nil`, or an array of those (for `IN %@`); `%K` a key
    /// path `String`. Errors name the column and what was expected.
    ///
    /// ```swift
    /// try FetchPredicate(format: "username IN %@ AND age >= %@", ["ann", "bo"], 18)
    /// ```
    public init(format: String, _ first: any PredicateArgument, _ rest: any PredicateArgument...) throws {
        try self.init(format: format, plain: [first] + rest)
    }

    /// ``init(format:_:_:)`` with the arguments in a list.
    init(format: String, plain arguments: [any PredicateArgument]) throws {
        var parser = PredicateParser(format, arguments: arguments.map(\.predicateExpression))
        self = try parser.parse()
    }

    /// Every key path the predicate reads, on either side of each comparison (live results
    /// depend on the records those reach: ``ResultsDependencies``).
    var keyPaths: [[String]] {
        switch self {
        case .constant: return []
        case .not(let inner): return inner.keyPaths
        case .and(let parts), .or(let parts): return parts.flatMap(\.keyPaths)
        case .comparison(let lhs, _, let rhs, _, _): return lhs.keyPaths + rhs.keyPaths
        }
    }

    public var description: String {
        switch self {
        case .constant(let value): return value ? "TRUEPREDICATE" : "FALSEPREDICATE"
        case .not(let inner): return "NOT (\(inner))"
        case .and(let parts): return parts.map { "(\($0))" }.joined(separator: " AND ")
        case .or(let parts): return parts.map { "(\($0))" }.joined(separator: " OR ")
        case .comparison(let lhs, let op, let rhs, let options, let quantifier):
            let prefix = quantifier == .direct ? "" : "\(quantifier.rawValue) "
            return "\(prefix)\(lhs) \(op.rawValue)\(options.description) \(rhs)"
        }
    }
}

/// One side of a comparison in a ``FetchPredicate``: a key path, a constant, or a list.
public indirect enum PredicateExpression: Sendable, Hashable, CustomStringConvertible {
    /// A key path: `name`, `owner.username`, `dvds.title`, `dvds.@count`.
    case keyPath([String])
    /// A value: a literal of the format (`'ann'`, `18`, `nil`) or a `%@` argument.
    case constant(Value)
    /// `{1, 2, 3}`, for `IN` and `BETWEEN`.
    case list([PredicateExpression])

    var keyPaths: [[String]] {
        switch self {
        case .keyPath(let parts): return [parts]
        case .constant: return []
        case .list(let items): return items.flatMap(\.keyPaths)
        }
    }

    public var description: String {
        switch self {
        case .keyPath(let parts): return parts.joined(separator: ".")
        case .constant(.string(let text)): return String(reflecting: text)
        case .constant(let value): return value.description
        case .list(let items): return "{" + items.map(\.description).joined(separator: ", ") + "}"
        }
    }
}

/// How a comparison compares its left side with its right; the raw value is the operator
/// as a format writes it. String comparisons follow the comparison's options (`[c]`, `[d]`).
public enum ComparisonOperator: String, Sendable, Hashable, CaseIterable {
    /// Equal (`==`, or `=`).
    case equal = "=="
    /// Not equal (`!=`, or `<>`).
    case notEqual = "!="
    /// Less than.
    case less = "<"
    /// Less than or equal (`<=`, or `=<`).
    case lessOrEqual = "<="
    /// Greater than.
    case greater = ">"
    /// Greater than or equal (`>=`, or `=>`).
    case greaterOrEqual = ">="
    /// The left string starts with the right one.
    case beginsWith = "BEGINSWITH"
    /// The left string ends with the right one.
    case endsWith = "ENDSWITH"
    /// The left string contains the right one.
    case contains = "CONTAINS"
    /// The left string matches a wildcard pattern: `*` any run of characters, `?` one.
    case like = "LIKE"
    /// The whole left string matches a regular expression.
    case matches = "MATCHES"
    /// The left value equals one of a list (`{1, 2}`, or an array argument), or the left
    /// string occurs in a right string.
    case `in` = "IN"
    /// The left value lies between two bounds, both included: `age BETWEEN {18, 65}`.
    case between = "BETWEEN"
}

/// How a comparison whose left side is a to-many key path (`dvds.title`) counts the
/// related values that match.
public enum Quantifier: String, Sendable, Hashable {
    /// No quantifier: the left side is one value. A key path through a to-many relationship
    /// needs one of the others (or `@count`).
    case direct = ""
    /// At least one related value matches.
    case any = "ANY"
    /// Every related value matches (true when there are none).
    case all = "ALL"
    /// No related value matches.
    case none = "NONE"
}

/// How to order results: a key path (through to-one relationships), a direction, and
/// optionally localized case-insensitive string order.
public struct SortKey: Sendable, Hashable {
    /// The key path's names: `["owner", "name"]` for `owner.name`.
    public var keyPath: [String]
    /// Whether smaller values come first.
    public var ascending: Bool
    /// Whether strings are compared ignoring case, in the current locale's order.
    public var localizedCaseInsensitive: Bool

    /// Orders by the attribute at `keyPath` (`"name"`, or `"owner.name"` through a to-one
    /// relationship).
    public init(_ keyPath: String, ascending: Bool = true, localizedCaseInsensitive: Bool = false) {
        self.keyPath = keyPath.split(separator: ".").map(String.init)
        self.ascending = ascending
        self.localizedCaseInsensitive = localizedCaseInsensitive
    }

    /// Parses `name`, `-age` (descending), `~title` (case-insensitive): the CLI's `--sort` syntax.
    public init(parsing text: String) {
        var body = Substring(text)
        var ascending = true, folded = false
        while let first = body.first, first == "-" || first == "~" || first == "+" {
            if first == "-" { ascending = false }
            if first == "~" { folded = true }
            body = body.dropFirst()
        }
        self.init(String(body), ascending: ascending, localizedCaseInsensitive: folded)
    }
}

/// A plain Swift value a format predicate takes as an argument (see
/// ``FetchPredicate/init(format:_:_:)``).
public protocol PredicateArgument: Sendable {
    /// The value as the predicate reads it.
    var predicateExpression: PredicateExpression { get }
}

extension Value: PredicateArgument {
    public var predicateExpression: PredicateExpression { .constant(self) }
}
extension String: PredicateArgument {
    public var predicateExpression: PredicateExpression { .constant(.string(self)) }
}
extension Bool: PredicateArgument {
    public var predicateExpression: PredicateExpression { .constant(.bool(self)) }
}
extension Double: PredicateArgument {
    public var predicateExpression: PredicateExpression { .constant(.double(self)) }
}
extension Float: PredicateArgument {
    public var predicateExpression: PredicateExpression { .constant(.float(self)) }
}
extension Date: PredicateArgument {
    public var predicateExpression: PredicateExpression { .constant(.date(self)) }
}
extension UUID: PredicateArgument {
    public var predicateExpression: PredicateExpression { .constant(.uuid(self)) }
}
extension URL: PredicateArgument {
    public var predicateExpression: PredicateExpression { .constant(.url(self)) }
}
extension Data: PredicateArgument {
    public var predicateExpression: PredicateExpression { .constant(.bytes(self)) }
}
extension Decimal: PredicateArgument {
    public var predicateExpression: PredicateExpression { .constant(.decimal(self)) }
}
extension Int: PredicateArgument {
    public var predicateExpression: PredicateExpression { .constant(.int64(Int64(self))) }
}
extension Int64: PredicateArgument {
    public var predicateExpression: PredicateExpression { .constant(.int64(self)) }
}
extension Int32: PredicateArgument {
    public var predicateExpression: PredicateExpression { .constant(.int64(Int64(self))) }
}
extension Int16: PredicateArgument {
    public var predicateExpression: PredicateExpression { .constant(.int64(Int64(self))) }
}
extension Int8: PredicateArgument {
    public var predicateExpression: PredicateExpression { .constant(.int64(Int64(self))) }
}
extension RecordID: PredicateArgument {
    /// A reference to the record (compared with a to-one relationship).
    public var predicateExpression: PredicateExpression { .constant(.reference(rawValue)) }
}
extension ObjectID: PredicateArgument {
    /// A reference to the object's record (compared with a to-one relationship).
    public var predicateExpression: PredicateExpression { .constant(.reference(recordID.rawValue)) }
}
extension Optional: PredicateArgument where Wrapped: PredicateArgument {
    public var predicateExpression: PredicateExpression { self?.predicateExpression ?? .constant(.null) }
}
extension Array: PredicateArgument where Element: PredicateArgument {
    /// A list, as `{...}` writes one (for `IN %@` and `BETWEEN %@`).
    public var predicateExpression: PredicateExpression { .list(map(\.predicateExpression)) }
}
