import CairnStorage
import Cairn
import Foundation

enum SchemaCommand: Command {
    static let name = "schema"
    static let help = """
        USAGE: cairn schema DIR

        Prints the schema stored in a store, in the schema-file format of `cairn create`.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "schema", valued: [], switches: ["--json"])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        let store = try openStore(directory, command: "schema", readOnly: true)
        defer { try? store.close() }
        Console.out(SchemaJSON.render(store.schema))
    }
}
