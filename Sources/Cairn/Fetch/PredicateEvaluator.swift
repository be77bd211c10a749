import CairnStorage
import Foundation

/// A predicate resolved against an entity: key names are slots, relationships know
/// their destinations. Evaluates against a record's values; related records are read
/// through a resolver, so no object need be materialised.
struct CompiledPredicate {
    indirect enum Node {
        case constant(Bool)
        case not(Node)
        case and([Node])
        case or([Node])
        case compare(Operand, ComparisonOperator, Operand, ComparisonOptions, Quantifier, Prepared?)
    }

    enum Operand {
        case path(ResolvedPath)
        case constant(Value)
        case list([Value])
    }

    /// A key path: relationship hops, then an attribute, a relationship, or `@count`.
    struct ResolvedPath: CustomStringConvertible {
        var hops: [Int]          // relationship slots to follow
        var last: Int?           // final slot (nil for @count)
        var countOf: Int?        // to-many slot whose @count is taken
        var isMany: Bool         // passes through a to-many relationship
        var text: String
        /// A to-many relationship followed by another key (`dvds.title`): a list of values
        /// per record, which a comparison must quantify.
        var throughToMany = false
        /// The type of the attribute the path ends at (nil for a relationship or @count).
        var attributeType: AttributeType?
        var description: String { text }
    }

    /// What a comparison prepares once rather than per record: a `MATCHES` pattern's
    /// regular expression, or an `IN` list's members in a hashed set.
    final class Prepared {
        let regex: NSRegularExpression?
        let members: MemberSet?
        init(regex: NSRegularExpression) { (self.regex, members) = (regex, nil) }
        init(members: MemberSet) { (regex, self.members) = (nil, members) }
    }

    /// The items of an `IN` list, for a test that does not compare with each: those of
    /// the kinds whose equality is that of a hashable key (integers and booleans by value,
    /// strings folded as the options say, references, UUIDs, nil) in a set; the others
    /// (reals, decimals, dates, …) in a list tested one by one. A value of a kind without
    /// a key is tested against every item. (Comparing every record with every item would
    /// make `uuid IN {k ids}` over N records k N comparisons.)
    struct MemberSet {
        let keys: Set<ValueKey>
        let others: [Value]
        let items: [Value]
        let options: ComparisonOptions

        /// Nil for a list short enough to search (a set then costs more than it saves).
        init?(_ items: [Value], options: ComparisonOptions) {
            guard items.count >= 8 else { return nil }
            var keys = Set<ValueKey>(), others: [Value] = []
            for item in items {
                if let key = ValueKey(item, options) { keys.insert(key) } else { others.append(item) }
            }
            (self.keys, self.others, self.items, self.options) = (keys, others, items, options)
        }

        /// Whether `value` equals an item (``ValueOrder/equal(_:_:_:)``).
        func contains(_ value: Value) -> Bool {
            guard let key = ValueKey(value, options) else { return items.contains { ValueOrder.equal(value, $0, options) } }
            return keys.contains(key) || others.contains { ValueOrder.equal(value, $0, options) }
        }
    }

    let root: Node
    let entity: EntityDescription
    /// Resolves a record ID to its values (in the context's view).
    typealias Resolver = (RecordID) -> [Value]?

    /// `root` as evaluated on a record's values (see ``Test``).
    private let test: Test

    init(_ predicate: FetchPredicate, entity: EntityDescription, schema: Schema) throws {
        self.entity = entity
        root = try Self.compile(predicate, entity: entity, schema: schema)
        test = Self.test(for: root, attributes: entity.attributes.count)
    }

