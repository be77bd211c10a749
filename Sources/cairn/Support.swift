import Cairn
import Foundation

/// A usage error: exit 2 with a line pointing at the command's help.
struct UsageError: Error, CustomStringConvertible {
    let message: String
    let command: String
    var description: String { "\(message); see 'cairn \(command) --help'" }
}

/// A failure that has been reported already: exit 1.
struct Failure: Error {}

/// The small argument parser every command uses: positionals, `--flag`, `--option VALUE`.
struct Arguments {
    let command: String
    var positionals: [String] = []
    var options: [String: String] = [:]
    var flags: Set<String> = []

    /// Parses `arguments`; `valued` names options that take a value, `switches` those that do not.
    init(_ arguments: [String], command: String, valued: Set<String>, switches: Set<String>) throws {
        self.command = command
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--help" || argument == "-h" {
                flags.insert("--help")
            } else if valued.contains(argument) {
                guard index + 1 < arguments.count else { throw UsageError(message: "\(argument) needs a value", command: command) }
                options[argument] = arguments[index + 1]
                index += 1
            } else if switches.contains(argument) {
                flags.insert(argument)
            } else if argument.hasPrefix("--") {
                throw UsageError(message: "unknown option '\(argument)'", command: command)
            } else {
                positionals.append(argument)
            }
            index += 1
        }
    }

    func positional(_ index: Int, _ name: String) throws -> String {
        guard index < positionals.count else { throw UsageError(message: "missing \(name)", command: command) }
        return positionals[index]
    }

    func integer(_ option: String) throws -> Int? {
        guard let text = options[option] else { return nil }
        guard let value = Int(text), value >= 0 else {
            throw UsageError(message: "\(option) needs a non-negative whole number, not '\(text)'", command: command)
        }
        return value
    }

    func noExtraPositionals(_ count: Int) throws {
        if positionals.count > count {
            throw UsageError(message: "unexpected argument '\(positionals[count])'", command: command)
        }
    }
}

/// Writes to standard output and standard error.
enum Console {
    static func out(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    static func error(_ text: String) {
        FileHandle.standardError.write(Data(("cairn: " + text + "\n").utf8))
    }

    /// A progress line, only when standard error is a terminal and output is for a person.
    static func progress(_ text: String, json: Bool) {
        guard !json, isTerminal(2) else { return }
        FileHandle.standardError.write(Data(("\r\u{1B}[K" + text).utf8))
    }

    static func endProgress(json: Bool) {
        guard !json, isTerminal(2) else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}

/// JSON text with keys in the order given.
enum JSONText {
    static func string(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default:
                if scalar.value < 0x20 { result += String(format: "\\u%04x", scalar.value) } else { result.unicodeScalars.append(scalar) }
            }
        }
        return result + "\""
    }

    static func object(_ pairs: [(String, String)]) -> String {
        "{" + pairs.map { "\(string($0.0)): \($0.1)" }.joined(separator: ", ") + "}"
    }

    static func array(_ items: [String]) -> String { "[" + items.joined(separator: ", ") + "]" }

    static func number(_ value: Double) -> String {
        guard value.isFinite else { return string(value.isNaN ? "NaN" : (value > 0 ? "Infinity" : "-Infinity")) }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    static let dateStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// A value in the export format: dates ISO 8601, binary base64, decimals as strings,
    /// references as ids.
    static func value(_ value: Value) -> String {
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
        case .date(let v): return string(dateStyle.format(v))
        case .uuid(let v): return string(v.uuidString)
        case .url(let v): return string(v.absoluteString)
        case .decimal(let v): return string(v.description)
        case .reference(let raw): return string(RecordID(rawValue: raw).description)
        case .references(let raws): return array(raws.map { string(RecordID(rawValue: $0).description) })
        }
    }
}

/// Opens a store for a command, turning failures into a readable line.
func openStore(_ path: String, command: String) throws -> Store {
    guard FileManager.default.fileExists(atPath: path + "/MANIFEST") else {
        throw CairnError(.notFound, "no store at \(path)")
    }
    var options = StoreOptions()
    options.createIfMissing = false
    options.compaction = .manual
    return try Store.open(at: path, options: options)
}
