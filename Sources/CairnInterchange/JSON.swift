import CairnStorage
import Foundation

/// A parsed JSON value. Numbers keep their text, so each is converted once, exactly, to
/// the type it is read as (`JSONSerialization` rounds through `Double` on some
/// platforms, which loses digits of doubles and of large integers).
package enum JSON: Equatable, Sendable {
    case null
    case bool(Bool)
    /// The number's text, as it appeared (checked against the JSON grammar).
    case number(String)
    case string(String)
    case array([JSON])
    /// Members by key; a repeated key keeps its last value.
    case object([String: JSON])

    /// Deepest nesting accepted: bounded so hostile input cannot exhaust the stack.
    package static let maxDepth = 128

    /// Parses one JSON text (RFC 8259) from its UTF-8 bytes. Errors are `.invalidArgument`
    /// naming the byte offset.
    package init(parsing text: some StringProtocol) throws {
        if let parsed = try text.utf8.withContiguousStorageIfAvailable({ try JSON(utf8: UnsafeRawBufferPointer($0)) }) {
            self = parsed
        } else {
            self = try Array(text.utf8).withUnsafeBytes { try JSON(utf8: $0) }
        }
    }

    /// Parses one JSON text from UTF-8 bytes; a string that is not valid UTF-8 is refused.
    package init(utf8 bytes: UnsafeRawBufferPointer) throws {
        var parser = JSONParser(bytes: bytes.assumingMemoryBound(to: UInt8.self))
        let value = try parser.value(depth: 0)
        try parser.end()
        self = value
    }

    /// The members of a JSON text that is an object, in their order, repeated keys
    /// included; nil for a text that is another value. (A record line's members, looked
    /// up by name a few times each, need no hashed table.)
    static func members(utf8 bytes: UnsafeRawBufferPointer) throws -> [(key: String, value: JSON)]? {
        var parser = JSONParser(bytes: bytes.assumingMemoryBound(to: UInt8.self))
        parser.skipSpace()
        guard parser.position < bytes.count, bytes[parser.position] == UInt8(ascii: "{") else {
            _ = try JSON(utf8: bytes)  // (a malformed text is reported as such)
            return nil
        }
        let members = try parser.members(depth: 0)
        try parser.end()
        return members
    }

    package subscript(key: String) -> JSON? {
        if case .object(let members) = self { return members[key] } else { return nil }
    }

    package var isNull: Bool { self == .null }

    /// A short description for error messages.
    package var summary: String {
        switch self {
        case .null: return "null"
        case .bool(let value): return value ? "true" : "false"
        case .number(let text): return text
        case .string(let text): return JSONText.string(String(text.prefix(80)))
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

private struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    func failure(_ message: String, at offset: Int? = nil) -> CairnError {
        CairnError(.invalidArgument, "invalid JSON at byte \(offset ?? position): \(message)")
    }

    /// The text of UTF-8 `bytes` of a string starting at `start`, refused unless valid:
    /// nothing is stored in place of bytes that are not text.
    func text(_ bytes: UnsafeRawBufferPointer, start: Int) throws -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw failure("a string that is not valid UTF-8", at: start)
        }
        return text
    }

    /// Only whitespace may follow the value.
    mutating func end() throws {
        skipSpace()
        guard position == bytes.count else { throw failure("unexpected text after the value") }
    }

    mutating func skipSpace() {
        while position < bytes.count, JSONText.isSpace(bytes[position]) { position += 1 }
    }

    mutating func value(depth: Int) throws -> JSON {
        guard depth < JSON.maxDepth else { throw failure("nested deeper than \(JSON.maxDepth)") }
        skipSpace()
        guard position < bytes.count else { throw failure("unexpected end") }
        switch bytes[position] {
        case UInt8(ascii: "{"):
            let pairs = try members(depth: depth)
            var members = [String: JSON](minimumCapacity: pairs.count)
            for (key, value) in pairs { members[key] = value }  // a repeated key keeps its last value
            return .object(members)
        case UInt8(ascii: "["):
            position += 1
            var items: [JSON] = []
            skipSpace()
            if position < bytes.count, bytes[position] == UInt8(ascii: "]") { position += 1; return .array(items) }
            while true {
                items.append(try value(depth: depth + 1))
                skipSpace()
                guard position < bytes.count else { throw failure("unexpected end in an array") }
                if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
                try expect(UInt8(ascii: "]"))
                return .array(items)
            }
        case UInt8(ascii: "\""):
            return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        default:
            return .number(try number())
        }
    }

    /// An object's members in their order, repeated keys included (at `{`). Gathered as
    /// a list, an object's table is made at its size once: grown member by member it was
    /// rehashed at every doubling (a sixth of an import's time).
    mutating func members(depth: Int) throws -> [(key: String, value: JSON)] {
        position += 1
        var pairs: [(key: String, value: JSON)] = []
        skipSpace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") { position += 1; return pairs }
        while true {
            skipSpace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw failure("expected a key") }
            let key = try string()
            skipSpace()
            try expect(UInt8(ascii: ":"))
            pairs.append((key, try value(depth: depth + 1)))
            skipSpace()
            guard position < bytes.count else { throw failure("unexpected end in an object") }
            if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
            try expect(UInt8(ascii: "}"))
            return pairs
        }
    }

    mutating func expect(_ byte: UInt8) throws {
        guard position < bytes.count, bytes[position] == byte else {
            throw failure("expected \"\(Character(Unicode.Scalar(byte)))\"")
        }
        position += 1
    }

    mutating func literal(_ word: StaticString) throws {
        let count = word.utf8CodeUnitCount
        guard position + count <= bytes.count,
              UnsafeBufferPointer(start: word.utf8Start, count: count).elementsEqual(bytes[position..<(position + count)]) else {
            throw failure("unknown literal")
        }
        position += count
    }

    mutating func number() throws -> String {
        let start = position
        func digits() -> Int {
            let first = position
            while position < bytes.count, bytes[position] >= 0x30, bytes[position] <= 0x39 { position += 1 }
            return position - first
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "-") { position += 1 }
        let leadingZero = position < bytes.count && bytes[position] == 0x30
        let whole = digits()
        guard whole > 0, !(leadingZero && whole > 1) else { throw failure("not a value") }
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            position += 1
            guard digits() > 0 else { throw failure("expected digits after the decimal point") }
        }
        if position < bytes.count, bytes[position] | 0x20 == UInt8(ascii: "e") {
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") { position += 1 }
            guard digits() > 0 else { throw failure("expected digits in the exponent") }
        }
        return String(decoding: bytes[start..<position], as: UTF8.self)
    }

    mutating func hex4() throws -> UInt32 {
        guard position + 4 <= bytes.count else { throw failure("unfinished \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case 0x30...0x39: digit = byte - 0x30
            case 0x41...0x46: digit = byte - 0x41 + 10
            case 0x61...0x66: digit = byte - 0x61 + 10
            default: throw failure("bad hex digit in a \\u escape")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    /// A string's text. Without escapes (the common case) it is its bytes, decoded once;
    /// with escapes, the runs between them and each escape's UTF-8 are gathered first.
    mutating func string() throws -> String {
        position += 1  // the opening quote
        let start = position
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                position += 1
                return try text(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[start..<(position - 1)])), start: start - 1)
            }
            if byte < 0x20 { throw failure("control character in a string") }
            if byte == UInt8(ascii: "\\") { break }
            position += 1
        }
        guard position < bytes.count else { throw failure("unterminated string") }
        var text: [UInt8] = []
        text.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<position]))
        var runStart = position
        func flushRun() {
            if runStart < position { text.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<position])) }
        }
        while true {
            guard position < bytes.count else { throw failure("unterminated string") }
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                flushRun()
                position += 1
                return try text.withUnsafeBytes { try self.text($0, start: start - 1) }
            }
            if byte < 0x20 { throw failure("control character in a string") }
            if byte != UInt8(ascii: "\\") { position += 1; continue }
            flushRun()
            position += 1
            guard position < bytes.count else { throw failure("unterminated escape") }
            let escape = bytes[position]
            position += 1
            let scalar: Unicode.Scalar
            switch escape {
            case UInt8(ascii: "\""): scalar = "\""
            case UInt8(ascii: "\\"): scalar = "\\"
            case UInt8(ascii: "/"): scalar = "/"
            case UInt8(ascii: "b"): scalar = "\u{08}"
            case UInt8(ascii: "f"): scalar = "\u{0C}"
            case UInt8(ascii: "n"): scalar = "\n"
            case UInt8(ascii: "r"): scalar = "\r"
            case UInt8(ascii: "t"): scalar = "\t"
            case UInt8(ascii: "u"):
                var code = try hex4()
                if (0xD800..<0xDC00).contains(code) {
                    guard position + 2 <= bytes.count, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u") else {
                        throw failure("unpaired surrogate in a \\u escape")
                    }
                    position += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw failure("unpaired surrogate in a \\u escape") }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let decoded = Unicode.Scalar(code) else { throw failure("unpaired surrogate in a \\u escape") }
                scalar = decoded
            default:
                throw failure("unknown escape \\\(Character(Unicode.Scalar(escape)))")
            }
            text.append(contentsOf: scalar.utf8)
            runStart = position
        }
    }
}

