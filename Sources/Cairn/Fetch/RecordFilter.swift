import CairnCollections
import CairnStorage
import Foundation

/// A predicate compiled for a scan: it tests a stored record body in place, decoding only
/// the values the predicate reads, stepping over the others, and comparing numbers with
/// numbers directly. Built only when every comparison reads a value of the record itself
/// (an attribute or a to-one relationship, no hops, no `@count`, no ANY/ALL) against a
/// constant or a list; for any other predicate ``init(_:)`` answers nil and the scan
/// evaluates ``CompiledPredicate`` on the decoded record instead.
///
/// Gives the same answer as `CompiledPredicate.evaluate` on the decoded record (tests hold
/// the two together). The values it reads are checked against the schema as a full decode
/// would check them; the values it steps over are checked only for framing, and a record
/// that matches is decoded and checked whole by the caller.
///
/// One fetch builds one and uses it on its own thread: the buffers are its own.
final class RecordFilter {
    private enum Kind: UInt8 { case alwaysFalse, alwaysTrue, not, and, or, leaf }

    /// A node of the predicate tree, flattened: the children of `and`/`or` are the
    /// `count` nodes from `first`; `not` has one at `first`; a leaf's comparison is
    /// `leaves[first]`.
    private struct Node {
        var kind: Kind
        var first: Int32
        var count: Int32
    }

    /// A constant or a read value as a number, when comparing it can skip `ValueOrder`'s
    /// general path (see ``number(_:)``); `.none` otherwise.
    private enum Number { case none, integer(Int64), real(Double) }

    private struct Leaf {
        var position: Int           // where the value it reads is kept in `values`
        var op: ComparisonOperator
        var number: Number          // the constant, for the six comparisons of one number
        var right: [Value]          // the constant (one) or the list
        var options: ComparisonOptions
        var prepared: CompiledPredicate.Prepared?
    }

    private let entity: EntityDescription
    private let nodes: FixedArray<Node>
    private let leaves: FixedArray<Leaf>
    /// For each slot up to the highest read: its place in `numbers` and `values`, or -1 to
    /// step over it.
    private let positions: FixedArray<Int32>
    /// For each place: the kind bits its slot accepts (nil included).
    private let accepted: FixedArray<UInt32>
    /// The values read from the record under test: as a number when it is an int64 or a
    /// double (not NaN), else in `values`. Written only by the thread testing with this
    /// filter (each thread of a scan has its own).
    private let numbers: FixedArray<Number>
    private let values: FixedArray<Value>
    /// The entity's value count, which every record body must have.
    private let valueCount: Int
    /// Whether the predicate is one comparison or an AND of comparisons: tested in a loop.
    private let isConjunction: Bool

    /// The usual scan predicate, compiled further: one integer attribute or an AND of them,
    /// each compared with integer constants (`a >= 10 AND a < 20`, `b == 3`, `c BETWEEN {1, 9}`),
    /// which leaves each attribute read a closed interval of integers. For each place, in
    /// slot order: how many values to step over before it, the tag its integer is stored
    /// with, the range of that attribute's type, and the interval. Empty for any other
    /// predicate.
    private struct Interval {
        var skip: Int
        var tag: UInt8
        var typeLow: Int64, typeHigh: Int64
        var low: Int64, high: Int64  // the comparisons hold for low...high (for none if low > high)
    }
    private let intervals: FixedArray<Interval>

    /// Whether the filter tests records by intervals of integers (for tests).
    var readsIntervals: Bool { !intervals.isEmpty }

    convenience init?(_ predicate: CompiledPredicate) {
        let entity = predicate.entity
        var slots: [Int] = []
        guard Self.collectSlots(predicate.root, entity: entity, into: &slots), let highest = slots.max() else { return nil }
        let read = Array(Set(slots)).sorted()
        var positions = [Int32](repeating: -1, count: highest + 1)
        for (place, slot) in read.enumerated() { positions[slot] = Int32(place) }
        let accepted = read.map { slot -> UInt32 in
            let kinds = slot < entity.attributes.count
                ? entity.attributes[slot].type.acceptedKinds
                : UInt32(1) << UInt32(Value.Tag.reference.rawValue)  // a to-one relationship
            return kinds | Value.nullKindBit
        }
        var nodes: [Node] = [Node(kind: .alwaysTrue, first: 0, count: 0)]
        var leaves: [Leaf] = []
        Self.place(predicate.root, at: 0, nodes: &nodes, leaves: &leaves, positions: positions)

        let isConjunction = nodes.dropFirst().allSatisfy { $0.kind == .leaf } && (nodes[0].kind == .leaf || nodes[0].kind == .and)
        self.init(entity: entity, nodes: nodes, leaves: leaves, positions: positions, accepted: accepted,
                  isConjunction: isConjunction,
                  intervals: isConjunction ? Self.intervals(leaves, read: read, entity: entity) ?? [] : [])
    }

