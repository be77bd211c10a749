import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Every kind a scan's filter compares in place, and some it leaves to `ValueOrder`.
final class Sample: ManagedObject {
    @Attribute var small: Int16 = 0
    @Attribute var medium: Int32 = 0
    @Attribute var big: Int64 = 0
    @Attribute var real: Double = 0
    @Attribute var single: Float = 0
    @Attribute var flag: Bool = false
    @Attribute var text: String? = nil
    @Attribute var amount: Decimal? = nil
    @Attribute var when: Date? = nil
}

/// Values of every kind before the one a filter reads.
final class FilterLedger: ManagedObject {
    @Attribute var note: String? = nil
    @Attribute var blob: Data = Data()
    @Attribute var day: Date = Date(timeIntervalSinceReferenceDate: 0)
    @Attribute var ratio: Float = 0
    @Attribute var big: Int64 = 0
    @Attribute var real: Double = 0
    @Attribute var count: Int32 = 0
}

@Suite struct RecordFilterTests {
    let schema: Schema
    let sample: EntityDescription
    let item: EntityDescription

    init() throws {
        schema = try Model(Sample.self, Item.self, Group.self).schema
        sample = try #require(schema.entity(named: "Sample"))
        item = try #require(schema.entity(named: "Item"))
    }

    static func randomValue(for type: AttributeType, _ random: inout SplitMix64) -> Value {
        if random.next() % 8 == 0 { return .null }
        let pick = Int64(random.next() % 21) - 10
        switch type {
        case .int16: return .int16(Int16(pick))
        case .int32: return .int32(Int32(pick))
        case .int64: return random.next() % 16 == 0 ? .int64(random.next() % 2 == 0 ? .max : .min) : .int64(pick)
        case .double: return random.next() % 10 == 0 ? .double(.nan) : .double(Double(pick) / 2)
        case .float: return random.next() % 10 == 0 ? .float(.nan) : .float(Float(pick) / 4)
        case .bool: return .bool(pick > 0)
        case .string: return .string(["", "a", "B", "ab", "é", "zz"][Int(random.next() % 6)])
        case .decimal: return .decimal(Decimal(pick) / 4)
        case .date: return .date(Date(timeIntervalSinceReferenceDate: Double(pick)))
        default: return .null
        }
    }

    static func randomConstant(_ random: inout SplitMix64) -> Value {
        let pick = Int64(random.next() % 25) - 12
        switch random.next() % 10 {
        case 0: return .int32(Int32(pick))
        case 1: return .int16(Int16(pick))
        case 2: return .double(Double(pick) / 2)
        case 3: return .float(Float(pick) / 4)
        case 4: return .double(.nan)
        case 5: return .decimal(Decimal(pick) / 4)
        case 6: return .bool(pick > 0)
        case 7: return .null
        case 8: return .int64(random.next() % 2 == 0 ? .max : .min)
        default: return .int64(pick)
        }
    }

    /// A random predicate over Sample's attributes: comparisons of every kind of constant
    /// with every numeric attribute, lists, text operators, combined with AND, OR and NOT.
    static func randomPredicate(_ random: inout SplitMix64, depth: Int = 0) -> (String, [Value]) {
        if depth < 2 && random.next() % 3 == 0 {
            let (a, x) = randomPredicate(&random, depth: depth + 1), (b, y) = randomPredicate(&random, depth: depth + 1)
            switch random.next() % 3 {
            case 0: return ("(\(a)) AND (\(b))", x + y)
            case 1: return ("(\(a)) OR (\(b))", x + y)
            default: return ("NOT (\(a))", x)
            }
        }
        let numeric = ["small", "medium", "big", "real", "single", "flag", "amount"]
        switch random.next() % 8 {
        case 0: return ("text \(["==", "<", "BEGINSWITH[c]", "CONTAINS", "LIKE"][Int(random.next() % 5)]) %@",
                        [.string(["a", "", "Z*", "é"][Int(random.next() % 4)])])
        case 1: return ("\(numeric[Int(random.next() % 7)]) BETWEEN {%@, %@}", [randomConstant(&random), randomConstant(&random)])
        case 2: return ("\(numeric[Int(random.next() % 7)]) IN {%@, %@}", [randomConstant(&random), randomConstant(&random)])
        case 3: return ("when \(["<", "==", ">="][Int(random.next() % 3)]) %@", [.date(Date(timeIntervalSinceReferenceDate: 0))])
        default:
            let op = ["==", "!=", "<", "<=", ">", ">="][Int(random.next() % 6)]
            return ("\(numeric[Int(random.next() % 7)]) \(op) %@", [randomConstant(&random)])
        }
    }

