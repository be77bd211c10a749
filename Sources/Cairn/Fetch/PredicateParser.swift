import CairnStorage
import Foundation

/// Parses NSPredicate format syntax into a ``FetchPredicate``.
///
/// ```
/// predicate  := or
/// or         := and (("OR" | "||") and)*
/// and        := not (("AND" | "&&") not)*
/// not        := ("NOT" | "!") not | "(" predicate ")" | TRUEPREDICATE | FALSEPREDICATE | comparison
/// comparison := [ANY | SOME | ALL | NONE] expression operator ["[" c|d|cd "]"] expression
/// operator   := == = != <> < <= =< > >= => BEGINSWITH ENDSWITH CONTAINS LIKE MATCHES IN BETWEEN
/// expression := keypath | string | number | TRUE | FALSE | YES | NO | nil | NULL | "{" list "}" | %@ | %K
/// ```
/// Keywords are case-insensitive. Errors are `.invalidArgument` naming the column.
struct PredicateParser {
    enum Token: Equatable {
        case identifier(String)
        case string(String)
        case integer(Int64)
        case double(Double)
        case symbol(String)
        case argument       // %@
        case keyArgument    // %K
        case end
    }

    let source: String
    var tokens: [(token: Token, column: Int)] = []
    var position = 0
    var arguments: [PredicateExpression]
    var argumentIndex = 0

    init(_ source: String, arguments: [PredicateExpression]) {
        self.source = source
        self.arguments = arguments
    }

    func error(_ message: String, at column: Int) -> CairnError {
        CairnError(.invalidArgument, "predicate \(String(reflecting: source)): \(message) at column \(column)")
    }

    // MARK: Tokens

    mutating func tokenize() throws {
        let characters = Array(source.unicodeScalars)
        var i = 0
        func column() -> Int { i + 1 }
        while i < characters.count {
            let c = characters[i]
            if CharacterSet.whitespacesAndNewlines.contains(c) { i += 1; continue }
            let start = column()
            if c == "'" || c == "\"" {
                var text = String.UnicodeScalarView()
                i += 1
                var closed = false
                while i < characters.count {
                    let d = characters[i]
                    if d == c { closed = true; i += 1; break }
                    if d == "\\" {
                        guard i + 1 < characters.count else { break }
                        let e = characters[i + 1]
                        switch e {
                        case "n": text.append("\n")
                        case "t": text.append("\t")
                        case "r": text.append("\r")
                        case "0": text.append("\0")
                        case "u":
                            guard i + 5 < characters.count,
                                  let code = UInt32(String(String.UnicodeScalarView(characters[(i + 2)...(i + 5)])), radix: 16),
                                  let scalar = Unicode.Scalar(code) else {
                                throw error("bad \\u escape in string", at: i + 1)
                            }
                            text.append(scalar)
                            i += 4
                        default: text.append(e)
                        }
                        i += 2
                        continue
                    }
                    text.append(d)
                    i += 1
                }
                guard closed else { throw error("unterminated string starting", at: start) }
                tokens.append((.string(String(text)), start))
                continue
            }
            if c.properties.numericType != nil && c.isASCII && ("0"..."9").contains(c)
                || (c == "." && i + 1 < characters.count && ("0"..."9").contains(characters[i + 1])) {
                var j = i
                var isDouble = false
                while j < characters.count, ("0"..."9").contains(characters[j]) { j += 1 }
                if j < characters.count, characters[j] == ".", j + 1 < characters.count, ("0"..."9").contains(characters[j + 1]) {
                    isDouble = true
                    j += 1
                    while j < characters.count, ("0"..."9").contains(characters[j]) { j += 1 }
                }
                if j < characters.count, characters[j] == "e" || characters[j] == "E" {
                    var k = j + 1
                    if k < characters.count, characters[k] == "+" || characters[k] == "-" { k += 1 }
                    if k < characters.count, ("0"..."9").contains(characters[k]) {
                        isDouble = true
                        j = k
                        while j < characters.count, ("0"..."9").contains(characters[j]) { j += 1 }
                    }
                }
                let text = String(String.UnicodeScalarView(characters[i..<j]))
                if !isDouble, let value = Int64(text) {
                    tokens.append((.integer(value), start))
                } else if let value = Double(text) {
                    tokens.append((.double(value), start))
                } else {
                    throw error("number \(text) is out of range", at: start)
                }
                i = j
                continue
            }
            if c == "_" || c == "@" || c == "$" || c.properties.isAlphabetic {
                var j = i + 1
                while j < characters.count,
                      characters[j] == "_" || characters[j].properties.isAlphabetic || ("0"..."9").contains(characters[j]) {
                    j += 1
                }
                tokens.append((.identifier(String(String.UnicodeScalarView(characters[i..<j]))), start))
                i = j
                continue
            }
            if c == "%" {
                guard i + 1 < characters.count else { throw error("expected @ or K after %", at: start) }
                switch characters[i + 1] {
                case "@": tokens.append((.argument, start))
                case "K": tokens.append((.keyArgument, start))
                default: throw error("unsupported format specifier %\(characters[i + 1]) (use %@ or %K)", at: start)
                }
                i += 2
                continue
            }
            let two = i + 1 < characters.count ? String(String.UnicodeScalarView([c, characters[i + 1]])) : ""
            if ["==", "!=", "<>", "<=", "=<", ">=", "=>", "&&", "||"].contains(two) {
                tokens.append((.symbol(two), start))
                i += 2
                continue
            }
            if "=<>!(){},.[]-".unicodeScalars.contains(c) {
                tokens.append((.symbol(String(c)), start))
                i += 1
                continue
            }
            throw error("unexpected character \(String(reflecting: String(c)))", at: start)
        }
        tokens.append((.end, characters.count + 1))
    }

