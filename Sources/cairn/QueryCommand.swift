import CairnInterchange
import CairnStorage
import Cairn
import Foundation

enum QueryCommand: Command {
    static let name = "query"
    static let help = """
        USAGE: cairn query DIR ENTITY [PREDICATE] [--sort KEY,-KEY2] [--limit N] [--offset N] [--count] [--follow]

        Fetches objects of ENTITY matching an NSPredicate-format PREDICATE (for example
        "age >= 18 AND name BEGINSWITH[c] 'a'") and prints them as NDJSON in the export
        format. --sort takes keys, '-' for descending, '~' for case-insensitive order.
        --count prints only the number.
        With --follow, it goes on as another process commits, until interrupted: after
        each commit that changes the result, it prints the line of each object that
        entered the result or changed, and {"entity": …, "id": …, "removed": true} for each
        that left it (with --count, the new number). The store is read as a reader.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "query", valued: ["--sort", "--limit", "--offset"], switches: ["--count", "--json", "--explain", "--follow"])
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
        let follow = args.flags.contains("--follow")
        if args.flags.contains("--count") {
            var shown = try context.count(for: request)
            Console.out(String(shown))
            while follow {
                if try followed(coordinator, context) {
                    let count = try context.count(for: request)
                    if count != shown { Console.out(String(count)) }
                    shown = count
                }
            }
            return
        }
        func lines() throws -> [(RecordID, String)] {
            try context.fetch(request).map { object in
                (object.objectID.recordID, RecordJSON.line(entity: object.entity, id: object.objectID.recordID,
                    values: object.entity.attributes.indices.map { object[object.entity.attributes[$0].name] }
                        + object.entity.relationships.map { object[$0.name] }))
            }
        }
        var shown = try lines()
        let sink = try LineSink(path: nil)
        for (_, line) in shown { try sink.write(line) }
        try sink.finish()
        while follow {
            guard try followed(coordinator, context) else { continue }
            let now = try lines()
            let before = Dictionary(shown, uniquingKeysWith: { first, _ in first })
            for (id, line) in now where before[id] != line { Console.out(line) }
            let kept = Set(now.map(\.0))
            for (id, _) in shown where !kept.contains(id) {
                Console.out(JSONText.object([("entity", JSONText.string(entityName)), ("id", JSONText.string(id.description)),
                                             ("removed", "true")]))
            }
            shown = now
        }
    }

    /// Waits for the writer's next commits and takes them into `context`; whether any came.
    private static func followed(_ coordinator: Coordinator, _ context: Context) throws -> Bool {
        guard try !coordinator.advance().isEmpty else {
            Thread.sleep(forTimeInterval: followInterval)
            return false
        }
        context.processExternalChanges()
        return true
    }
}
