import CairnStorage
import Cairn
import Foundation

enum CreateCommand: Command {
    static let name = "create"
    static let help = """
        USAGE: cairn create DIR --schema SCHEMA.json

        Creates a new, empty store in DIR with the entities of a schema file. The format is
        described in the README ("Schema files"); `cairn schema DIR` prints it for a store.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "create", valued: ["--schema"], switches: [])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        guard let schemaPath = args.options["--schema"] else { throw UsageError(message: "--schema is required", command: "create") }
        let schema = try SchemaJSON.load(schemaPath)
        // (Whether a store exists is decided under the directory's lock: of several
        // creates at once, one succeeds.)
        let store = try Store.create(at: directory, schema: schema)
        try store.close()
        Console.out("created store at \(directory) with \(schema.entities.count) entities")
    }
}
