import CairnInterchange
import CairnStorage
import Cairn
import Foundation

/// A usage error: exit 2 with a line pointing at the command's help.
/// A `cairn` subcommand: its name on the command line, its help, and what it does with
/// the arguments that follow the name. A file each (`XCommand.swift`), each with its tests.
protocol Command {
    static var name: String { get }
    static var help: String { get }
    static func run(_ arguments: [String]) throws
}

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

/// How often a `--follow` command looks for the writer's new commits, in seconds.
let followInterval = 0.05

/// Opens an existing store for a command. Commands compact only when asked (`.manual`),
/// except those that write much, which compact as an app's store does (`cairn import`).
/// With `readOnly`, nothing in the directory changes (``StoreOptions/readOnly``).
func openStore(_ path: String, command: String, compaction: CompactionPolicy = .manual, readOnly: Bool = false) throws -> Store {
    guard FileManager.default.fileExists(atPath: path + "/MANIFEST") else {
        throw CairnError(.notFound, "no store at \(path)")
    }
    var options = StoreOptions()
    options.createIfMissing = false
    options.compaction = compaction
    options.readOnly = readOnly
    return try Store.open(at: path, options: options)
}