    private static func compile(_ predicate: FetchPredicate, entity: EntityDescription, schema: Schema) throws -> Node {
        switch predicate {
        case .constant(let value): return .constant(value)
        case .not(let inner): return .not(try compile(inner, entity: entity, schema: schema))
        case .and(let parts): return .and(try parts.map { try compile($0, entity: entity, schema: schema) })
        case .or(let parts): return .or(try parts.map { try compile($0, entity: entity, schema: schema) })
        case .comparison(let lhs, let op, let rhs, let options, let quantifier):
            let left = try operand(lhs, entity: entity, schema: schema)
            let right = try operand(rhs, entity: entity, schema: schema)
            var prepared: Prepared?
            if op == .in, case .list(let items) = right, let members = MemberSet(items, options: options) {
                prepared = Prepared(members: members)
            }
            if op == .matches {
                guard case .constant(.string(let pattern)) = right else {
                    throw CairnError(.invalidArgument, "MATCHES needs a regular expression string on its right")
                }
                do {
                    let compiled = try NSRegularExpression(pattern: "^(?:" + pattern + ")$",
                                                           options: options.contains(.caseInsensitive) ? [.caseInsensitive] : [])
                    prepared = Prepared(regex: compiled)
                } catch {
                    throw CairnError(.invalidArgument, "MATCHES pattern \(String(reflecting: pattern)) is not a valid regular expression")
                }
            }
            if quantifier != .direct {
                guard case .path(let path) = left, path.isMany else {
                    throw CairnError(.invalidArgument, "\(quantifier.rawValue) needs a to-many key path on its left, not \(lhs)")
                }
            }
            // As Core Data does: a key path through a to-many relationship gives a list per
            // record, and `==` of a list would silently mean ANY.
            for side in [left, right] {
                if quantifier == .direct, case .path(let path) = side, path.throughToMany {
                    throw CairnError(.invalidArgument,
                                     "\(path.text) goes through a to-many relationship: say ANY, ALL or NONE before it, or compare its @count")
                }
            }
            try checkKinds(left, op, right)
            return .compare(left, op, right, options, quantifier, prepared)
        }
    }

    /// A string attribute compared with a number, or a number attribute with a string,
    /// matches nothing: it is a mistake, refused naming the key and both types.
    private static func checkKinds(_ left: Operand, _ op: ComparisonOperator, _ right: Operand) throws {
        func isNumber(_ type: AttributeType) -> Bool {
            [.int8, .int16, .int32, .int64, .float, .double, .decimal, .bool].contains(type)
        }
        func isNumber(_ value: Value) -> Bool {
            switch value {
            case .bool, .int8, .int16, .int32, .int64, .float, .double, .decimal: return true
            default: return false
            }
        }
        func check(_ path: ResolvedPath, _ values: [Value]) throws {
            guard let type = path.attributeType, type == .string || isNumber(type) else { return }
            for value in values {
                let clash = type == .string ? isNumber(value) : { if case .string = value { return true } else { return false } }()
                if clash {
                    throw CairnError(.invalidArgument,
                                     "\(path.text) is a \(type) attribute, compared with \(value) (\(type == .string ? "a number" : "a string")): it would match nothing")
                }
            }
        }
        switch (left, right) {
        case (.path(let path), .constant(let value)), (.constant(let value), .path(let path)): try check(path, [value])
        case (.path(let path), .list(let values)), (.list(let values), .path(let path)): try check(path, values)
        default: break
        }
    }

    private static func operand(_ expression: PredicateExpression, entity: EntityDescription, schema: Schema) throws -> Operand {
        switch expression {
        case .constant(let value): return .constant(value)
        case .list(let items):
            return .list(try items.map { item in
                guard case .constant(let value) = item else {
                    throw CairnError(.invalidArgument, "lists in predicates hold values only, not \(item)")
                }
                return value
            })
        case .keyPath(let parts):
            return .path(try resolve(parts, entity: entity, schema: schema))
        }
    }

    static func resolve(_ parts: [String], entity start: EntityDescription, schema: Schema) throws -> ResolvedPath {
        var entity = start                       // owns the next key
        var pendingDestination: EntityDescription?  // destination of `path.last` if it is a relationship
        var path = ResolvedPath(hops: [], last: nil, countOf: nil, isMany: false, text: parts.joined(separator: "."))
        for (index, key) in parts.enumerated() {
            let isLast = index == parts.count - 1
            if key == "@count" {
                guard isLast, let previous = path.last, previous >= entity.attributes.count,
                      entity.relationships[previous - entity.attributes.count].isToMany else {
                    throw CairnError(.invalidArgument, "@count must end a key path, after a to-many relationship (\(path.text))")
                }
                path.countOf = previous
                path.last = nil
                return path
            }
            if let last = path.last {
                guard let destination = pendingDestination else {
                    throw CairnError(.invalidArgument, "\(entity.name).\(parts[index - 1]) is an attribute; '\(key)' cannot follow it in \(path.text)")
                }
                if path.isMany { path.throughToMany = true }
                path.hops.append(last)
                path.last = nil
                entity = destination
            }
            if let slot = entity.attributes.firstIndex(where: { $0.name == key }) {
                path.last = slot
                path.attributeType = entity.attributes[slot].type
                pendingDestination = nil
            } else if let offset = entity.relationships.firstIndex(where: { $0.name == key }) {
                let relationship = entity.relationships[offset]
                path.last = entity.attributes.count + offset
                guard let destination = schema.entity(named: relationship.destination) else {
                    throw CairnError(.invalidArgument, "\(relationship.destination) is not in the schema")
                }
                pendingDestination = destination
                let counted = index + 1 < parts.count && parts[index + 1] == "@count"
                if relationship.isToMany && !counted { path.isMany = true }
            } else {
                throw CairnError(.invalidArgument, "\(entity.name) has no key '\(key)' (in \(path.text))")
            }
        }
        return path
    }

