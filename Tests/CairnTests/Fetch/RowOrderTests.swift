import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A fetch's sort (``RowOrder/sortedPositions(count:ids:values:value:resolve:first:)``) gives the
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

    /// Random rows (integers with repeats and extremes, nils, strings, reals with NaN), in no ID
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
                // Reals: NaN, and values whose encoded bytes order them around it unlike their numbers.
                let reals: [Double] = [.nan, 1.0000000000000002, 2, -0.5, .infinity]
                let real = r % 4 == 0 ? reals[Int(r >> 30) % reals.count] : Double(r >> 50 % 10) / 4
                return [n, .int16(Int16(truncatingIfNeeded: r >> 20) % 4), text, .double(real)]
            }
            var ids = (0..<count).map { RecordID(entity: 1, serial: UInt64($0 + 1)) }
            ids.shuffle(using: &random)
            let sorts: [[SortKey]] = [
                [SortKey("n")], [SortKey("n", ascending: false)],
                [SortKey("small", ascending: false)], [SortKey("text")],
                [SortKey("text", ascending: false, localizedCaseInsensitive: true)],
                [SortKey("real"), SortKey("n", ascending: false)],
                [SortKey("small"), SortKey("text", ascending: false)],
            ]
            let descriptors = sorts[round % sorts.count]
            let order = try RowOrder(descriptors, entity: Self.entity, schema: Self.schema)
            let keys = rows.map { order.key($0, { _ in nil }) }
            let expected = (0..<count).sorted { order.precedes(keys[$0], ids[$0], keys[$1], ids[$1]) }
            for first in [nil, 0, 1, 5, count / 8, count - 1, count, count + 3] as [Int?] {
                let positions = order.sortedPositions(count: count, ids: ids, values: { rows[$0] }, value: { rows[$0][$1] },
                                                      resolve: { _ in nil }, first: first)
                let wanted = Array(expected.prefix(max(0, first ?? count)))
                #expect(positions == wanted, "count \(count), round \(round), \(descriptors.map(\.keyPath)), first \(String(describing: first))")
            }
        }
    }

    /// A NaN takes one place in a sort, after every number: the first rows of a sort by a
    /// real are the whole sort's first rows, whichever way they are found (the heap, the
    /// full sort). NaN had been ordered by its encoded bytes, which put it before
    /// 1.0000000000000002 and after 2.0: no order at all.
    @Test func aNaNTakesOnePlaceInTheOrder() throws {
        var random = SplitMix64(seed: 5)
        let reals: [Double] = [.nan, 1.0000000000000002, 2, -0.5, 0, .infinity, -.infinity]
        let count = 400
        let rows: [[Value]] = (0..<count).map { _ in [.int64(0), .int16(0), .null, .double(reals[Int(random.next() % 7)])] }
        let ids = (0..<count).map { RecordID(entity: 1, serial: UInt64($0 + 1)) }
        for ascending in [true, false] {
            let order = try RowOrder([SortKey("real", ascending: ascending)], entity: Self.entity, schema: Self.schema)
            let whole = order.sortedPositions(count: count, ids: ids, values: { rows[$0] }, value: { rows[$0][$1] }, resolve: { _ in nil })
            let keys = whole.map { rows[$0][3] }
            let numbers = keys.compactMap { value -> Double? in if case .double(let d) = value, !d.isNaN { return d } else { return nil } }
            #expect(numbers == (ascending ? numbers.sorted() : numbers.sorted(by: >)))
            let nanPositions = keys.indices.filter { if case .double(let d) = keys[$0] { return d.isNaN } else { return false } }
            #expect(nanPositions == Array(ascending ? (count - nanPositions.count)..<count : 0..<nanPositions.count))
            #expect(ValueOrder.nanOrder(.date(Date(timeIntervalSinceReferenceDate: .nan)), .date(Date())) == .orderedDescending, "a NaN date too")
            for first in [1, 3, 10, 49, 50] {
                let some = order.sortedPositions(count: count, ids: ids, values: { rows[$0] }, value: { rows[$0][$1] },
                                                      resolve: { _ in nil }, first: first)
                #expect(some == Array(whole.prefix(first)), "ascending \(ascending), first \(first)")
            }
        }
    }
}