extension JSON {
    /// Converts a `JSONSerialization` result (numbers through their description).
    package init(_ any: Any) {
        switch any {
        case is NSNull: self = .null
        case let text as String: self = .string(text)
        case let number as NSNumber:
            self = RecordJSON.isBool(number) ? .bool(number.boolValue) : .number(number.stringValue)
        case let items as [Any]: self = .array(items.map(JSON.init))
        case let members as [String: Any]: self = .object(members.mapValues(JSON.init))
        default: self = .string("\(any)")
        }
    }
}

/// Dates in the interchange format: ISO 8601 in UTC, `YYYY-MM-DDTHH:MM:SS.mmmZ`, with
/// more fractional digits only when milliseconds do not give back the exact value, so
/// export → import → export is lossless. Years outside 0…9999 are written expanded,
/// with a sign (`+12345-…`, `-0044-…`); non-finite dates and those beyond ±2^53 seconds
/// as a number of seconds since 1970 (or `"NaN"`, `"Infinity"`, `"-Infinity"`).
package enum ISODate {
    /// Seconds from 1970 to 2001, the reference date `Date` counts from.
    static let referenceOffset: Int64 = 978_307_200

    /// The JSON text for `date` (a quoted string, or a number): ISO 8601 with the fewest
    /// fractional digits (at least 3) that read back as exactly the stored time, however
    /// many that takes (a time 5e-324 s from 2001 takes 324).
    package static func json(_ date: Date) -> String {
        let t = date.timeIntervalSinceReferenceDate
        guard t.isFinite, abs(t) < 9.0e15 else { return JSONText.number(date.timeIntervalSince1970) }
        // The shortest decimal that reads back as `t` (Swift's description), written out
        // without an exponent, then split into whole seconds (rounded down) and a fraction.
        let (integer, fraction) = plainDigits(t.magnitude.description)
        var whole = Int64(integer) ?? 0
        var digits = fraction
        if t < 0 {
            if digits.isEmpty { whole = -whole } else {
                whole = -(whole + 1)
                digits = tensComplement(digits)
            }
        }
        while digits.count < 3 { digits.append(UInt8(ascii: "0")) }
        return "\"" + civil(whole + referenceOffset) + "." + String(decoding: digits, as: UTF8.self) + "Z\""
    }

    /// The integer and fraction digits (ASCII, the fraction without trailing zeros) of a
    /// non-negative number's text as Swift writes it (`123.25`, `5e-324`, `1e+16`).
    static func plainDigits(_ text: String) -> (integer: String, fraction: [UInt8]) {
        let parts = text.split(separator: "e", maxSplits: 1)
        let mantissa = Array(parts[0].utf8)
        let exponent = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
        let point = mantissa.firstIndex(of: UInt8(ascii: ".")) ?? mantissa.count
        let digits = mantissa.filter { $0 != UInt8(ascii: ".") }
        let position = point + exponent  // digits before the decimal point
        var integer: [UInt8], fraction: [UInt8]
        if position <= 0 {
            integer = [UInt8(ascii: "0")]
            fraction = [UInt8](repeating: UInt8(ascii: "0"), count: -position) + digits
        } else if position >= digits.count {
            integer = digits + [UInt8](repeating: UInt8(ascii: "0"), count: position - digits.count)
            fraction = []
        } else {
            integer = Array(digits[..<position])
            fraction = Array(digits[position...])
        }
        while fraction.last == UInt8(ascii: "0") { fraction.removeLast() }
        return (String(decoding: integer, as: UTF8.self), fraction)
    }

    /// The digits of 1 − 0.`digits` (ASCII, `digits` not all zero): the tens' complement.
    static func tensComplement(_ digits: [UInt8]) -> [UInt8] {
        var complement = digits.map { 0x39 - ($0 - 0x30) }
        var index = complement.count - 1
        while index >= 0 {
            if complement[index] == 0x39 { complement[index] = 0x30; index -= 1 } else { complement[index] += 1; break }
        }
        return complement
    }

    /// The decimal text of `whole + 0.fraction` (fraction as digits).
    static func decimal(_ whole: Int64, _ fraction: String) -> String {
        guard fraction.contains(where: { $0 != "0" }) else { return String(whole) }
        if whole >= 0 { return "\(whole).\(fraction)" }
        // whole + f = -((-whole - 1) + (1 - f)); 1 - f in digits is the tens' complement.
        return "-\(-(whole + 1)).\(String(decoding: tensComplement(Array(fraction.utf8)), as: UTF8.self))"
    }

    /// `YYYY-MM-DDTHH:MM:SS` for seconds since 1970 (UTC).
    static func civil(_ seconds: Int64) -> String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        // Civil from days (H. Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let digits = String(year.magnitude)
        let padded = String(repeating: "0", count: max(0, 4 - digits.count)) + digits
        let yearText = (0...9999).contains(year) ? padded : (year < 0 ? "-" : "+") + padded
        return yearText + "-" + two(month) + "-" + two(day)
            + "T" + two(secondOfDay / 3600) + ":" + two(secondOfDay / 60 % 60) + ":" + two(secondOfDay % 60)
    }

    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// Reads `[±]YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; nil if it is not one.
    package static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        // (A fraction may take up to 1,074 digits: the exact value of the smallest double.)
        guard bytes.count >= 20, bytes.count <= 1_200 else { return nil }
        var position = 0
        func number(_ count: Int) -> Int64? {
            guard position + count <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[position..<(position + count)] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int64(byte - 0x30)
            }
            position += count
            return value
        }
        func literal(_ character: UInt8) -> Bool {
            guard position < bytes.count, bytes[position] == character else { return false }
            position += 1
            return true
        }
        var sign: Int64 = 0
        if literal(UInt8(ascii: "+")) { sign = 1 } else if literal(UInt8(ascii: "-")) { sign = -1 }
        var yearDigits = 4
        if sign != 0 {
            while position + yearDigits < bytes.count, bytes[position + yearDigits] != UInt8(ascii: "-") { yearDigits += 1 }
            guard yearDigits <= 9 else { return nil }
        }
        guard let magnitude = number(yearDigits), literal(UInt8(ascii: "-")), let month = number(2), literal(UInt8(ascii: "-")),
              let day = number(2), literal(UInt8(ascii: "T")) || literal(UInt8(ascii: "t")),
              let hour = number(2), literal(UInt8(ascii: ":")), let minute = number(2), literal(UInt8(ascii: ":")),
              let second = number(2) else { return nil }
        let year = sign < 0 ? -magnitude : magnitude
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays: [Int64] = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...12).contains(month), day >= 1, day <= monthDays[Int(month) - 1], hour < 24, minute < 60, second < 60 else {
            return nil
        }
        var fraction = ""
        if literal(UInt8(ascii: ".")) {
            let start = position
            while position < bytes.count, bytes[position] >= 0x30, bytes[position] <= 0x39 { position += 1 }
            guard position > start else { return nil }
            fraction = String(decoding: bytes[start..<position], as: UTF8.self)
        }
        var offset: Int64 = 0
        if !(literal(UInt8(ascii: "Z")) || literal(UInt8(ascii: "z"))) {
            guard position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") else { return nil }
            let offsetSign: Int64 = bytes[position] == UInt8(ascii: "+") ? 1 : -1
            position += 1
            guard let hours = number(2), literal(UInt8(ascii: ":")), let minutes = number(2), hours < 24, minutes < 60 else { return nil }
            offset = offsetSign * (hours * 3600 + minutes * 60)
        }
        guard position == bytes.count else { return nil }
        let seconds = daysFromCivil(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second - offset
        // One correctly rounded conversion of the whole "seconds.fraction" text, counted
        // from the reference date as `Date` stores it.
        guard let value = Double(decimal(seconds - referenceOffset, fraction)) else { return nil }
        return Date(timeIntervalSinceReferenceDate: value)
    }
}