    // MARK: Evaluation

    func evaluate(_ values: [Value], resolve: Resolver) -> Bool {
        test.evaluate(values, resolve)
    }

    /// A node of the predicate as it is evaluated: an object whose method tests a record's
    /// values, its parts held as stored properties. (Switching over ``Node`` for every
    /// record would copy each comparison's payload out of the enum, retaining its key
    /// path's arrays and strings, and run an `and`'s parts through a closure.) Each
    /// subclass overrides ``evaluate(_:_:)``.
    class Test {
        func evaluate(_ values: [Value], _ resolve: Resolver) -> Bool { false }
    }

    private final class Constant: Test {
        let value: Bool
        init(_ value: Bool) { self.value = value }
        override func evaluate(_ values: [Value], _ resolve: Resolver) -> Bool { value }
    }

    private final class Not: Test {
        let inner: Test
        init(_ inner: Test) { self.inner = inner }
        override func evaluate(_ values: [Value], _ resolve: Resolver) -> Bool { !inner.evaluate(values, resolve) }
    }

    /// An `and` or `or` of two parts; more parts make a chain (`a AND (b AND c)`). The
    /// parts are stored properties, called in place: a loop over an array of parts would
    /// retain and release each part per record.
    private final class Both: Test {
        let first: Test, second: Test
        init(_ first: Test, _ second: Test) { (self.first, self.second) = (first, second) }
        override func evaluate(_ values: [Value], _ resolve: Resolver) -> Bool {
            first.evaluate(values, resolve) && second.evaluate(values, resolve)
        }
    }

    private final class Either: Test {
        let first: Test, second: Test
        init(_ first: Test, _ second: Test) { (self.first, self.second) = (first, second) }
        override func evaluate(_ values: [Value], _ resolve: Resolver) -> Bool {
            first.evaluate(values, resolve) || second.evaluate(values, resolve)
        }
    }

    /// `parts` joined in order by `join` (an empty `and` holds, an empty `or` does not).
    private static func chain(_ parts: [Test], empty: Bool, _ join: (Test, Test) -> Test) -> Test {
        guard var result = parts.last else { return Constant(empty) }
        for part in parts.dropLast().reversed() { result = join(part, result) }
        return result
    }

    /// The common case: an attribute of the record itself (not a relationship, so never a
    /// list of references) against a constant, by an operator that takes one value.
    private final class AttributeTest: Test {
        let slot: Int
        let op: ComparisonOperator
        let constant: Value
        let options: ComparisonOptions
        /// The constant, when it is an integer: an integer attribute is compared with it
        /// directly (as ``ValueOrder`` compares two integers of any widths, by value),
        /// not through the general comparison of any two values.
        let integer: Int64?
        init(slot: Int, op: ComparisonOperator, constant: Value, options: ComparisonOptions) {
            (self.slot, self.op, self.constant, self.options) = (slot, op, constant, options)
            integer = constant.integer
        }

