import Cairn
import Foundation

/// The `cairn` command-line tool: one file per command. Exit codes: 0 ok, 1 failure or
/// damage found, 2 usage error.
let version = "0.1.0"
let usage = """
    cairn \(version) — tools for Cairn stores

    USAGE: cairn <command> [options]
           cairn --help | --version

    COMMANDS:
      demo [--store DIR]   A guided tour: a Person ↔ DVD collection, a persistent queue,
                           chained writes. Uses a fresh temporary store unless --store is given.

    Coming: create, schema, stats, verify, compact, export, import, query, history, repair, migrate.

    OPTIONS:
      -h, --help       Show this help (also after a command: cairn demo --help).
      --version        Show the version (and the store format version).
    """

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("cairn: \(message)\n".utf8))
    exit(code)
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case nil, "-h", "--help", "help":
    print(usage)
    exit(0)
case "--version":
    print("cairn \(version) (store format version \(FileHeader.currentVersion))")
    exit(0)
case "demo":
    let options = Array(arguments.dropFirst())
    if options.contains("--help") || options.contains("-h") {
        print(Demo.help)
        exit(0)
    }
    var store: String?
    var index = 0
    while index < options.count {
        switch options[index] {
        case "--store":
            guard index + 1 < options.count else { fail("--store needs a directory; see 'cairn demo --help'", code: 2) }
            store = options[index + 1]
            index += 2
        default:
            fail("unknown option '\(options[index])' for demo; see 'cairn demo --help'", code: 2)
        }
    }
    do {
        try await Demo.run(storeDirectory: store)
        exit(0)
    } catch {
        fail("\(error)", code: 1)
    }
case let other?:
    fail("unknown command '\(other)'; see 'cairn --help'", code: 2)
}
