import Foundation
import Testing
import CairnTesting
@testable import CairnStorage

/// A record kept undecoded for a fetched object (`RecordArena`) reads, value by value
/// and whole, as the store's decode reads it; a record whose values all decode in place is
/// kept; and no damaged record the decode refuses is ever kept, so a read from a kept
/// record cannot meet a value that was not checked.
@Suite struct KeptRecordTests {
    @Test(arguments: Seeds.list())
    func aKeptRecordReadsAsItsDecode(seed: UInt64) throws {
        var generator = ValueGenerator(random: SplitMix64(seed: seed))
        var kept = 0
        for round in 0..<400 {
            var values = (0..<(1 + generator.int(14))).map { _ in generator.value() }
            // Half the records hold only values that decode in place, which are kept.
            if round % 2 == 0 { values = values.map { KeptRecordCheck.decodesInPlace($0) ? $0 : .int32(Int32(generator.int(1000))) } }
            guard let entity = KeptRecordCheck.entity(taking: values) else { continue }
            let body = ValueCoding.encode(values)
            #expect(KeptRecordCheck.mismatch(body, entity: entity) == nil, "\(values)")
            if values.allSatisfy(KeptRecordCheck.decodesInPlace) {
                let record = StoredRecord.lending(body) { RecordArena().keep($0, entity: entity) }
                #expect(record != nil, "\(values) not kept")
                kept += 1
            }
            // Damaged copies: a byte changed, the body cut short, a byte too many.
            for _ in 0..<12 {
                var damaged = body
                switch generator.int(3) {
                case 0: damaged[generator.int(damaged.count)] ^= UInt8(1 + generator.int(255))
                case 1: damaged.removeLast(1 + generator.int(damaged.count))
                default: damaged.insert(UInt8(generator.int(256)), at: generator.int(damaged.count + 1))
                }
                #expect(KeptRecordCheck.mismatch(damaged, entity: entity) == nil, "\(damaged)")
            }
        }
        #expect(kept >= 100)
    }

    /// A value of a type its attribute does not take, or a record of another length, is
    /// not kept: the decode then names the fault. (Nil fits any attribute in the store; a
    /// save is what requires a value.)
    @Test func aRecordThatDoesNotFitItsEntityIsNotKept() {
        let entity = EntityDescription(name: "Pair", number: 1, attributes: [AttributeDescription(name: "a", type: .int64),
                                                                             AttributeDescription(name: "b", type: .double)])
        for values: [Value] in [[.int64(1), .int64(2)], [.int64(1)], [.int64(1), .double(2), .null], [.bool(true), .double(1)],
                                [.string("1"), .double(1)]] {
            let record = StoredRecord.lending(ValueCoding.encode(values)) { RecordArena().keep($0, entity: entity) }
            #expect(record == nil, "\(values)")
            #expect(KeptRecordCheck.mismatch(ValueCoding.encode(values), entity: entity) == nil)
        }
        let fits = StoredRecord.lending(ValueCoding.encode([.int64(1), .double(2)])) { RecordArena().keep($0, entity: entity) }
        #expect(fits.map { [$0.values.value(at: 0), $0.values.value(at: 1)] } == [.int64(1), .double(2)])
    }

    /// Records kept one after another fill chunk after chunk; each chunk stays while a
    /// record in it is held, after the arena has moved on and after the arena is gone.
    @Test func recordsOutliveTheirChunkBeingFullAndTheArena() {
        let entity = EntityDescription(name: "Row", number: 1, attributes: (0..<10).map { AttributeDescription(name: "a\($0)", type: .int64) })
        var records: [KeptRecord] = []
        do {
            let arena = RecordArena()
            for i in 0..<5_000 {
                let values = (0..<10).map { Value.int64(Int64(i * 10 + $0) << ($0 * 5)) }
                guard let record = StoredRecord.lending(ValueCoding.encode(values), { arena.keep($0, entity: entity) }) else {
                    Issue.record("record \(i) not kept")
                    return
                }
                records.append(record)
            }
        }
        let chunks = Set(records.map { ObjectIdentifier($0.owner) })
        #expect(chunks.count > 5)
        for (i, record) in records.enumerated() {
            let expected = (0..<10).map { Value.int64(Int64(i * 10 + $0) << ($0 * 5)) }
            #expect(StoredRow.kept(record).values == expected)
            #expect(record.values.value(at: 9) == expected[9])
        }
    }
}

extension KeptRecordTests {
    /// A kept record copied into another arena (as a sorted fetch copies its rows in their
    /// new order) reads as the record it was copied from, value by value and whole, with
    /// the same answer about required kinds, after the first arena and its chunks are gone.
    @Test(arguments: Seeds.list())
    func aCopiedRecordReadsAsTheOriginal(seed: UInt64) throws {
        var generator = ValueGenerator(random: SplitMix64(seed: seed))
        var originals: [(values: [Value], fits: Bool)] = []
        var copies: [KeptRecord] = []
        let target = RecordArena()
        do {
            let source = RecordArena()
            var kept: [KeptRecord] = []
            for _ in 0..<1_500 {
                let values = (0..<(1 + generator.int(14))).map { _ in generator.value() }
                    .map { KeptRecordCheck.decodesInPlace($0) ? $0 : .int64(Int64(generator.int(1_000_000))) }
                guard let entity = KeptRecordCheck.entity(taking: values),
                      let record = StoredRecord.lending(ValueCoding.encode(values), { source.keep($0, entity: entity) })
                else { continue }
                kept.append(record)
                originals.append((values, record.values.fitsRequiredKinds))
            }
            // Copied in another order than kept, across the target's chunks.
            for index in kept.indices.reversed() {
                copies.append(try #require(target.copy(kept[index])))
            }
        }
        copies.reverse()
        #expect(originals.count > 1_000)
        #expect(Set(copies.map { ObjectIdentifier($0.owner) }).count > 1)
        for (copy, original) in zip(copies, originals) {
            // (Value by value as stored: a NaN is the same NaN, not equal to itself.)
            #expect(Value.sameValues(StoredRow.kept(copy).values, original.values), "\(original.values)")
            #expect(original.values.indices.allSatisfy { Value.same(copy.values.value(at: $0), original.values[$0]) })
            #expect(copy.values.fitsRequiredKinds == original.fits)
        }
        let off = RecordArena()
        off.keeps = false
        #expect(off.copy(copies[0]) == nil)
    }

    /// A put from a kept record whose written slots lie past the record's values (no object
    /// writes there; a caller of the package could) is encoded from the values whole, as
    /// any put the kept path does not take, not read past the entity's kinds.
    @Test func aKeptPutWrittenPastTheRecordIsEncodedWhole() throws {
        let values: [Value] = [.int64(1), .int64(2)]
        let entity = try #require(KeptRecordCheck.entity(taking: values))
        var preparer = Store.Preparer(schema: Schema(entities: [entity]))
        let id = RecordID(entity: entity.number, serial: 1)
        let whole: [Value] = [.int64(1), .int64(9)]
        let operation = try StoredRecord.lending(ValueCoding.encode(values)) { stored -> RecordOperation in
            let keptOrNil = RecordArena().keep(stored, entity: entity)
            let kept = try #require(keptOrNil)
            return try withExtendedLifetime(kept.owner) {
                try preparer.put(id, kept: kept.values, written: [.int64(9)], mask: 1 << 5) { whole }
            }
        }
        #expect(operation == .put(id, body: ValueCoding.encode(whole)))
    }
}
