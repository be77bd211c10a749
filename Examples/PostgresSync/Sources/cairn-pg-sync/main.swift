// cairn-pg-sync: ships a Cairn store's change feed to PostgreSQL through `psql`.
//
//     cairn-pg-sync generate DIR COUNT SEED     an app's writes: COUNT changes in saves of 10
//     cairn-pg-sync sync DIR DATABASE [UNTIL]   the consumer: from the token kept in PostgreSQL
//                                               on, until the store's transaction UNTIL (else forever)
//     cairn-pg-sync compare EXPORT DATABASE     `cairn export` of the store against the table
//
// The consumer applies each batch of transactions and stores the token it reached in one
// PostgreSQL transaction, so a kill -9 at any point leaves the table and the token in
// step: it resumes from the token, and re-applying a change is harmless (rows are
// upserted by object ID with the object's current values; deletes by object ID).
import Cairn
import Foundation

/// The app's model: notes with a key, a count and an optional text.
final class Note: ManagedObject {
    @Attribute(indexed: true) var key: String = ""
    @Attribute var count: Int64 = 0
    @Attribute var text: String? = nil
    override class var preservedInHistoryOnDeletion: Set<String> { ["key"] }
}

struct Failure: Error, CustomStringConvertible {
    let description: String
}

/// Runs `psql` on `database` with `sql` on its standard input, all or nothing
/// (`ON_ERROR_STOP`); returns what it printed (tab-separated, unaligned).
@discardableResult
func psql(_ database: String, _ sql: String) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["psql", "-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-d", database]
    let input = Pipe(), output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    try process.run()
    input.fileHandleForWriting.write(Data(sql.utf8))
    try input.fileHandleForWriting.close()
    let printed = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw Failure(description: "psql failed (status \(process.terminationStatus))") }
    return String(decoding: printed, as: UTF8.self)
}

/// A SQL string literal.
func literal(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }

func open(_ directory: String, readOnly: Bool) throws -> Container {
    try Container(name: "Notes", entities: [Note.self], storage: .onDisk(URL(fileURLWithPath: directory)),
                  compaction: .automatic(ratio: 0.5, minimumLogBytes: 64 << 10), history: .unlimited, readOnly: readOnly)
}

/// The app: `count` random inserts, updates and deletes, ten to a save, compacting as it goes.
@MainActor func generate(_ directory: String, count: Int, seed: UInt64) throws {
    let container = try open(directory, readOnly: false)
    let context = container.mainContext
    context.transactionAuthor = "app"
    var state = seed
    func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    var notes: [Note] = try context.fetch(FetchQuery(Note.self))
    var made = notes.count
    for change in 0..<count {
        switch notes.count < 20 ? 0 : next() % 10 {
        case 0...4:
            let note = Note(context: context)
            note.key = "n\(seed)-\(made)"
            note.count = Int64(next() % 1000)
            note.text = next() % 3 == 0 ? nil : "text 'quoted' \(made)"
            notes.append(note)
            made += 1
        case 5...7:
            let note = notes[Int(next() % UInt64(notes.count))]
            note.count += 1
            if next() % 2 == 0 { note.text = "changed \(change)" }
        default:
            let index = Int(next() % UInt64(notes.count))
            context.delete(notes.remove(at: index))
        }
        if change % 10 == 9 { try context.save() }
    }
    try context.save()
    print(container.historyToken)
    try container.close()
}