    @Test(arguments: Seeds.list([21, 22, 23]))
    func filterAnswersAsTheEvaluator(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let records = (0..<200).map { _ in sample.attributes.map { Self.randomValue(for: $0.type, &random) } }
        let bodies = records.map { ValueCoding.encode($0) }
        var built = 0
        for _ in 0..<300 {
            let (format, arguments) = Self.randomPredicate(&random)
            let compiled = try CompiledPredicate(try FetchPredicate(format: format, arguments: arguments), entity: sample, schema: schema)
            let filter = try #require(RecordFilter(compiled), "\(format)")
            built += 1
            for (index, values) in records.enumerated() {
                let expected = compiled.evaluate(values) { _ in nil }
                let actual = try StoredRecord.lending(bodies[index]) { try filter.matches($0, id: RecordID(entity: sample.number, serial: 1)) }
                #expect(actual == expected, "seed \(seed): \(format) \(arguments) on \(values)")
                if actual != expected { return }
            }
        }
        #expect(built == 300)
    }

    /// Integer constants near the edges of each integer type and of the random values.
    static func integerConstant(_ random: inout SplitMix64) -> Value {
        let edges: [Int64] = [.min, .min + 1, Int64(Int32.min), Int64(Int16.min) - 1, Int64(Int16.min), -11, -10, -1, 0, 1,
                              9, 10, 11, Int64(Int16.max), Int64(Int16.max) + 1, Int64(Int32.max), .max - 1, .max]
        let pick = random.next() % 2 == 0 ? edges[Int(random.next() % UInt64(edges.count))] : Int64(random.next() % 25) - 12
        switch random.next() % 4 {
        case 0 where Int16(exactly: pick) != nil: return .int16(Int16(pick))
        case 1 where Int32(exactly: pick) != nil: return .int32(Int32(pick))
        case 2 where pick == 0 || pick == 1: return .bool(pick == 1)
        default: return .int64(pick)
        }
    }

    /// ANDs of one to three comparisons of the integer attributes with integer constants
    /// (BETWEEN included) compile to intervals, and answer as the evaluator does: on
    /// records with nils, extremes and values of every other kind around them.
    @Test(arguments: Seeds.list([31, 32, 33]))
    func integerConjunctionsAreTestedByIntervals(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        var records = (0..<300).map { _ in sample.attributes.map { Self.randomValue(for: $0.type, &random) } }
        for index in records.indices where index % 3 == 0 {
            // Extremes of each type, where the random values are small.
            records[index][0] = .int16([Int16.min, Int16.max, -1][index % 3])
            records[index][1] = .int32([Int32.min, Int32.max, 0][index % 3])
        }
        let bodies = records.map { ValueCoding.encode($0) }
        let integers = ["small", "medium", "big"]
        for _ in 0..<300 {
            var parts: [String] = [], arguments: [Value] = []
            for _ in 0..<(1 + Int(random.next() % 3)) {
                let attribute = integers[Int(random.next() % 3)]
                if random.next() % 5 == 0 {
                    parts.append("\(attribute) BETWEEN {%@, %@}")
                    arguments += [Self.integerConstant(&random), Self.integerConstant(&random)]
                } else {
                    parts.append("\(attribute) \(["==", "<", "<=", ">", ">="][Int(random.next() % 5)]) %@")
                    arguments.append(Self.integerConstant(&random))
                }
            }
            let format = parts.joined(separator: " AND ")
            let compiled = try CompiledPredicate(try FetchPredicate(format: format, arguments: arguments), entity: sample, schema: schema)
            let filter = try #require(RecordFilter(compiled), "\(format)")
            #expect(filter.readsIntervals, "\(format) \(arguments)")
            for (index, values) in records.enumerated() {
                let expected = compiled.evaluate(values) { _ in nil }
                let actual = try StoredRecord.lending(bodies[index]) { try filter.matches($0, id: RecordID(entity: sample.number, serial: 1)) }
                #expect(actual == expected, "seed \(seed): \(format) \(arguments) on \(values)")
                if actual != expected { return }
            }
        }
    }

