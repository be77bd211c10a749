import Foundation
import Testing
@testable import Cairn

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
                let actual = try bodies[index].withUnsafeBytes { try filter.matches($0, id: RecordID(entity: sample.number, serial: 1)) }
                #expect(actual == expected, "seed \(seed): \(format) \(arguments) on \(values)")
                if actual != expected { return }
            }
        }
        #expect(built == 300)
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
        let answers = try body.withUnsafeBytes { body in
            (try withGroup?.matches(body, id: id), try noGroup?.matches(body, id: id))
        }
        #expect(answers.0 == true && answers.1 == false)
    }

    @Test func valuesItReadsAreCheckedAgainstTheSchema() throws {
        let compiled = try CompiledPredicate(try FetchPredicate(format: "big > 3"), entity: sample, schema: schema)
        let filter = try #require(RecordFilter(compiled))
        let id = RecordID(entity: sample.number, serial: 1)
        func matches(_ values: [Value]) throws -> Bool {
            try ValueCoding.encode(values).withUnsafeBytes { try filter.matches($0, id: id) }
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
        #expect(throws: CairnError.self) { try cut.withUnsafeBytes { try filter.matches($0, id: id) } }
    }
}
