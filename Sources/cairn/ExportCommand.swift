import Cairn
import Foundation

/// Collects output lines and writes them to a file or standard output in chunks.
final class LineSink {
    private let handle: FileHandle
    private var buffer: [UInt8] = []

    init(path: String?) throws {
        if let path {
            guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
                throw CairnError(.io, "cannot write \(path)")
            }
            self.handle = handle
        } else {
            handle = FileHandle.standardOutput
        }
    }

    func write(_ line: String) throws {
        try write { $0.append(contentsOf: line.utf8) }
    }

    /// Appends a line that `make` writes (without its newline) into the buffer.
    func write(_ make: (inout [UInt8]) throws -> Void) throws {
        try make(&buffer)
        buffer.append(0x0A)
        if buffer.count > 1 << 20 { try flush() }
    }

    /// Writes what is buffered; a failed write (a full disk, a closed pipe) is an `.io`
    /// error, not a trap.
    func flush() throws {
        do { try handle.write(contentsOf: buffer) } catch {
            throw CairnError(.io, "cannot write the output: \(error.localizedDescription)")
        }
        buffer.removeAll(keepingCapacity: true)
    }
}

enum ExportCommand {
    static let help = """
        USAGE: cairn export DIR [--entity NAME] [--out FILE]

        Writes every record (or those of one entity) as NDJSON, one object per line:
        {"entity": "Person", "id": "E1-3", "username": "alice", "age": 30, "dvds": ["E2-5"]}
        Dates are ISO 8601 strings, binary base64, decimals strings, absent values null.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "export", valued: ["--entity", "--out"], switches: [])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        let store = try openStore(directory, command: "export")
        defer { try? store.close() }
        var entities = store.schema.entities.sorted { $0.number < $1.number }
        if let name = args.options["--entity"] {
            guard let entity = store.schema.entity(named: name) else {
                throw CairnError(.invalidArgument, "the store has no entity \(name) (it has \(entities.map(\.name).joined(separator: ", ")))")
            }
            entities = [entity]
        }
        let sink = try LineSink(path: args.options["--out"])
        let json = args.options["--out"] == nil
        var written = 0
        for entity in entities {
            try store.scan(entity: entity.number) { id, body in
                // Checked against the schema, as verify and query check what they read: a
                // short record is an error naming it, not a line of nulls.
                let values: [Value]
                do { values = try Store.decodeRecord(body, id: id, entity: entity) } catch let error as CairnError {
                    throw CairnError(error.code, "\(entity.name) \(id): \(error.message)", path: error.path, offset: error.offset)
                }
                try sink.write { RecordJSON.appendLine(entity: entity, id: id, values: values, to: &$0) }
                written += 1
                if written % 10_000 == 0 { Console.progress("exported \(written) records", json: json) }
            }
        }
        try sink.flush()
        Console.endProgress(json: json)
        if args.options["--out"] != nil { Console.out("exported \(written) records to \(args.options["--out"]!)") }
    }
}

enum ImportCommand {
    static let help = """
        USAGE: cairn import DIR [--in FILE] [--batch N]

