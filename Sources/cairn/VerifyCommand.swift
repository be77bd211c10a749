import CairnInterchange
import CairnStorage
import Cairn
import Foundation

enum VerifyCommand: Command {
    static let name = "verify"
    static let help = """
        USAGE: cairn verify DIR [--json]

        Checks every checksum, decodes every record (every version still in the log too),
        and checks that references point at existing objects, that inverses agree and that
        uniqueness holds. Each problem is reported (with file and offset for damaged bytes).
        Exit status 1 if any. Changes nothing: a torn log tail (left by a crash) is
        reported, with what the next open will cut, not cut.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "verify", valued: [], switches: ["--json"])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        let json = args.flags.contains("--json")
        let store: Store
        do { store = try openStore(directory, command: "verify", readOnly: true) } catch let error as CairnError {
            if json {
                Console.out(JSONText.object([("ok", "false"), ("problems", JSONText.array([JSONText.string(error.description)]))]))
            } else {
                // Only damage is called damage: a locked or missing store is not damaged.
                Console.error("\(error.code == .corrupt ? "damage" : "cannot verify"): \(error)")
            }
            throw Failure()
        }
        defer { try? store.close() }
        Console.progress("verifying…", json: json)
        let problems = store.verify()
        Console.endProgress(json: json)
        let records = store.schema.entities.reduce(0) { $0 + store.count(entity: $1.number) }
        // A torn tail is what a crash leaves: not damage, but said, since the next open cuts it.
        let recovery = store.recovery
        let torn = recovery.truncatedAt.map {
            "the log's last \(recovery.truncatedBytes) bytes from offset \($0) are an unfinished write (\(recovery.truncationReason ?? "torn frame")), which the next open will cut"
        }
        if json {
            Console.out(JSONText.object([("ok", problems.isEmpty ? "true" : "false"), ("records", String(records)),
                                         ("problems", JSONText.array(problems.map { JSONText.string($0.description) })),
                                         ("tornTail", torn.map(JSONText.string) ?? "null")]))
        } else if problems.isEmpty {
            Console.out("ok: \(records) records, every checksum and reference checked")
            if let torn { Console.out("note: \(torn)") }
        } else {
            if let torn { Console.out("note: \(torn)") }
            for problem in problems { Console.out("problem: \(problem)") }
            Console.out("\(problems.count) problem(s) in \(records) records")
        }
        if !problems.isEmpty { throw Failure() }
    }
}
