import CairnStorage
import Foundation

/// The record interchange format of `cairn export`, `import` and `query`: one JSON
/// object per line (NDJSON) with `entity`, `id`, then every attribute and relationship
/// in schema order. Dates are ISO 8601, binary and archived values base64, decimals
/// strings, non-finite floats the strings `"NaN"`, `"Infinity"`, `"-Infinity"`,
/// references record-ID strings (`"E1:42"`).
package enum RecordJSON {
    /// One record as a line (without the newline).
    package static func line(entity: EntityDescription, id: RecordID, values: [Value]) -> String {
        var bytes: [UInt8] = []
        appendLine(entity: entity, id: id, values: values, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends ``line(entity:id:values:)``'s UTF-8 to `bytes` (an export writes its lines
    /// into one buffer this way, rather than building each as a `String` of parts).
    package static func appendLine(entity: EntityDescription, id: RecordID, values: [Value], to bytes: inout [UInt8]) {
        bytes.append(contentsOf: #"{"entity": "#.utf8)
        JSONText.append(string: entity.name, to: &bytes)
        bytes.append(contentsOf: #", "id": "#.utf8)
        JSONText.append(string: id.description, to: &bytes)
        func member(_ name: String) {
            bytes.append(contentsOf: ", ".utf8)
            JSONText.append(string: name, to: &bytes)
            bytes.append(contentsOf: ": ".utf8)
        }
        for (index, attribute) in entity.attributes.enumerated() {
            member(attribute.name)
            JSONText.append(value: index < values.count ? values[index] : .null, to: &bytes)
        }
        for (offset, relationship) in entity.relationships.enumerated() {
            let value = entity.attributes.count + offset < values.count ? values[entity.attributes.count + offset] : .null
            member(relationship.name)
            if relationship.isToMany && value.isNull { bytes.append(contentsOf: "[]".utf8) } else { JSONText.append(value: value, to: &bytes) }
        }
        bytes.append(UInt8(ascii: "}"))
    }

    /// A line read but not yet turned into values: its entity, its `id` text if any, and
    /// the JSON object's members.
    package struct ParsedLine: Sendable {
        package let entity: EntityDescription
        package let id: String?
        /// The members in their order, repeated keys included (the last one counts).
        let members: [(key: String, value: JSON)]

        init(entity: EntityDescription, id: String?, members: [(key: String, value: JSON)]) {
            self.entity = entity
            self.id = id
            self.members = members
        }

        /// The JSON object.
        package var object: JSON { .object(Dictionary(members, uniquingKeysWith: { $1 })) }

        /// The value of member `key` (of its last occurrence), nil if there is none.
        package subscript(key: String) -> JSON? { members.last { $0.key == key }?.value }

        /// A lookup of members by key, as ``subscript(_:)`` answers, for looking up every
        /// property: a search for a few members, a table made once for many (which only
        /// lines being turned into values need, not the import's first pass).
        func memberLookup() -> (String) -> JSON? {
            guard members.count > 16 else { return { key in members.last { $0.key == key }?.value } }
            var positions = [String: Int](minimumCapacity: members.count)
            for (index, member) in members.enumerated() { positions[member.key] = index }
            return { [members] key in positions[key].map { members[$0].value } }
        }
    }

    /// Reads one line: a JSON object naming an entity of `schema`. Errors are
    /// `.invalidArgument` with the reason (the caller adds the line number).
    package static func parse(_ line: some StringProtocol, schema: Schema) throws -> ParsedLine {
        if let parsed = try line.utf8.withContiguousStorageIfAvailable({ try parse(utf8: UnsafeRawBufferPointer($0), schema: schema) }) {
            return parsed
        }
        return try Array(line.utf8).withUnsafeBytes { try parse(utf8: $0, schema: schema) }
    }

    /// ``parse(_:schema:)`` of a line's UTF-8 bytes.
    package static func parse(utf8 line: UnsafeRawBufferPointer, schema: Schema) throws -> ParsedLine {
        guard let members = try JSON.members(utf8: line) else { throw CairnError(.invalidArgument, "not a JSON object") }
        let found = { (key: String) in members.last { $0.key == key }?.value }
        guard case .string(let name)? = found("entity"), let entity = schema.entity(named: name) else {
            throw CairnError(.invalidArgument, "missing or unknown \"entity\" \(found("entity")?.summary ?? "null")")
        }
        let id = found("id") ?? .null
        if case .string(let text) = id { return ParsedLine(entity: entity, id: text, members: members) }
        guard id.isNull else { throw CairnError(.invalidArgument, "\"id\" must be a string, not \(id.summary)") }
        return ParsedLine(entity: entity, id: nil, members: members)
    }

    /// The record values of a parsed line, in schema order. A missing or null attribute
    /// takes its default, else nil if optional, else is an error; `resolve` turns each
    /// reference's id text into a raw record ID (or throws).
    package static func values(of line: ParsedLine, resolve: (String) throws -> UInt64) throws -> [Value] {
        let entity = line.entity
        let member = line.memberLookup()
        var values: [Value] = []
        values.reserveCapacity(entity.valueCount)
        for attribute in entity.attributes {
            let raw = member(attribute.name) ?? .null
            if raw.isNull {
                if let fallback = attribute.defaultValue { values.append(fallback); continue }
                guard attribute.isOptional else {
                    throw CairnError(.invalidArgument, "\(entity.name).\(attribute.name) is required")
                }
                values.append(.null)
                continue
            }
            do {
                let value = try value(raw, type: attribute.type)
                try value.checkLimits()
                values.append(value)
            } catch let error as CairnError {
                throw CairnError(error.code, "\(entity.name).\(attribute.name): \(error.message)")
            }
        }
        for relationship in entity.relationships {
            values.append(try value(member(relationship.name) ?? .null, of: relationship, in: entity, resolve: resolve))
        }
        return values
    }

    /// The value of relationship `relationship` of `entity` from its JSON member (null, an
    /// id string, or for a to-many a list of them), each id resolved by `resolve`.
    package static func value(_ raw: JSON, of relationship: RelationshipDescription, in entity: EntityDescription,
                             resolve: (String) throws -> UInt64) throws -> Value {
        let label = "\(entity.name).\(relationship.name)"
        func reference(_ raw: JSON) throws -> UInt64 {
            guard case .string(let text) = raw else {
                throw CairnError(.invalidArgument, "\(label): expected an id string, found \(raw.summary)")
            }
            do { return try resolve(text) } catch let error as CairnError {
                throw CairnError(error.code, "\(label): \(error.message)")
            }
        }
        guard relationship.isToMany else { return raw.isNull ? .null : .reference(try reference(raw)) }
        let list: [JSON]
        switch raw {
        case .array(let items): list = items
        case .null: list = []
        default: throw CairnError(.invalidArgument, "\(label): expected a list of ids")
        }
        guard list.count <= FormatLimits.maxReferences else {
            throw CairnError(.tooLarge, "\(label): \(list.count) references; the limit is \(FormatLimits.maxReferences)")
        }
        return .references(try list.map(reference))
    }

    /// A JSON value as a store value of `type`. Numbers convert from their text, exactly
    /// (correctly rounded for floats); integers must be whole and in range, and floats
    /// finite (the texts "NaN", "Infinity" and "-Infinity" give the others).
    package static func value(_ raw: JSON, type: AttributeType) throws -> Value {
        func bad(_ expected: String) -> CairnError {
            CairnError(.invalidArgument, "expected \(expected), found \(raw.summary)")
        }
        if raw.isNull { return .null }
        switch type {
        case .bool:
            guard case .bool(let flag) = raw else { throw bad("true or false") }
            return .bool(flag)
        case .int8, .int16, .int32, .int64:
            guard case .number(let text) = raw else { throw bad("a whole number") }
            // "42" directly; "4.2e1" or "42.0" digit by digit.
            guard let whole = Int64(text) ?? JSONNumber.exactInteger(text) else {
                throw bad("a whole number in Int64 range")
            }
            switch type {
            case .int8: guard let v = Int8(exactly: whole) else { throw bad("a number in Int8 range") }; return .int8(v)
            case .int16: guard let v = Int16(exactly: whole) else { throw bad("a number in Int16 range") }; return .int16(v)
            case .int32: guard let v = Int32(exactly: whole) else { throw bad("a number in Int32 range") }; return .int32(v)
            default: return .int64(whole)
            }
        case .float, .double:
            let text: String
            switch raw {
            case .number(let number): text = number
            case .string(let special) where ["NaN", "Infinity", "-Infinity"].contains(special): text = special == "NaN" ? "nan" : special
            default: throw bad("a number")
            }
            let special = raw != .number(text)
            if type == .float, let value = Float(text) {
                guard value.isFinite || special else { throw bad("a number in Float range (or \"Infinity\")") }
                return .float(value)
            }
            if type == .double, let value = Double(text) {
                guard value.isFinite || special else { throw bad("a number in Double range (or \"Infinity\")") }
                return .double(value)
            }
            throw bad("a number")
        case .string:
            guard case .string(let text) = raw else { throw bad("a string") }
            return .string(text)
        case .binary, .archived:
            guard case .string(let text) = raw, let data = Data(base64Encoded: text) else { throw bad("base64 text") }
            return type == .binary ? .bytes(data) : .archived(data)
        case .date:
            switch raw {
            case .string(let text):
                if let date = ISODate.parse(text) { return .date(date) }
                if ["NaN", "Infinity", "-Infinity"].contains(text), let seconds = Double(text == "NaN" ? "nan" : text) {
                    return .date(Date(timeIntervalSince1970: seconds))
                }
            case .number(let text):
                if let seconds = Double(text), seconds.isFinite { return .date(Date(timeIntervalSince1970: seconds)) }
            default: break
            }
            throw bad("an ISO 8601 date (or seconds since 1970)")
        case .uuid:
            guard case .string(let text) = raw, let uuid = UUID(uuidString: text) else { throw bad("a UUID") }
            return .uuid(uuid)
        case .url:
            // Taken only as the text it is stored as: an export round-trips exactly.
            guard case .string(let text) = raw, let url = ValueText.url(text) else {
                throw bad("a URL as Foundation writes it (percent-encoded)")
            }
            return .url(url)
        case .decimal:
            switch raw {
            case .string(let text), .number(let text):
                if let decimal = ValueText.decimal(parsing: text) { return .decimal(decimal) }
            default: break
            }
            throw bad("a decimal (as a string)")
        }
    }

    /// Whether an `NSNumber` from `JSONSerialization` is a boolean.
    package static func isBool(_ number: NSNumber) -> Bool {
        String(cString: number.objCType) == "c" && (number == NSNumber(value: true) || number == NSNumber(value: false))
            || type(of: number) == type(of: NSNumber(value: true))
    }
}

/// JSON text built by hand, with keys in the order given.
package enum JSONText {
    /// Whether a byte is JSON whitespace (space, tab, line feed, carriage return).
    @inline(__always)
    package static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    package static func string(_ text: String) -> String {
        var bytes: [UInt8] = []
        append(string: text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `text` as a JSON string: its UTF-8 whole when nothing in it needs an
    /// escape (the common case), else run by run between escapes.
    package static func append(string text: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var runStart = 0
            for (index, byte) in utf8.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                runStart = index + 1
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                case UInt8(ascii: "\n"): bytes.append(UInt8(ascii: "n"))
                case UInt8(ascii: "\r"): bytes.append(UInt8(ascii: "r"))
                case UInt8(ascii: "\t"): bytes.append(UInt8(ascii: "t"))
                default:
                    bytes.append(contentsOf: "u00".utf8)
                    bytes.append(hexDigit(byte >> 4))
                    bytes.append(hexDigit(byte & 0xF))
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// The lowercase hexadecimal digit of `value` (0...15).
    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }

    package static func object(_ pairs: [(String, String)]) -> String {
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        for (index, (key, value)) in pairs.enumerated() {
            if index > 0 { bytes.append(contentsOf: ", ".utf8) }
            append(string: key, to: &bytes)
            bytes.append(contentsOf: ": ".utf8)
            bytes.append(contentsOf: value.utf8)
        }
        bytes.append(UInt8(ascii: "}"))
        return String(decoding: bytes, as: UTF8.self)
    }

    package static func array(_ items: [String]) -> String { "[" + items.joined(separator: ", ") + "]" }

    package static func number(_ value: Double) -> String {
        guard value.isFinite else { return string(value.isNaN ? "NaN" : (value > 0 ? "Infinity" : "-Infinity")) }
        if value == 0, value.sign == .minus { return "-0.0" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    package static let dateStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// Appends ``value(_:)``'s UTF-8 to `bytes`.
    package static func append(value: Value, to bytes: inout [UInt8]) {
        switch value {
        case .int64(let v): bytes.append(contentsOf: String(v).utf8)
        case .int32(let v): bytes.append(contentsOf: String(v).utf8)
        case .string(let v): append(string: v, to: &bytes)
        case .null: bytes.append(contentsOf: "null".utf8)
        default: bytes.append(contentsOf: self.value(value).utf8)
        }
    }

    /// A value in the interchange format.
    package static func value(_ value: Value) -> String {
        switch value {
        case .null: return "null"
        case .bool(let v): return v ? "true" : "false"
        case .int8(let v): return String(v)
        case .int16(let v): return String(v)
        case .int32(let v): return String(v)
        case .int64(let v): return String(v)
        case .float(let v): return number(Double(v))
        case .double(let v): return number(v)
        case .string(let v): return string(v)
        case .bytes(let v), .archived(let v): return string(v.base64EncodedString())
        case .date(let v): return ISODate.json(v)
        case .uuid(let v): return string(v.uuidString)
        case .url(let v): return string(v.absoluteString)
        case .decimal(let v): return string(v.description)
        case .reference(let raw): return string(RecordID(rawValue: raw).description)
        case .references(let raws): return array(raws.map { string(RecordID(rawValue: $0).description) })
        }
    }
}

/// Numbers of JSON text read exactly.
package enum JSONNumber {
    /// The integer a JSON number's text (RFC 8259: `-`, digits, a fraction, an exponent)
    /// is exactly, if it is a whole number in Int64's range: `4.2e1` and `42.000` are 42,
    /// `1.5` and `9223372036854775808` are nil. Digit by digit: through a Double, a number
    /// past 2^53 (or below Int64.min) would be rounded to one that fits.
    package static func exactInteger(_ text: String) -> Int64? {
        var bytes = Array(text.utf8)[...]
        let negative = bytes.first == UInt8(ascii: "-")
        if negative { bytes = bytes.dropFirst() }
        let exponentAt = bytes.firstIndex { $0 | 0x20 == UInt8(ascii: "e") }
        var exponent = 0
        if let exponentAt {
            var digits = bytes[(exponentAt + 1)...]
            let sign = digits.first == UInt8(ascii: "-") ? -1 : 1
            if digits.first == UInt8(ascii: "-") || digits.first == UInt8(ascii: "+") { digits = digits.dropFirst() }
            for digit in digits {
                guard (0x30...0x39).contains(digit) else { return nil }
                exponent = min(exponent * 10 + Int(digit - 0x30), 100_000)  // (past any digit count a line can hold)
            }
            exponent *= sign
            bytes = bytes[..<exponentAt]
        }
        // The digits without the point; the point moves the exponent.
        var digits: [UInt8] = []
        for byte in bytes {
            if byte == UInt8(ascii: ".") { continue }
            guard (0x30...0x39).contains(byte) else { return nil }
            digits.append(byte)
        }
        if let point = bytes.firstIndex(of: UInt8(ascii: ".")) { exponent -= bytes.endIndex - point - 1 }
        guard let first = digits.firstIndex(where: { $0 != 0x30 }) else { return 0 }
        digits.removeFirst(first)
        if exponent < 0 {
            // The digits past the point must all be zeros.
            guard -exponent <= digits.count, digits.suffix(-exponent).allSatisfy({ $0 == 0x30 }) else { return nil }
            digits.removeLast(-exponent)
        } else {
            guard digits.count + exponent <= 19 else { return nil }
            digits += [UInt8](repeating: 0x30, count: exponent)
        }
        guard !digits.isEmpty else { return 0 }
        return Int64((negative ? "-" : "") + String(decoding: digits, as: UTF8.self))
    }
}