        Reads NDJSON in the export format into an existing store. A line without "id"
        makes a new object; ids and references resolve within the file (an id already in
        the store gets a new one). Commits every N lines (default 1000) durably and prints
        the number committed so far. A bad line stops the import with its line number and
        the reason; everything committed before it stays. The store compacts itself as
        the import goes, once its log is over 16 MB and larger than its snapshot.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "import", valued: ["--in", "--batch"], switches: [])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        let batch = max(1, try args.integer("--batch") ?? 1000)
        let data: Data
        if let path = args.options["--in"] {
            guard let contents = FileManager.default.contents(atPath: path) else { throw CairnError(.notFound, "cannot read \(path)") }
            data = contents
        } else {
            data = FileHandle.standardInput.readDataToEndOfFile()
        }
        // Compacting as an app's store does: a large import otherwise left all it wrote in
        // the log, which every open then replays (1M records: 0.62 s and 263 MB, against
        // 10 ms and 26 MB once compacted).
        let store = try openStore(directory, command: "import", compaction: .default)
        defer { try? store.close() }
        try data.withUnsafeBytes { try importLines(in: $0, into: store, batch: batch) }
    }

    /// The import of `text`'s lines, in two passes over the bytes: the first reads each
    /// line's entity and id (so references, forward ones too, resolve) and keeps only
    /// where the line is; the second parses each line again for its values, in batches.
    /// (Keeping every parsed line between the passes took about 1 KB a line.)
    private static func importLines(in text: UnsafeRawBufferPointer, into store: Store, batch: Int) throws {
        let schema = store.schema
        var places: [(number: Int, range: Range<Int>, id: RecordID)] = []
        var ids: [String: RecordID] = [:]
        var used = Set<RecordID>()
        // A line that does not parse stops the import there: the lines before it are
        // still imported (and committed), then the error is reported.
        var stop: CairnError?
        var start = 0, number = 0
        while start < text.count {
            var end = start
            while end < text.count, text[end] != 0x0A { end += 1 }
            number += 1
            let range = start..<end
            start = end + 1
            let line = UnsafeRawBufferPointer(rebasing: text[range])
            if line.allSatisfy(JSONText.isSpace) { continue }
            func bad(_ reason: String) -> CairnError { CairnError(.invalidArgument, "line \(number): \(reason)") }
            let parsed: RecordJSON.ParsedLine
            do { parsed = try RecordJSON.parse(utf8: line, schema: schema) } catch let error as CairnError {
                stop = bad(error.message)
                break
            }
            let entity = parsed.entity
            var id: RecordID
            if let given = parsed.id {
                if let literal = RecordID(given), literal.entity == entity.number, !store.contains(literal), !used.contains(literal) {
                    id = literal
                } else {
                    id = try store.allocateID(entity: entity.number)
                }
                guard ids[given] == nil else {
                    stop = bad("id \(given) appears twice in the file")
                    break
                }
                ids[given] = id
            } else {
                id = try store.allocateID(entity: entity.number)
            }
            used.insert(id)
            places.append((number, range, id))
        }

        // Pass 2: values, in batches.
        var changes: [Change] = []
        var committed = 0
        for (number, range, id) in places {
            let values: [Value]
            do {
                // (The line parsed in the first pass: it parses the same again.)
                let line = try RecordJSON.parse(utf8: UnsafeRawBufferPointer(rebasing: text[range]), schema: schema)
                values = try RecordJSON.values(of: line) { text in
                    if let mapped = ids[text] { return mapped.rawValue }
                    if let literal = RecordID(text), store.contains(literal) { return literal.rawValue }
                    throw CairnError(.invalidArgument, "\(text) is neither in the file nor in the store")
                }
            } catch let error as CairnError {
                // As for a line that does not parse: the lines before it are imported.
                stop = CairnError(error.code, "line \(number): \(error.message)")
                break
            }
            changes.append(.put(id, values))
            if changes.count >= batch {
                committed += try commit(&changes, store: store, line: number)
                Console.out("committed \(committed)")
            }
        }
        if !changes.isEmpty {
            committed += try commit(&changes, store: store, line: places.last?.number ?? 0)
            Console.out("committed \(committed)")
        }
        if let stop { throw report(stop) }
        Console.out("imported \(committed) records")
    }

    private static func commit(_ changes: inout [Change], store: Store, line: Int) throws -> Int {
        do { try store.commit(changes, durability: .durable) } catch let error as CairnError {
            throw report(CairnError(error.code, "batch ending at line \(line): \(error.message)"))
        }
        defer { changes.removeAll() }
        return changes.count
    }

    private static func report(_ error: CairnError) -> Error {
        Console.error(error.message)
        return Failure()
    }
}
