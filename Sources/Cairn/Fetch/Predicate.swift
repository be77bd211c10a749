import CairnStorage
import Foundation

/// A fetch predicate: the tree that string predicates (NSPredicate format syntax) and
/// typed `#Predicate`s are both turned into. The planner reads it to pick an index; the
/// evaluator runs it against stored records or live objects.
public indirect enum FetchPredicate: Sendable, Hashable, CustomStringConvertible {
    /// `TRUEPREDICATE` / `FALSEPREDICATE`.
    case constant(Bool)
    case not(FetchPredicate)
    case and([FetchPredicate])
    case or([FetchPredicate])
    /// `lhs op rhs`, optionally quantified over a to-many key path (`ANY`, `ALL`, `NONE`).
    case comparison(PredicateExpression, ComparisonOperator, PredicateExpression, ComparisonOptions, Quantifier)

    /// Parses NSPredicate format syntax; `%@` takes the next argument as a value, `%K`
    /// the next as a key path (a `.string`). Errors name the column and what was expected.
    public init(format: String, _ arguments: Value...) throws {
        try self.init(format: format, arguments: arguments)
    }

    public init(format: String, arguments: [Value]) throws {
        var parser = PredicateParser(format, arguments: arguments.map(PredicateExpression.constant))
        self = try parser.parse()
    }

    /// Parses NSPredicate format syntax with plain Swift values as arguments: `%@` takes a
    /// `String`, a number, a `Bool`, a `Date`, a `UUID`, a `URL`, `Data`, a `Decimal`, a
    /// managed object or its ID, `nil`, or an array of those (for `IN %@`); `%K` a key path
    /// `String`.
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

public indirect enum PredicateExpression: Sendable, Hashable, CustomStringConvertible {
    /// A key path: `name`, `owner.username`, `dvds.title`, `dvds.@count`.
    case keyPath([String])
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

public enum ComparisonOperator: String, Sendable, Hashable, CaseIterable {
    case equal = "=="
    case notEqual = "!="
    case less = "<"
    case lessOrEqual = "<="
    case greater = ">"
    case greaterOrEqual = ">="
    case beginsWith = "BEGINSWITH"
    case endsWith = "ENDSWITH"
    case contains = "CONTAINS"
    case like = "LIKE"
    case matches = "MATCHES"
    case `in` = "IN"
    case between = "BETWEEN"
}

public enum Quantifier: String, Sendable, Hashable {
    case direct = ""
    case any = "ANY"
    case all = "ALL"
    case none = "NONE"
}

/// How to order results: a key path (through to-one relationships), a direction, and
/// optionally localized case-insensitive string order.
public struct SortKey: Sendable, Hashable {
    public var keyPath: [String]
    public var ascending: Bool
    public var localizedCaseInsensitive: Bool

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