    @Test func otherPredicatesAreNotTestedByIntervals() throws {
        func filter(_ format: String, _ arguments: Value...) throws -> RecordFilter {
            try #require(RecordFilter(try CompiledPredicate(try FetchPredicate(format: format, arguments: arguments),
                                                            entity: sample, schema: schema)))
        }
        #expect(try filter("big >= 3 AND small < %@", .int32(9)).readsIntervals)
        #expect(try !filter("big != 3").readsIntervals)
        #expect(try !filter("big > 1 OR small < 2").readsIntervals)
        #expect(try !filter("NOT (big > 1)").readsIntervals)
        #expect(try !filter("big > 1.5").readsIntervals)
        #expect(try !filter("real > 1").readsIntervals)
        #expect(try !filter("big > 1 AND flag == true").readsIntervals)
        #expect(try !filter("big IN {1, 2}").readsIntervals)
        #expect(try !filter("big == nil").readsIntervals)
    }

    /// A value the intervals cannot read (an int16 out of its range, a varint too long, a
    /// count of two bytes) is left to the general path, which reports or reads it.
    @Test func whatTheIntervalsCannotReadTakesTheGeneralPath() throws {
        let compiled = try CompiledPredicate(try FetchPredicate(format: "small > 3 AND big < 10"), entity: sample, schema: schema)
        let filter = try #require(RecordFilter(compiled))
        #expect(filter.readsIntervals)
        let id = RecordID(entity: sample.number, serial: 1)
        var values: [Value] = [.int16(5), .int32(0), .int64(5), .double(0), .float(0), .bool(false), .null, .null, .null]
        let body = ValueCoding.encode(values)
        #expect(try StoredRecord.lending(body) { try filter.matches($0, id: id) })
        // small's varint says 40000: out of an int16's range, corrupt as a full decode says.
        var wide = body
        #expect(wide[1] == Value.Tag.int16.rawValue)
        wide.replaceSubrange(2..<3, with: [0x80, 0xF1, 0x04])  // zigzag 80000
        #expect(throws: CairnError.self) { try StoredRecord.lending(wide) { try filter.matches($0, id: id) } }
        // big as a ten-byte varint (Int64.min, Int64.max) is read by the general path.
        values[2] = .int64(.min)
        #expect(try StoredRecord.lending(ValueCoding.encode(values)) { try filter.matches($0, id: id) })
        values[2] = .int64(.max)
        #expect(try !StoredRecord.lending(ValueCoding.encode(values)) { try filter.matches($0, id: id) })
        // A count of two bytes: a record of more than 127 values is not Sample's; the
        // general path says so.
        #expect(throws: CairnError.self) { try StoredRecord.lending(ValueCoding.encode(Array(repeating: .int16(5), count: 130))) { try filter.matches($0, id: id) } }
    }

    /// Values of every kind before the ones read are stepped over, common ones (nil, int64,
    /// double) in place, the others (text, data, dates, floats) as ``ByteReader/skipValue()`` does.
    @Test func valuesOfEveryKindBeforeTheReadOnesAreSteppedOver() throws {
        let schema = try Model(FilterLedger.self).schema
        let ledger = try #require(schema.entity(named: "FilterLedger"))
        let compiled = try CompiledPredicate(try FetchPredicate(format: "count >= 3 AND count <= 4"), entity: ledger, schema: schema)
        let filter = try #require(RecordFilter(compiled))
        #expect(filter.readsIntervals)
        let id = RecordID(entity: ledger.number, serial: 1)
        for count in Int32(0)...6 {
            for note: Value in [.null, .string(""), .string(String(repeating: "n", count: 300))] {
                let values: [Value] = [note, .bytes(Data([1, 2, 3])), .date(Date(timeIntervalSinceReferenceDate: 5)), .float(1.5),
                                       .int64(.max), .double(2), .int32(count)]
                let matched = try StoredRecord.lending(ValueCoding.encode(values)) { try filter.matches($0, id: id) }
                #expect(matched == (count == 3 || count == 4), "count \(count), note \(note)")
            }
        }
    }

    @Test func relationshipsOfTheRecordItselfAreFilteredOthersAreNot() throws {
        func filter(_ format: String, _ arguments: Value...) throws -> RecordFilter? {
            RecordFilter(try CompiledPredicate(try FetchPredicate(format: format, arguments: arguments), entity: item, schema: schema))
        }
        let groupID = RecordID(entity: try #require(schema.entity(named: "Group")).number, serial: 7)
        let withGroup = try filter("group == %@", .reference(groupID.rawValue))
        let noGroup = try filter("group == nil")
        #expect(withGroup != nil && noGroup != nil)
        #expect(try filter("group.title == 'red'") == nil)
        #expect(try filter("TRUEPREDICATE") == nil)  // reads nothing: nothing to gain

        // Item: rank, rankPlain, label, labelPlain, score, flag, when, then the group.
        let values: [Value] = [.int64(1), .int64(1), .null, .null, .double(0), .bool(false), .null, .reference(groupID.rawValue)]
        let body = ValueCoding.encode(values)
        let id = RecordID(entity: item.number, serial: 1)
        let answers = try StoredRecord.lending(body) { body in
            (try withGroup?.matches(body, id: id), try noGroup?.matches(body, id: id))
        }
        #expect(answers.0 == true && answers.1 == false)
    }

    @Test func valuesItReadsAreCheckedAgainstTheSchema() throws {
        let compiled = try CompiledPredicate(try FetchPredicate(format: "big > 3"), entity: sample, schema: schema)
        let filter = try #require(RecordFilter(compiled))
        let id = RecordID(entity: sample.number, serial: 1)
        func matches(_ values: [Value]) throws -> Bool {
            try StoredRecord.lending(ValueCoding.encode(values)) { try filter.matches($0, id: id) }
        }
        var values: [Value] = [.int16(0), .int32(0), .int64(5), .double(0), .float(0), .bool(false), .null, .null, .null]
        #expect(try matches(values))
        // A value it steps over is not decoded: a wrong kind there is found when a match is decoded whole.
        values[0] = .string("not an int16")
        #expect(try matches(values))
        // The value it reads is of the wrong kind: corrupt, as a full decode would say.
        values[0] = .int16(0)
        values[2] = .string("5")
        #expect(throws: CairnError.self) { try matches(values) }
        do { _ = try matches(values) } catch let error as CairnError { #expect(error.code == .corrupt) }
        // Too few values.
        #expect(throws: CairnError.self) { try matches(Array(values.prefix(3))) }
        // A body cut short where the filter reads.
        let cut = Array(ValueCoding.encode([.int16(0), .int32(0), .int64(5_000_000)]).dropLast())
        #expect(throws: CairnError.self) { try StoredRecord.lending(cut) { try filter.matches($0, id: id) } }
    }
}