    /// A filter of the same predicate with scratch room of its own: one for each thread of
    /// a scan in parts.
    convenience init(copying other: RecordFilter) {
        self.init(entity: other.entity, nodes: other.nodes.array, leaves: other.leaves.array,
                  positions: other.positions.array, accepted: other.accepted.array,
                  isConjunction: other.isConjunction, intervals: other.intervals.array)
    }

    /// The program, with scratch room for the values it reads (one per place of `accepted`).
    private init(entity: EntityDescription, nodes: [Node], leaves: [Leaf], positions: [Int32], accepted: [UInt32],
                 isConjunction: Bool, intervals: [Interval]) {
        self.entity = entity
        self.nodes = FixedArray(nodes)
        self.leaves = FixedArray(leaves)
        self.positions = FixedArray(positions)
        self.accepted = FixedArray(accepted)
        numbers = FixedArray(repeating: .none, count: accepted.count)
        values = FixedArray(repeating: .null, count: accepted.count)
        valueCount = entity.valueCount
        self.isConjunction = isConjunction
        self.intervals = FixedArray(intervals)
    }

    /// The slots of the record the predicate reads; false if it reads anything else.
    private static func collectSlots(_ node: CompiledPredicate.Node, entity: EntityDescription, into slots: inout [Int]) -> Bool {
        switch node {
        case .constant: return true
        case .not(let inner): return collectSlots(inner, entity: entity, into: &slots)
        case .and(let parts), .or(let parts): return parts.allSatisfy { collectSlots($0, entity: entity, into: &slots) }
        case .compare(let lhs, _, let rhs, _, let quantifier, _):
            guard case .path(let path) = lhs, path.hops.isEmpty, path.countOf == nil, !path.isMany,
                  quantifier == .direct, let slot = path.last, slot < entity.valueCount else { return false }
            switch rhs {
            case .constant, .list: slots.append(slot); return true
            case .path: return false
            }
        }
    }

    /// Writes `node` at `index`; the children of `and`/`or` go in a run after the nodes so far.
    private static func place(_ node: CompiledPredicate.Node, at index: Int, nodes: inout [Node], leaves: inout [Leaf],
                              positions: [Int32]) {
        switch node {
        case .constant(let value):
            nodes[index] = Node(kind: value ? .alwaysTrue : .alwaysFalse, first: 0, count: 0)
        case .not(let inner):
            let child = nodes.count
            nodes.append(Node(kind: .alwaysTrue, first: 0, count: 0))
            nodes[index] = Node(kind: .not, first: Int32(child), count: 1)
            place(inner, at: child, nodes: &nodes, leaves: &leaves, positions: positions)
        case .and(let parts), .or(let parts):
            let first = nodes.count
            nodes.append(contentsOf: repeatElement(Node(kind: .alwaysTrue, first: 0, count: 0), count: parts.count))
            if case .and = node {
                nodes[index] = Node(kind: .and, first: Int32(first), count: Int32(parts.count))
            } else {
                nodes[index] = Node(kind: .or, first: Int32(first), count: Int32(parts.count))
            }
            for (offset, part) in parts.enumerated() {
                place(part, at: first + offset, nodes: &nodes, leaves: &leaves, positions: positions)
            }
        case .compare(let lhs, let op, let rhs, let options, _, let prepared):
            // `collectSlots` admitted only a path of the record against a constant or a list.
            guard case .path(let path) = lhs, let slot = path.last else { return }
            var right: [Value] = []
            var number = Number.none
            switch rhs {
            case .constant(let value):
                right = [value]
                if !op.needsList { number = Self.number(value) }
            case .list(let items): right = items
            case .path: return
            }
            nodes[index] = Node(kind: .leaf, first: Int32(leaves.count), count: 0)
            leaves.append(Leaf(position: Int(positions[slot]), op: op, number: number, right: right,
                               options: options, prepared: prepared))
        }
    }

