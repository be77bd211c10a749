import CairnStorage
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
      demo [--store DIR]             A guided tour into a fresh (or the given) store.
      create DIR --schema FILE       Make an empty store from a schema file.
      schema DIR                     Print a store's schema.
      stats DIR [--json]             Counts, sizes, garbage ratio, last transaction.
      verify DIR [--json]            Check checksums, records, references, uniqueness.
      compact DIR [--json]           Fold the log into a new snapshot.
      export DIR [--entity E] [--out FILE]          Records as NDJSON.
      import DIR [--in FILE] [--batch N]            NDJSON into a store.
      query DIR ENTITY [PREDICATE] [--sort K,-K] [--limit N] [--offset N] [--count]
      history DIR [--since SEQ] [--json]            Transactions in the log.
      repair DIR                     Salvage a store that refuses to open.
      migrate DIR --to FILE [--dry-run]             Migrate to a schema file's model.

    Exit status: 0 ok, 1 failure or damage found, 2 usage error.

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
case let name?:
    let commands: [any Command.Type] = [
        CreateCommand.self, SchemaCommand.self, StatsCommand.self, VerifyCommand.self, CompactCommand.self,
        ExportCommand.self, ImportCommand.self, QueryCommand.self, HistoryCommand.self, RepairCommand.self,
        MigrateCommand.self,
    ]
    guard let command = commands.first(where: { $0.name == name }) else {
        fail("unknown command '\(name)'; see 'cairn --help'", code: 2)
    }
    unblockTerminationSignals()  // `--follow` runs until interrupted, however it was started
    do {
        try command.run(Array(arguments.dropFirst()))
        exit(0)
    } catch let error as UsageError {
        fail(error.description, code: 2)
    } catch is Failure {
        exit(1)
    } catch {
        fail("\(error)", code: 1)
    }
}
