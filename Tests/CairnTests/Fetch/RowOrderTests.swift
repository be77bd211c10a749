import Foundation
import Testing
@testable import Cairn

/// A fetch's sort (``RowOrder/sortedPositions(count:ids:values:resolve:first:)``) gives the
/// order that comparing rows two by two with ``RowOrder/precedes(_:_:_:_:)`` gives (the
/// order live results keep), and its first positions when asked for only those.
@Suite struct RowOrderTests {
    static let entity = EntityDescription(name: "Row", number: 1, attributes: [
        AttributeDescription(name: "n", type: .int64, isOptional: true),
        AttributeDescription(name: "small", type: .int16),
        AttributeDescription(name: "text", type: .string, isOptional: true),
        AttributeDescription(name: "real", type: .double),
    ])
    static let schema = Schema(entities: [entity])

    /// Random rows (integers with repeats and extremes, nils, strings, reals), in no ID
    /// order; sorted by one or two keys each way, whole and by their first few, on the
    /// radix path (one integer key), the heap (few wanted) and the comparison sort.
    @Test(arguments: [1, 2, 3, 7, 255, 256, 257, 1_000, 3_000])
    func theSortIsTheOrderOfComparingRows(count: Int) throws {
        var random = SplitMix64(seed: UInt64(count) &* 31 &+ 7)
        let extremes: [Int64] = [.min, .max, -1, 0, 1, .min + 1, .max - 1]
        for round in 0..<12 {
            let withNils = round % 3 == 0
            let rows: [[Value]] = (0..<count).map { _ in
                let r = random.next()
                let n: Value = withNils && r % 7 == 0 ? .null
                    : .int64(r % 5 == 0 ? extremes[Int(r >> 8) % extremes.count] : Int64(r >> 40 % 50) - 25)
                let text: Value = r % 9 == 0 ? .null : .string(["b", "a", "B", "é", "", "ab"][Int(r >> 12) % 6])
                return [n, .int16(Int16(truncatingIfNeeded: r >> 20) % 4), text, .double(Double(r >> 50 % 10) / 4)]
            }
            var ids = (0..<count).map { RecordID(entity: 1, serial: UInt64($0 + 1)) }
            ids.shuffle(using: &random)
            let sorts: [[Cairn.SortDescriptor]] = [
                [Cairn.SortDescriptor("n")], [Cairn.SortDescriptor("n", ascending: false)],
                [Cairn.SortDescriptor("small", ascending: false)], [Cairn.SortDescriptor("text")],
                [Cairn.SortDescriptor("text", ascending: false, localizedCaseInsensitive: true)],
                [Cairn.SortDescriptor("real"), Cairn.SortDescriptor("n", ascending: false)],
                [Cairn.SortDescriptor("small"), Cairn.SortDescriptor("text", ascending: false)],
            ]
            let descriptors = sorts[round % sorts.count]
            let order = try RowOrder(descriptors, entity: Self.entity, schema: Self.schema)
            let keys = rows.map { order.key($0, { _ in nil }) }
            let expected = (0..<count).sorted { order.precedes(keys[$0], ids[$0], keys[$1], ids[$1]) }
            for first in [nil, 0, 1, 5, count / 8, count - 1, count, count + 3] as [Int?] {
                let positions = order.sortedPositions(count: count, ids: ids, values: { rows[$0] }, resolve: { _ in nil }, first: first)
                let wanted = Array(expected.prefix(max(0, first ?? count)))
                #expect(positions == wanted, "count \(count), round \(round), \(descriptors.map(\.keyPath)), first \(String(describing: first))")
            }
        }
    }
}
