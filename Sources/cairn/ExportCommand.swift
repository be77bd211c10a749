@_spi(Storage) import CairnStorage
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

enum ExportCommand: Command {
    static let name = "export"
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
