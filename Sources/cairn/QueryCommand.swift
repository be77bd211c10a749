import CairnInterchange
import CairnStorage
import Cairn
import Foundation

enum QueryCommand: Command {
    static let name = "query"
    static let help = """
        USAGE: cairn query DIR ENTITY [PREDICATE] [--sort KEY,-KEY2] [--limit N] [--offset N] [--count]

        Fetches objects of ENTITY matching an NSPredicate-format PREDICATE (for example
        "age >= 18 AND name BEGINSWITH[c] 'a'") and prints them as NDJSON in the export
        format. --sort takes keys, '-' for descending, '~' for case-insensitive order.
        --count prints only the number.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "query", valued: ["--sort", "--limit", "--offset"], switches: ["--count", "--json", "--explain"])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        let entityName = try args.positional(1, "the entity")
        try args.noExtraPositionals(3)
        let format = args.positionals.count > 2 ? args.positionals[2] : nil
        let stored = try openStore(directory, command: "query", readOnly: true).schemaClosing()
        guard stored.entity(named: entityName) != nil else {
            throw CairnError(.invalidArgument, "the store has no entity \(entityName) (it has \(stored.entities.map(\.name).joined(separator: ", ")))")
        }
        var options = StoreOptions()
        options.createIfMissing = false
        options.compaction = .manual
        options.readOnly = true
        let model = try Model(entities: stored.entities.sorted { $0.number < $1.number }, version: stored.version)
        let coordinator = try Coordinator(path: directory, schema: model.schema, options: options)
        defer { try? coordinator.close() }
        let context = Context(coordinator: coordinator, model: model)
        var request = FetchQuery<ManagedObject>(entityName: entityName)
        if let format {
            do { request.fetchPredicate = try FetchPredicate(format: format) } catch let error as CairnError {
                throw UsageError(message: error.message, command: "query")
            }
        }
        request.sortKeys = (args.options["--sort"] ?? "").split(separator: ",").map { SortKey(parsing: String($0)) }
        request.fetchLimit = try args.integer("--limit")
        request.fetchOffset = try args.integer("--offset") ?? 0
        if args.flags.contains("--explain") { Console.error("plan: \(try context.explain(request))") }
        if args.flags.contains("--count") {
            Console.out(String(try context.count(for: request)))
            return
        }
        let sink = try LineSink(path: nil)
        for object in try context.fetch(request) {
            try sink.write(RecordJSON.line(entity: object.entity, id: object.objectID.recordID, values: object.entity.attributes.indices.map { object[object.entity.attributes[$0].name] }
                + object.entity.relationships.map { object[$0.name] }))
        }
        try sink.finish()
    }
}