    // MARK: Grammar

    var current: Token { tokens[position].token }
    var column: Int { tokens[position].column }

    func describe(_ token: Token) -> String {
        switch token {
        case .identifier(let name): return "'\(name)'"
        case .string(let text): return "string \(String(reflecting: text))"
        case .integer(let value): return "number \(value)"
        case .double(let value): return "number \(value)"
        case .symbol(let symbol): return "'\(symbol)'"
        case .argument: return "%@"
        case .keyArgument: return "%K"
        case .end: return "the end"
        }
    }

    func isKeyword(_ word: String) -> Bool {
        if case .identifier(let name) = current { return name.uppercased() == word }
        return false
    }

    mutating func parse() throws -> FetchPredicate {
        try tokenize()
        let result = try parseOr()
        guard current == .end else { throw error("expected AND, OR or the end, found \(describe(current))", at: column) }
        guard argumentIndex == arguments.count else {
            throw CairnError(.invalidArgument,
                             "predicate \(String(reflecting: source)) uses \(argumentIndex) arguments but \(arguments.count) were given")
        }
        return result
    }

    mutating func parseOr() throws -> FetchPredicate {
        var parts = [try parseAnd()]
        while isKeyword("OR") || current == .symbol("||") {
            position += 1
            parts.append(try parseAnd())
        }
        return parts.count == 1 ? parts[0] : .or(parts)
    }

    mutating func parseAnd() throws -> FetchPredicate {
        var parts = [try parseNot()]
        while isKeyword("AND") || current == .symbol("&&") {
            position += 1
            parts.append(try parseNot())
        }
        return parts.count == 1 ? parts[0] : .and(parts)
    }

    mutating func parseNot() throws -> FetchPredicate {
        if isKeyword("NOT") || current == .symbol("!") {
            position += 1
            return .not(try parseNot())
        }
        if current == .symbol("(") {
            position += 1
            let inner = try parseOr()
            guard current == .symbol(")") else { throw error("expected ')', found \(describe(current))", at: column) }
            position += 1
            return inner
        }
        if isKeyword("TRUEPREDICATE") { position += 1; return .constant(true) }
        if isKeyword("FALSEPREDICATE") { position += 1; return .constant(false) }
        return try parseComparison()
    }

