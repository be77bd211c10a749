import Cairn
import Foundation

/// The `cairn` command-line tool. Commands arrive with their own issue; for now it
/// answers `--help` and `--version`.
let version = "0.1.0"
let usage = """
    cairn \(version) — tools for Cairn stores

    USAGE: cairn <command> [options]
           cairn --help | --version

    Commands (coming): create, schema, stats, verify, compact, export, import,
    query, history, repair, migrate, demo.

    OPTIONS:
      -h, --help       Show this help.
      --version        Show the version (and the store format version).
    """

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case nil, "-h", "--help", "help":
    print(usage)
    exit(0)
case "--version":
    print("cairn \(version) (store format version \(FileHeader.currentVersion))")
    exit(0)
case let other?:
    FileHandle.standardError.write(Data("cairn: unknown command '\(other)'; see 'cairn --help'\n".utf8))
    exit(2)
}