    /// The intervals of a conjunction whose every read slot is an integer attribute and
    /// whose every comparison is with integer constants (see ``Interval``); nil otherwise.
    private static func intervals(_ leaves: [Leaf], read: [Int], entity: EntityDescription) -> [Interval]? {
        var result: [Interval] = []
        var previous = -1
        for slot in read {
            guard slot < entity.attributes.count else { return nil }
            let tag: Value.Tag, typeLow: Int64, typeHigh: Int64
            switch entity.attributes[slot].type {
            case .int16: (tag, typeLow, typeHigh) = (.int16, Int64(Int16.min), Int64(Int16.max))
            case .int32: (tag, typeLow, typeHigh) = (.int32, Int64(Int32.min), Int64(Int32.max))
            case .int64: (tag, typeLow, typeHigh) = (.int64, .min, .max)
            default: return nil
            }
            result.append(Interval(skip: slot - previous - 1, tag: tag.rawValue, typeLow: typeLow, typeHigh: typeHigh,
                                   low: .min, high: .max))
            previous = slot
        }
        for leaf in leaves {
            guard let (low, high) = bounds(leaf) else { return nil }
            result[leaf.position].low = max(result[leaf.position].low, low)
            result[leaf.position].high = min(result[leaf.position].high, high)
        }
        return result
    }

    /// The integers `x` for which the leaf holds, as `low...high` (none if low > high), when
    /// that is all it says: one of the six comparisons with an integer constant, or BETWEEN
    /// two; nil for anything else.
    private static func bounds(_ leaf: Leaf) -> (Int64, Int64)? {
        if case .integer(let c) = leaf.number {
            switch leaf.op {
            case .equal: return (c, c)
            case .less: return c == .min ? (1, 0) : (.min, c - 1)
            case .lessOrEqual: return (.min, c)
            case .greater: return c == .max ? (1, 0) : (c + 1, .max)
            case .greaterOrEqual: return (c, .max)
            default: return nil
            }
        }
        if leaf.op == .between, leaf.right.count == 2,
           case .integer(let low)? = ValueOrder.number(leaf.right[0]), case .integer(let high)? = ValueOrder.number(leaf.right[1]) {
            return (low, high)
        }
        return nil
    }

    /// The value as `ValueOrder` takes it for comparing, when that is an integer (booleans
    /// as 0 and 1) or a real that is not NaN; NaN and decimals take `ValueOrder`'s own path.
    @inline(__always) private static func number(_ value: Value) -> Number {
        switch ValueOrder.number(value) {
        case .integer(let v)?: return .integer(v)
        case .real(let v)? where !v.isNaN: return .real(v)
        default: return .none
        }
    }

    private static let int64Bit = UInt32(1) << UInt32(Value.Tag.int64.rawValue)
    private static let doubleBit = UInt32(1) << UInt32(Value.Tag.double.rawValue)

    /// Whether the stored `record` (of ID `id`) matches. Throws `.corrupt` if the values
    /// it reads do not decode or do not fit the schema.
    func matches(_ record: borrowing StoredRecord, id: RecordID) throws -> Bool {
        if !intervals.isEmpty, let answer = matchesIntervals(record) { return answer }
        return try matchesInGeneral(record, id: id)
    }

    /// ``matches(_:id:)`` by the ``Interval``s: nil, having decided nothing, unless the
    /// body's count is one byte and every value it reads is an integer of its attribute's
    /// tag and range, in a varint of at most 9 bytes — then the general path, which reads
    /// the same values, gives the same answer. Anything else (nil, a value to report as
    /// corrupt) is left to the general path.
    @inline(__always) private func matchesIntervals(_ record: borrowing StoredRecord) -> Bool? {
        guard record.shortValueCount == valueCount else { return nil }
        var at = 1
        var holds = true
        for place in 0..<intervals.count {
            for _ in 0..<intervals[place].skip {
                guard let next = record.end(ofValueAt: at) else { return nil }
                at = next
            }
            guard let (x, next) = record.integer(tagged: intervals[place].tag, at: at),
                  x >= intervals[place].typeLow, x <= intervals[place].typeHigh else { return nil }
            at = next
            // Every value it reads is read, as the general path reads them, before answering.
            holds = holds && x >= intervals[place].low && x <= intervals[place].high
        }
        return holds
    }