    mutating func parseComparison() throws -> FetchPredicate {
        var quantifier = Quantifier.direct
        if isKeyword("ANY") || isKeyword("SOME") { quantifier = .any; position += 1 }
        else if isKeyword("ALL") { quantifier = .all; position += 1 }
        else if isKeyword("NONE") { quantifier = .none; position += 1 }
        let lhs = try parseExpression()
        let operatorColumn = column
        let op: ComparisonOperator
        switch current {
        case .symbol("=="), .symbol("="): op = .equal
        case .symbol("!="), .symbol("<>"): op = .notEqual
        case .symbol("<"): op = .less
        case .symbol("<="), .symbol("=<"): op = .lessOrEqual
        case .symbol(">"): op = .greater
        case .symbol(">="), .symbol("=>"): op = .greaterOrEqual
        case .identifier(let word):
            switch word.uppercased() {
            case "BEGINSWITH": op = .beginsWith
            case "ENDSWITH": op = .endsWith
            case "CONTAINS": op = .contains
            case "LIKE": op = .like
            case "MATCHES": op = .matches
            case "IN": op = .in
            case "BETWEEN": op = .between
            default: throw error("expected a comparison operator, found \(describe(current))", at: operatorColumn)
            }
        default:
            throw error("expected a comparison operator (==, !=, <, <=, >, >=, BEGINSWITH, ENDSWITH, CONTAINS, LIKE, MATCHES, IN, BETWEEN), found \(describe(current))",
                        at: operatorColumn)
        }
        position += 1
        var options: ComparisonOptions = []
        if current == .symbol("[") {
            position += 1
            guard case .identifier(let letters) = current else {
                throw error("expected c, d or cd inside [ ], found \(describe(current))", at: column)
            }
            for letter in letters.lowercased() {
                switch letter {
                case "c": options.insert(.caseInsensitive)
                case "d": options.insert(.diacriticInsensitive)
                case "n": break  // normalized: accepted, no effect
                default: throw error("unknown comparison option '\(letter)' (use c, d)", at: column)
                }
            }
            position += 1
            guard current == .symbol("]") else { throw error("expected ']', found \(describe(current))", at: column) }
            position += 1
        }
        let rhsColumn = column
        let rhs = try parseExpression()
        if op == .between {
            guard case .list(let bounds) = rhs, bounds.count == 2 else {
                throw error("BETWEEN needs a list of two values, {low, high}", at: rhsColumn)
            }
        }
        return .comparison(lhs, op, rhs, options, quantifier)
    }

    mutating func parseExpression() throws -> PredicateExpression {
        let start = column
        switch current {
        case .string(let text): position += 1; return .constant(.string(text))
        case .integer(let value): position += 1; return .constant(.int64(value))
        case .double(let value): position += 1; return .constant(.double(value))
        case .symbol("-"):
            position += 1
            switch current {
            case .integer(let value): position += 1; return .constant(.int64(-value))
            case .double(let value): position += 1; return .constant(.double(-value))
            default: throw error("expected a number after '-'", at: column)
            }
        case .argument:
            guard argumentIndex < arguments.count else {
                throw error("%@ needs argument \(argumentIndex + 1) but only \(arguments.count) were given", at: start)
            }
            defer { argumentIndex += 1; position += 1 }
            return arguments[argumentIndex]
        case .keyArgument:
            guard argumentIndex < arguments.count else {
                throw error("%K needs argument \(argumentIndex + 1) but only \(arguments.count) were given", at: start)
            }
            guard case .constant(.string(let key)) = arguments[argumentIndex], !key.isEmpty else {
                throw error("%K needs a key path string, got \(arguments[argumentIndex])", at: start)
            }
            argumentIndex += 1
            position += 1
            return .keyPath(key.split(separator: ".").map(String.init))
        case .symbol("{"):
            position += 1
            var items: [PredicateExpression] = []
            if current != .symbol("}") {
                items.append(try parseExpression())
                while current == .symbol(",") {
                    position += 1
                    items.append(try parseExpression())
                }
            }
            guard current == .symbol("}") else { throw error("expected ',' or '}', found \(describe(current))", at: column) }
            position += 1
            return .list(items)
        case .identifier(let name):
            switch name.uppercased() {
            case "NIL", "NULL": position += 1; return .constant(.null)
            case "TRUE", "YES": position += 1; return .constant(.bool(true))
            case "FALSE", "NO": position += 1; return .constant(.bool(false))
            case "AND", "OR", "NOT", "IN", "BETWEEN", "CONTAINS", "LIKE", "MATCHES", "BEGINSWITH", "ENDSWITH":
                throw error("expected a key path or a value, found keyword \(name.uppercased())", at: start)
            default: break
            }
            position += 1
            var parts = [name]
            while current == .symbol(".") {
                position += 1
                guard case .identifier(let next) = current else {
                    throw error("expected a key after '.', found \(describe(current))", at: column)
                }
                parts.append(next)
                position += 1
            }
            return .keyPath(parts)
        default:
            throw error("expected a key path or a value, found \(describe(current))", at: start)
        }
    }
}