        override func evaluate(_ values: [Value], _ resolve: Resolver) -> Bool {
            guard slot < values.count else { return CompiledPredicate.compare(.null, op, constant, options, nil) }
            // (The value is matched where it lies in the array, not copied out first.)
            let value: Int64
            switch values[slot] {
            case .int64(let v): value = v
            case .int32(let v): value = Int64(v)
            case .int16(let v): value = Int64(v)
            case .int8(let v): value = Int64(v)
            default: return CompiledPredicate.compare(values[slot], op, constant, options, nil)
            }
            if let integer {
                switch op {
                case .equal: return value == integer
                case .notEqual: return value != integer
                case .less: return value < integer
                case .lessOrEqual: return value <= integer
                case .greater: return value > integer
                case .greaterOrEqual: return value >= integer
                default: break
                }
            }
            return CompiledPredicate.compare(values[slot], op, constant, options, nil)
        }
    }

    /// Any other comparison: key paths followed, lists, quantifiers.
    private final class Comparison: Test {
        let lhs: Operand, op: ComparisonOperator, rhs: Operand
        let options: ComparisonOptions, quantifier: Quantifier, prepared: Prepared?
        init(_ lhs: Operand, _ op: ComparisonOperator, _ rhs: Operand, _ options: ComparisonOptions,
             _ quantifier: Quantifier, _ prepared: Prepared?) {
            (self.lhs, self.op, self.rhs, self.options, self.quantifier, self.prepared) = (lhs, op, rhs, options, quantifier, prepared)
        }

        override func evaluate(_ values: [Value], _ resolve: Resolver) -> Bool {
            // An attribute of the record against a constant (a relationship's slot read
            // directly, unless it holds a list) without building operand lists.
            if case .path(let path) = lhs, path.hops.isEmpty, path.countOf == nil, !path.isMany, quantifier == .direct,
               let slot = path.last, case .constant(let constant) = rhs, !op.needsList {
                let left = slot < values.count ? values[slot] : .null
                if case .references = left {} else { return CompiledPredicate.compare(left, op, constant, options, prepared) }
            }
            let right = Self.operandValues(rhs, values, resolve)
            if case .path(let path) = lhs, path.isMany || quantifier != .direct {
                let candidates = Self.operandValues(lhs, values, resolve)
                switch quantifier {
                case .all: return candidates.allSatisfy { CompiledPredicate.compare($0, op, right, options, prepared) }
                case .none: return !candidates.contains { CompiledPredicate.compare($0, op, right, options, prepared) }
                case .any, .direct:
                    if op == .contains, case .constant = rhs, !Self.isString(candidates) {
                        return candidates.contains { ValueOrder.equal($0, right.first ?? .null, options) }
                    }
                    return candidates.contains { CompiledPredicate.compare($0, op, right, options, prepared) }
                }
            }
            let left = Self.operandValues(lhs, values, resolve).first ?? .null
            return CompiledPredicate.compare(left, op, right, options, prepared)
        }

        private static func isString(_ values: [Value]) -> Bool {
            if case .string = values.first { return true }
            return false
        }

        /// The values an operand stands for: one for a constant or a to-one path; one per
        /// related record for a path through a to-many relationship; a list's items.
        private static func operandValues(_ operand: Operand, _ values: [Value], _ resolve: Resolver) -> [Value] {
            switch operand {
            case .constant(let value): return [value]
            case .list(let items): return items
            case .path(let path): return CompiledPredicate.follow(path, values, resolve)
            }
        }
    }

    /// The evaluated form of `node`, for an entity of `attributes` attributes.
    private static func test(for node: Node, attributes: Int) -> Test {
        switch node {
        case .constant(let value): return Constant(value)
        case .not(let inner): return Not(test(for: inner, attributes: attributes))
        case .and(let parts): return chain(parts.map { test(for: $0, attributes: attributes) }, empty: true, Both.init)
        case .or(let parts): return chain(parts.map { test(for: $0, attributes: attributes) }, empty: false, Either.init)
        case .compare(let lhs, let op, let rhs, let options, let quantifier, let prepared):
            if case .path(let path) = lhs, path.hops.isEmpty, path.countOf == nil, !path.isMany, quantifier == .direct,
               let slot = path.last, slot < attributes, case .constant(let constant) = rhs, !op.needsList {
                return AttributeTest(slot: slot, op: op, constant: constant, options: options)
            }
            return Comparison(lhs, op, rhs, options, quantifier, prepared)
        }
    }