    private func matchesInGeneral(_ record: borrowing StoredRecord, id: RecordID) throws -> Bool {
        let fits = try record.reading { reader -> Bool in
            let count = try reader.valueCount(maximum: FormatLimits.maxValuesPerRecord)
            guard count == valueCount else { return false }
            for slot in 0..<positions.count {
                let place = Int(positions[slot])
                if place < 0 {
                    try reader.skipValue()
                    continue
                }
                if let x = reader.commonInt64() {
                    guard accepted[place] & Self.int64Bit != 0 else { return false }
                    numbers[place] = .integer(x)
                    continue
                }
                // An int64 (read above) or a double (not NaN) is kept as a number: no value is stored.
                let decoded = reader.commonValue()
                switch decoded {
                case .double(let x)? where !x.isNaN:
                    guard accepted[place] & Self.doubleBit != 0 else { return false }
                    numbers[place] = .real(x)
                    continue
                default: break
                }
                let value = try decoded ?? reader.value()
                guard value.kindBit & accepted[place] != 0 else { return false }
                numbers[place] = .none
                values[place] = value
            }
            return true
        }
        guard fits else { throw misfit(record, id) }
        if isConjunction {
            for leaf in 0..<leaves.count where !test(leaf) { return false }
            return true
        }
        return evaluate(0)
    }

    /// The error a full decode and check of the record gives.
    private func misfit(_ record: borrowing StoredRecord, _ id: RecordID) -> Error {
        do {
            _ = try Store.decodeRecord(record, id: id, entity: entity)
        } catch {
            return error
        }
        return CairnError.corrupt("stored record \(id) does not fit the schema")
    }

    private func evaluate(_ index: Int) -> Bool {
        let node = nodes[index]
        switch node.kind {
        case .alwaysFalse: return false
        case .alwaysTrue: return true
        case .not: return !evaluate(Int(node.first))
        case .and:
            for child in Int(node.first)..<Int(node.first + node.count) where !evaluate(child) { return false }
            return true
        case .or:
            for child in Int(node.first)..<Int(node.first + node.count) where evaluate(child) { return true }
            return false
        case .leaf: return test(Int(node.first))
        }
    }

    @inline(__always) private func test(_ index: Int) -> Bool {
        // An integer against an integer constant, the usual case, inline; the rest below.
        if case .integer(let c) = leaves[index].number, case .integer(let x) = numbers[leaves[index].position] {
            return Self.holds(leaves[index].op, less: x < c, greater: x > c)
        }
        return testInGeneral(index)
    }

    private func testInGeneral(_ index: Int) -> Bool {
        // Fields are read in place through the buffers: no leaf or value is copied whole.
        let place = leaves[index].position, op = leaves[index].op
        var number = numbers[place]
        if case .none = number { number = Self.number(values[place]) }
        switch (leaves[index].number, number) {
        case (.integer(let c), .integer(let x)): return Self.holds(op, less: x < c, greater: x > c)
        case (.integer(let c), .real(let x)): return Self.holds(op, less: x < Double(c), greater: x > Double(c))
        case (.real(let c), .integer(let i)):
            let x = Double(i)
            return Self.holds(op, less: x < c, greater: x > c)
        case (.real(let c), .real(let x)): return Self.holds(op, less: x < c, greater: x > c)
        default:
            // A value kept as a number compares as any value of that number would
            // (`ValueOrder` orders numbers by value, whatever their width).
            let value: Value
            switch numbers[place] {
            case .integer(let x): value = .int64(x)
            case .real(let x): value = .double(x)
            case .none: value = values[place]
            }
            return CompiledPredicate.compare(value, op, leaves[index].right, leaves[index].options, leaves[index].prepared)
        }
    }

    /// One of the six comparisons, given how two numbers (neither NaN) order.
    @inline(__always) private static func holds(_ op: ComparisonOperator, less: Bool, greater: Bool) -> Bool {
        switch op {
        case .equal: return !less && !greater
        case .notEqual: return less || greater
        case .less: return less
        case .lessOrEqual: return !greater
        case .greater: return greater
        case .greaterOrEqual: return !less
        default: return false  // not reached: `number` is .none for every other operator
        }
    }
}

@available(*, unavailable)
extension RecordFilter: Sendable {}