/// The consumer: applies the store's changes after the token kept in PostgreSQL, batch by
/// batch, each with its new token in one transaction; stops at transaction `until`.
@MainActor func sync(_ directory: String, database: String, until: UInt64?) async throws {
    try psql(database, """
        CREATE TABLE IF NOT EXISTS notes (id text PRIMARY KEY, key text NOT NULL, count bigint NOT NULL, text text);
        CREATE TABLE IF NOT EXISTS cairn_sync_state (store text PRIMARY KEY, token text NOT NULL);
        """)
    let container = try open(directory, readOnly: true)
    let kept = try psql(database, "SELECT token FROM cairn_sync_state WHERE store = \(literal(container.historyToken.storeID));")
        .trimmingCharacters(in: .whitespacesAndNewlines)
    var token = HistoryToken(kept) ?? HistoryToken(storeID: container.historyToken.storeID, sequence: 0)
    var expiredTries = 0
    while until.map({ token.sequence < $0 }) ?? true {
        _ = try container.advance()
        let changes: HistoryChanges
        do {
            changes = try container.changes(since: token)
        } catch let error as CairnError where error.code == .historyExpired && expiredTries < 3 {
            // The writer compacted between the advance and the read: advance again.
            expiredTries += 1
            continue
        }
        expiredTries = 0
        guard !changes.transactions.isEmpty else {
            try await Task.sleep(for: .milliseconds(20))
            continue
        }
        var sql = "BEGIN;\n"
        for transaction in changes.transactions {
            for id in transaction.deleted {
                sql += "DELETE FROM notes WHERE id = \(literal(id.uriRepresentation));\n"
            }
        }
        for (id, values) in changes.current {
            guard case .string(let key)? = values["key"], case .int64(let count)? = values["count"] else { continue }
            let text: String
            if case .string(let value)? = values["text"] { text = literal(value) } else { text = "NULL" }
            sql += "INSERT INTO notes (id, key, count, text) VALUES (\(literal(id.uriRepresentation)), \(literal(key)), \(count), \(text)) "
                + "ON CONFLICT (id) DO UPDATE SET key = EXCLUDED.key, count = EXCLUDED.count, text = EXCLUDED.text;\n"
        }
        sql += """
            INSERT INTO cairn_sync_state (store, token) VALUES (\(literal(changes.token.storeID)), \(literal(changes.token.description)))
            ON CONFLICT (store) DO UPDATE SET token = EXCLUDED.token;
            COMMIT;\n
            """
        try psql(database, sql)
        token = changes.token
        // (Written at once: a consumer killed with SIGKILL says how far it got.)
        FileHandle.standardOutput.write(Data("synced through \(token.sequence)\n".utf8))
    }
}

/// `cairn export`'s notes against the table, row by row; throws on the first difference.
func compare(export: String, database: String) throws {
    var expected: [String] = []
    let text = try String(contentsOfFile: export, encoding: .utf8)
    for line in text.split(separator: "\n") {
        guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
              object["entity"] as? String == "Note", let id = object["id"] as? String,
              let key = object["key"] as? String, let count = (object["count"] as? NSNumber)?.int64Value else { continue }
        let uri = "cairn:///Note/" + id  // (the table keeps object URIs)
        expected.append([uri, key, String(count), (object["text"] as? String) ?? ""].joined(separator: "\t"))
    }
    let rows = try psql(database, "SELECT id, key, count, coalesce(text, '') FROM notes;")
        .split(separator: "\n").map(String.init)
    let (want, have) = (expected.sorted(), rows.sorted())
    for (a, b) in zip(want, have) where a != b { throw Failure(description: "differ: store \(a) / table \(b)") }
    guard want.count == have.count else { throw Failure(description: "\(want.count) notes in the store, \(have.count) rows in the table") }
    print("\(want.count) notes equal, row by row")
}

let arguments = CommandLine.arguments
do {
    switch arguments.dropFirst().first {
    case "generate" where arguments.count == 5:
        try generate(arguments[2], count: Int(arguments[3]) ?? 0, seed: UInt64(arguments[4]) ?? 1)
    case "sync" where arguments.count >= 4:
        try await sync(arguments[2], database: arguments[3], until: arguments.count > 4 ? UInt64(arguments[4]) : nil)
    case "compare" where arguments.count == 4:
        try compare(export: arguments[2], database: arguments[3])
    default:
        FileHandle.standardError.write(Data("usage: cairn-pg-sync generate DIR COUNT SEED | sync DIR DATABASE [UNTIL] | compare EXPORT DATABASE\n".utf8))
        exit(2)
    }
} catch {
    FileHandle.standardError.write(Data("cairn-pg-sync: \(error)\n".utf8))
    exit(1)
}
