import CairnInterchange
import CairnStorage
import Cairn
import Foundation

enum MigrateCommand: Command {
    static let name = "migrate"
    static let help = """
        USAGE: cairn migrate DIR --to SCHEMA.json [--dry-run] [--allow-data-loss] [--json]

        Migrates a store to the schema in a schema file, inferring the mapping: added and
        removed entities, attributes and relationships; renames through "renamingIdentifier";
        optional ↔ required with a default; widened numbers; indexes and uniqueness (existing
        data that violates a new constraint is listed and the migration refused). Atomic: a
        crash or error leaves the old store as it was. --dry-run prints what would change.

        A migration that would drop an attribute, relationship or entity that holds data is
        refused, with what and how many records, unless --allow-data-loss is given. A schema
        whose version is lower than the store's (an older model) is refused: the store
        keeps the highest model version that wrote it.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "migrate", valued: ["--to"], switches: ["--dry-run", "--json", "--allow-data-loss"])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        guard let schemaPath = args.options["--to"] else { throw UsageError(message: "--to is required", command: "migrate") }
        let schema = try SchemaJSON.load(schemaPath)
        guard FileManager.default.fileExists(atPath: directory + "/MANIFEST") else { throw CairnError(.notFound, "no store at \(directory)") }
        let json = args.flags.contains("--json")
        let stages = [MigrationStage(schema, allowingDataLoss: args.flags.contains("--allow-data-loss"))]
        let forecast = try Store.forecast(at: directory, to: stages)
        func render(_ forecast: MigrationForecast) {
            if json {
                Console.out(JSONText.object([("needed", forecast.isNeeded ? "true" : "false"), ("steps", JSONText.array(forecast.steps.map { step in
                    JSONText.object([("from", String(step.fromVersion)), ("to", String(step.toVersion)),
                                     ("changes", JSONText.array(step.changes.map(JSONText.string))),
                                     ("recordsTouched", JSONText.object(step.recordsTouched.sorted { $0.key < $1.key }.map { ($0.key, String($0.value)) })),
                                     ("losses", JSONText.array(step.losses.map { loss in
                                         JSONText.object([("entity", JSONText.string(loss.entity)),
                                                          ("property", loss.property.map(JSONText.string) ?? "null"),
                                                          ("records", String(loss.records))])
                                     }))])
                }))]))
                return
            }
            guard forecast.isNeeded else { return Console.out("the store already has this schema; nothing to do") }
            for step in forecast.steps {
                Console.out("version \(step.fromVersion) → \(step.toVersion):")
                for change in step.changes { Console.out("  \(change)") }
                for (entity, count) in step.recordsTouched.sorted(by: { $0.key < $1.key }) { Console.out("  rewrites \(count) \(entity) records") }
                for loss in step.losses { Console.out("  drops \(loss)") }
            }
        }
        render(forecast)
        if args.flags.contains("--dry-run") || !forecast.isNeeded { return }
        if !forecast.losses.isEmpty && !args.flags.contains("--allow-data-loss") {
            throw CairnError(.schemaMismatch, "migration refused: it would drop data (above); give --allow-data-loss to drop it")
        }
        try Store.migrate(at: directory, to: stages) { done, total in
            Console.progress("migrated \(done) of \(total) records", json: json)
        }
        Console.endProgress(json: json)
        if !json { Console.out("migrated \(directory)") }
    }
}
