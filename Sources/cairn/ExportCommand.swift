import Cairn
import Foundation

/// The NDJSON line format of export, import and query: `entity`, `id`, then every
/// attribute and relationship in schema order (relationships as ids).
enum NDJSON {
    static func line(entity: EntityDescription, id: RecordID, values: [Value]) -> String {
        var pairs: [(String, String)] = [("entity", JSONText.string(entity.name)), ("id", JSONText.string(id.description))]
        for (index, attribute) in entity.attributes.enumerated() {
            pairs.append((attribute.name, JSONText.value(index < values.count ? values[index] : .null)))
        }
        for (offset, relationship) in entity.relationships.enumerated() {
            let value = entity.attributes.count + offset < values.count ? values[entity.attributes.count + offset] : .null
            pairs.append((relationship.name, relationship.isToMany && value.isNull ? "[]" : JSONText.value(value)))
        }
        return JSONText.object(pairs)
    }
}

/// Collects output lines and writes them to a file or standard output in chunks.
final class LineSink {
    private let handle: FileHandle
    private var buffer = Data()

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

    func write(_ line: String) {
        buffer.append(Data((line + "\n").utf8))
        if buffer.count > 1 << 20 { flush() }
    }

    func flush() {
        handle.write(buffer)
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
        defer { store.close() }
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
                sink.write(NDJSON.line(entity: entity, id: id, values: try ValueCoding.decode(body)))
                written += 1
                if written % 10_000 == 0 { Console.progress("exported \(written) records", json: json) }
            }
        }
        sink.flush()
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
        the reason; everything committed before it stays.
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
        let store = try openStore(directory, command: "import")
        defer { store.close() }
        let schema = store.schema
        let text = String(decoding: data, as: UTF8.self)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)

        // Pass 1: every line's entity and id, so references (forward ones too) resolve.
        var parsed: [(number: Int, entity: EntityDescription, object: [String: Any], id: RecordID)] = []
        var ids: [String: RecordID] = [:]
        var used = Set<RecordID>()
        // A line that does not parse stops the import there: the lines before it are
        // still imported (and committed), then the error is reported.
        var stop: CairnError?
        for (index, line) in lines.enumerated() where !line.trimmingCharacters(in: .whitespaces).isEmpty {
            let number = index + 1
            func bad(_ reason: String) -> CairnError { CairnError(.invalidArgument, "line \(number): \(reason)") }
            guard let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] else {
                stop = bad("not a JSON object")
                break
            }
            guard let name = object["entity"] as? String, let entity = schema.entity(named: name) else {
                stop = bad("missing or unknown \"entity\" \(JSONValue.describe(object["entity"] ?? NSNull()))")
                break
            }
            var id: RecordID
            if let given = object["id"] as? String {
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
            parsed.append((number, entity, object, id))
        }

        // Pass 2: values, in batches.
        var changes: [Change] = []
        var committed = 0
        for (number, entity, object, id) in parsed {
            func bad(_ reason: String) -> CairnError { CairnError(.invalidArgument, "line \(number): \(reason)") }
            var values: [Value] = []
            for attribute in entity.attributes {
                let raw = object[attribute.name]
                if raw == nil || raw is NSNull {
                    if let fallback = attribute.defaultValue { values.append(fallback); continue }
                    guard attribute.isOptional else { throw report(bad("\(entity.name).\(attribute.name) is required")) }
                    values.append(.null)
                    continue
                }
                do { values.append(try JSONValue.value(raw!, type: attribute.type)) } catch let error as CairnError {
                    throw report(bad("\(entity.name).\(attribute.name): \(error.message)"))
                }
            }
            for relationship in entity.relationships {
                func resolve(_ raw: Any) throws -> UInt64 {
                    guard let text = raw as? String else { throw bad("\(entity.name).\(relationship.name): expected an id string, found \(JSONValue.describe(raw))") }
                    if let mapped = ids[text] { return mapped.rawValue }
                    if let literal = RecordID(text), store.contains(literal) { return literal.rawValue }
                    throw bad("\(entity.name).\(relationship.name): \(text) is neither in the file nor in the store")
                }
                let raw = object[relationship.name]
                do {
                    if relationship.isToMany {
                        guard let list = raw as? [Any] ?? (raw == nil || raw is NSNull ? [] : nil) else {
                            throw bad("\(entity.name).\(relationship.name): expected a list of ids")
                        }
                        values.append(.references(try list.map(resolve)))
                    } else if raw == nil || raw is NSNull {
                        values.append(.null)
                    } else {
                        values.append(.reference(try resolve(raw!)))
                    }
                } catch let error as CairnError { throw report(error) }
            }
            changes.append(.put(id, values))
            if changes.count >= batch {
                committed += try commit(&changes, store: store, line: number)
                Console.out("committed \(committed)")
            }
        }
        if !changes.isEmpty {
            committed += try commit(&changes, store: store, line: parsed.last?.number ?? 0)
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
