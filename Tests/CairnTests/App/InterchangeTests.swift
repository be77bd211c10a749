@testable import CairnInterchange
import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// The record interchange format (export, import, query): JSON parsing, exact numbers,
/// lossless dates.
@Suite struct InterchangeTests {
    @Test func jsonParsesTheGrammarAndRefusesTheRest() throws {
        let parsed = try JSON(parsing: #" {"a": [1, -2.5e3, true, null, "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"], "b": {}} "#)
        #expect(parsed["a"] == .array([.number("1"), .number("-2.5e3"), .bool(true), .null,
                                        .string("x\"\\/\u{08}\u{0C}\n\r\té😀")]))
        #expect(parsed["b"] == .object([:]))
        for bad in ["", "{", "[1,]", "01", "1.", "-", "\"\\ud800\"", "\"\u{01}\"", "tru", "{\"a\" 1}", "[1] 2", "\"\\x\""] {
            #expect(throws: CairnError.self, "\(bad)") { try JSON(parsing: bad) }
        }
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect { try JSON(parsing: deep) } throws: { ($0 as? CairnError)?.message.contains("deeper") == true }
    }

    /// Strings of every kind of character come back from their JSON text as they went
    /// in (escapes anywhere, multi-byte text around them), from a `String` and from bytes;
    /// a string whose bytes are not UTF-8 is refused, naming where it starts (storing it
    /// with U+FFFD in their place would store what was not given).
    @Test func stringsComeBackFromTheirJSONText() throws {
        #expect(JSONText.string("a\"\\\n\r\t\u{01}\u{1F}é/") == #""a\"\\\n\r\t\u0001\u001fé/""#)
        var generator = SystemRandomNumberGenerator()
        let pool: [Unicode.Scalar] = ["a", "z", " ", "\"", "\\", "/", "\u{00}", "\u{08}", "\n", "\u{1F}", "\u{7F}",
                                      "é", "€", "\u{FFFF}", "😀", "\u{10FFFF}"]
        for _ in 0..<2_000 {
            var scalars = String.UnicodeScalarView()
            for _ in 0..<Int.random(in: 0...12, using: &generator) { scalars.append(pool.randomElement(using: &generator) ?? "a") }
            let text = String(scalars)
            let json = JSONText.string(text)
            #expect(try JSON(parsing: json) == .string(text), "\(json)")
            #expect(try Array(json.utf8).withUnsafeBytes { try JSON(utf8: $0) } == .string(text), "\(json)")
        }
        for _ in 0..<2_000 {
            // Raw bytes with no quote, backslash or control character, valid UTF-8 or not,
            // with an escape somewhere or none.
            var raw: [UInt8] = (0..<Int.random(in: 0...10, using: &generator)).map { _ in
                let byte = UInt8.random(in: 0x20...0xFF, using: &generator)
                return byte == 0x22 || byte == 0x5C ? 0x41 : byte
            }
            let escaped = Bool.random(using: &generator)
            let cut = Int.random(in: 0...raw.count, using: &generator)
            if escaped { raw.insert(contentsOf: Array(#"\n"#.utf8), at: cut) }
            let text = escaped ? Array(raw[..<cut]) + [0x0A] + Array(raw[(cut + 2)...]) : raw
            let bytes = [0x20, 0x22] + raw + [0x22]
            if let expected = text.withUnsafeBytes({ String(validating: $0, as: UTF8.self) }) {
                #expect(try bytes.withUnsafeBytes { try JSON(utf8: $0) } == .string(expected), "\(raw)")
            } else {
                do {
                    _ = try bytes.withUnsafeBytes { try JSON(utf8: $0) }
                    Issue.record("not UTF-8, yet read: \(raw)")
                } catch let error as CairnError {
                    #expect(error.message == "invalid JSON at byte 1: a string that is not valid UTF-8", "\(raw)")
                }
            }
        }
    }

    /// A record line's member lookups answer as the parsed object's: the last of a
    /// repeated key, nil for an absent one, for lines of few members (searched) and of
    /// many (a table, in the lookup for making values).
    @Test func aLinesMembersAnswerAsItsObject() throws {
        let schema = Schema(entities: [EntityDescription(name: "E", number: 1, attributes: [AttributeDescription(name: "k0", type: .int64)])])
        var generator = SystemRandomNumberGenerator()
        let keys = (0..<24).map { "k\($0)" } + ["entity", "id"]
        for _ in 0..<500 {
            var members = [#""entity": "E""#]
            for _ in 0..<Int.random(in: 0...40, using: &generator) {
                members.append("\"k\(Int.random(in: 0..<24, using: &generator))\": \(Int.random(in: 0...9, using: &generator))")
            }
            members.shuffle(using: &generator)
            let text = "{" + members.joined(separator: ", ") + "}"
            let line = try RecordJSON.parse(text, schema: schema)
            let object = try JSON(parsing: text)
            let lookup = line.memberLookup()
            for key in keys { #expect(line[key] == object[key] && lookup(key) == object[key], "\(key) in \(text)") }
            #expect(line.object == object)
        }
        #expect(throws: CairnError.self) { try RecordJSON.parse("[1]", schema: schema) }
        #expect(throws: CairnError.self) { try RecordJSON.parse(#"{"entity": "E"} x"#, schema: schema) }
    }

    @Test func numbersConvertExactly() throws {
        let cases: [(String, AttributeType, Value)] = [
            ("-5.657169167550999e+99", .double, .double(-5.657169167550999e+99)),
            ("9007199254740993", .int64, .int64(9_007_199_254_740_993)),
            ("9223372036854775807", .int64, .int64(.max)),
            ("4.2e1", .int16, .int16(42)),
            ("0.1", .float, .float(0.1)),
            ("3.14159265358979323846264338327950288", .decimal, .decimal(Decimal(string: "3.14159265358979323846264338327950288")!)),
        ]
        for (text, type, expected) in cases {
            #expect(try RecordJSON.value(.number(text), type: type) == expected, "\(text)")
        }
        for (text, type) in [("9223372036854775808", AttributeType.int64), ("1.5", .int32), ("128", .int8)] {
            #expect(throws: CairnError.self, "\(text)") { try RecordJSON.value(.number(text), type: type) }
        }
    }

    /// A number is stored as exactly the number written, or refused: an integer past its
    /// type's range (by one, or by far in an exponent), one with a fraction however small,
    /// a real too large for its type. Integers are read digit by digit; "NaN" and
    /// "Infinity" are the way to write those.
    @Test func numbersOutOfRangeAreRefusedNotRounded() throws {
        let exact: [(String, AttributeType, Value)] = [
            ("-9223372036854775808", .int64, .int64(.min)),
            ("-9.223372036854775808e18", .int64, .int64(.min)),
            ("9223372036854775807.000", .int64, .int64(.max)),
            ("92233720368547758.07e2", .int64, .int64(.max)),
            ("42.000", .int64, .int64(42)), ("4200e-2", .int64, .int64(42)), ("-0", .int64, .int64(0)),
            ("0.0e999999999999", .int64, .int64(0)), ("1E2", .int8, .int8(100)), ("127", .int8, .int8(127)),
            ("-32768.0", .int16, .int16(.min)), ("2147483647e0", .int32, .int32(.max)),
            ("1e308", .double, .double(1e308)), ("3.4028234e38", .float, .float(.greatestFiniteMagnitude)),
        ]
        for (text, type, expected) in exact {
            #expect(try RecordJSON.value(.number(text), type: type) == expected, "\(text)")
        }
        let refused: [(String, AttributeType)] = [
            ("-9223372036854775809", .int64), ("-9223372036854775810", .int64), ("9223372036854775808", .int64),
            ("1e19", .int64), ("1e999999999999", .int64), ("-1e400", .int64), ("1.0000000000000000001", .int64),
            ("9007199254740993.5", .int64), ("1e-400", .int64), ("127.00000000000000001", .int8), ("-129", .int8),
            ("1e400", .double), ("-1e400", .double), ("1e39", .float), ("-3.5e38", .float), ("1e400", .date),
        ]
        for (text, type) in refused {
            #expect(throws: CairnError.self, "\(text) as \(type)") { try RecordJSON.value(.number(text), type: type) }
        }
        #expect(try RecordJSON.value(.string("Infinity"), type: .double) == .double(.infinity))
        #expect(try RecordJSON.value(.string("-Infinity"), type: .float) == .float(-.infinity))
        // Whatever the digits, an integer reads as Int64 parses its plain form.
        var random = SplitMix64(seed: 8)
        for _ in 0..<2_000 {
            let value = Int64(bitPattern: random.next()) >> Int64(random.next() % 64)
            let digits = String(value.magnitude)
            let shift = Int(random.next() % 4)
            let text = (value < 0 ? "-" : "") + String(digits.dropLast(min(shift, digits.count - 1))) + "." + String(digits.suffix(min(shift, digits.count - 1)))
                + "e\(min(shift, digits.count - 1))"
            #expect(JSONNumber.exactInteger(text) == value, "\(text)")
        }
    }

    /// -0.0 exports as -0.0, not 0; URLs and decimals are read only as the text they
    /// are stored as, whole.
    @Test func exportedTextReadsBackAsTheStoredValue() throws {
        #expect(JSONText.value(.double(-0.0)) == "-0.0")
        guard case .double(let back) = try RecordJSON.value(.number(JSONText.value(.double(-0.0))), type: .double) else {
            Issue.record("not a double"); return
        }
        #expect(back.sign == .minus && back == 0)
        #expect(JSONText.value(.float(-0.0)) == "-0.0")
        // A URL Foundation would re-encode is not taken for another text.
        #expect(ValueText.url("p`th") == nil)
        #expect(ValueText.url("p%60th")?.absoluteString == "p%60th")
        #expect(throws: CairnError.self) { try RecordJSON.value(.string("p`th"), type: .url) }
        // Decimals: the whole text or nothing.
        for text in ["12a", "1,5", "+", "-", ".", " 12", "1e", "--1", "1.", ".5", "e5"] {
            #expect(ValueText.decimal(parsing: text) == nil, "\(text)")
            #expect(throws: CairnError.self, "\(text)") { try RecordJSON.value(.string(text), type: .decimal) }
        }
        #expect(ValueText.decimal(parsing: "1.50") == Decimal(string: "1.5"))
        #expect(ValueText.decimal(parsing: "-2.5e3") == Decimal(-2500))
        #expect(ValueText.decimal(parsing: "1234567890123456789012345678901234567890") == nil, "40 significant digits")
        // As stored, only the text a writer writes.
        #expect(ValueText.decimal("1.5") == Decimal(string: "1.5"))
        for text in ["1.50", "-0", "12a", "1e5", "+1", "NaN "] { #expect(ValueText.decimal(text) == nil, "\(text)") }
        var body = ByteWriter()
        body.varint(1)
        body.u8(Value.Tag.decimal.rawValue)
        body.lengthPrefixed(Array("12a".utf8))
        #expect(throws: CairnError.self) { try ValueCoding.decode(body.bytes) }
    }

    @Test func datesRoundTripExactly() throws {
        var random = SplitMix64(seed: 5)
        var dates = [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_795_348_055.076),
                     Date(timeIntervalSince1970: -1.5), Date(timeIntervalSinceReferenceDate: 0.000_000_1),
                     Date(timeIntervalSince1970: -62_135_596_800 - 86_400 * 400), Date(timeIntervalSince1970: 253_402_300_800 + 0.25),
                     Date(timeIntervalSinceReferenceDate: 1e17), Date(timeIntervalSinceReferenceDate: -.infinity),
                     Date.distantPast, Date.distantFuture,
                     // Times whose shortest exact fraction takes more than 18 digits.
                     Date(timeIntervalSinceReferenceDate: 5e-324), Date(timeIntervalSinceReferenceDate: -5e-324),
                     Date(timeIntervalSinceReferenceDate: 1.2345e-300), Date(timeIntervalSinceReferenceDate: -123.000_000_000_000_01)]
        for _ in 0..<200 {  // any finite bit pattern of a small magnitude
            dates.append(Date(timeIntervalSinceReferenceDate: Double(bitPattern: random.next() & 0x3FEF_FFFF_FFFF_FFFF | (random.next() & 1) << 63)))
        }
        for _ in 0..<2_000 {
            let bits = random.next()
            dates.append(Date(timeIntervalSinceReferenceDate: Double(Int64(bitPattern: bits) % 20_000_000_000) / 1000
                              + Double(bits % 1000) / 1e7))
        }
        for date in dates {
            let text = ISODate.json(date)
            let value = try RecordJSON.value(try JSON(parsing: text), type: .date)
            guard case .date(let back) = value else { Issue.record("\(text)"); continue }
            #expect(back.timeIntervalSinceReferenceDate.bitPattern == date.timeIntervalSinceReferenceDate.bitPattern,
                    "\(text): \(date.timeIntervalSinceReferenceDate) came back as \(back.timeIntervalSinceReferenceDate)")
        }
        #expect(ISODate.json(Date(timeIntervalSince1970: 1_795_348_055.076)) == "\"2026-11-22T11:47:35.076Z\"")
        #expect(ISODate.json(Date(timeIntervalSince1970: -1.5)) == "\"1969-12-31T23:59:58.500Z\"")
        #expect(ISODate.parse("2026-11-22T12:47:35.076+01:00") == ISODate.parse("2026-11-22T11:47:35.076Z"))
        #expect(ISODate.parse("2026-02-29T00:00:00Z") == nil)
    }
}