    static func follow(_ path: ResolvedPath, _ values: [Value], _ resolve: Resolver) -> [Value] {
        var frontier = [values]
        for hop in path.hops {
            var next: [[Value]] = []
            for record in frontier where hop < record.count {
                for raw in references(record[hop]) {
                    if let related = resolve(RecordID(rawValue: raw)) { next.append(related) }
                }
            }
            frontier = next
        }
        if let counted = path.countOf {
            return frontier.map { record in
                counted < record.count ? .int64(Int64(references(record[counted]).count)) : .int64(0)
            }
        }
        guard let last = path.last else { return [] }
        var result: [Value] = []
        for record in frontier where last < record.count {
            if case .references(let raws) = record[last] {
                result.append(contentsOf: raws.map { .reference($0) })
            } else {
                result.append(record[last])
            }
        }
        if result.isEmpty && !path.isMany { return [.null] }
        return result
    }

    static func references(_ value: Value) -> [UInt64] { value.referencedIDs }

    // MARK: Comparing values

    /// Comparison against one value, for the operators that take one (see `needsList`).
    static func compare(_ left: Value, _ op: ComparisonOperator, _ rhs: Value, _ options: ComparisonOptions,
                        _ prepared: Prepared?) -> Bool {
        switch op {
        case .equal: return ValueOrder.equal(left, rhs, options)
        case .notEqual: return !ValueOrder.equal(left, rhs, options)
        case .less: return ValueOrder.order(left, rhs, options) == .orderedAscending
        case .lessOrEqual:
            let order = ValueOrder.order(left, rhs, options)
            return order == .orderedAscending || order == .orderedSame
        case .greater: return ValueOrder.order(left, rhs, options) == .orderedDescending
        case .greaterOrEqual:
            let order = ValueOrder.order(left, rhs, options)
            return order == .orderedDescending || order == .orderedSame
        default: return compare(left, op, [rhs], options, prepared)
        }
    }

    static func compare(_ left: Value, _ op: ComparisonOperator, _ right: [Value], _ options: ComparisonOptions,
                        _ prepared: Prepared?) -> Bool {
        let rhs = right.first ?? .null
        switch op {
        case .equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual:
            return compare(left, op, rhs, options, prepared)
        case .beginsWith, .endsWith, .contains, .like:
            guard case .string(let a) = left, case .string(let b) = rhs else { return false }
            let x = ValueOrder.fold(a, options), y = ValueOrder.fold(b, options)
            switch op {
            case .beginsWith: return x.hasPrefix(y)
            case .endsWith: return x.hasSuffix(y)
            case .contains: return y.isEmpty || x.contains(y)
            default: return like(Array(x.unicodeScalars), Array(y.unicodeScalars))
            }
        case .matches:
            guard case .string(let a) = left, let regex = prepared?.regex else { return false }
            return regex.firstMatch(in: a, range: NSRange(a.startIndex..., in: a)) != nil
        case .in:
            if right.count == 1, case .string(let haystack) = rhs, case .string(let needle) = left {
                return ValueOrder.fold(haystack, options).contains(ValueOrder.fold(needle, options))
            }
            if let members = prepared?.members { return members.contains(left) }
            return right.contains { ValueOrder.equal(left, $0, options) }
        case .between:
            guard right.count == 2 else { return false }
            let low = ValueOrder.order(left, right[0], options), high = ValueOrder.order(left, right[1], options)
            return (low == .orderedDescending || low == .orderedSame) && (high == .orderedAscending || high == .orderedSame)
        }
    }

    /// `*` matches any run of characters, `?` exactly one.
    static func like(_ text: [Unicode.Scalar], _ pattern: [Unicode.Scalar]) -> Bool {
        var t = 0, p = 0, star = -1, mark = 0
        while t < text.count {
            if p < pattern.count && (pattern[p] == "?" || (pattern[p] != "*" && pattern[p] == text[t])) {
                t += 1; p += 1
            } else if p < pattern.count && pattern[p] == "*" {
                star = p; mark = t; p += 1
            } else if star >= 0 {
                p = star + 1; mark += 1; t = mark
            } else {
                return false
            }
        }
        while p < pattern.count && pattern[p] == "*" { p += 1 }
        return p == pattern.count
    }

}

extension ComparisonOperator {
    /// Whether the operator compares against more than one value (or does text matching),
    /// so it takes the general path of the evaluator.
    var needsList: Bool {
        switch self {
        case .equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual: return false
        default: return true
        }
    }
}
