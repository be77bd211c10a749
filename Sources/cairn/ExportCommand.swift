import CairnInterchange
import CairnStorage
import Cairn
import Foundation

/// Collects output lines and writes them to standard output, or to a file, in chunks. A
/// file is written under a temporary name beside it and renamed over it only by
/// ``finish()``: an export that fails leaves the file as it was, never a part of the store.
final class LineSink {
    private let handle: FileHandle?
    /// For a file: the file being written, where it is written and its final name.
    private var file: (handle: any StorageFile, temporary: String, path: String)?
    private var written = 0
    private var buffer: [UInt8] = []
    private let fileSystem = POSIXFileSystem()

    init(path: String?) throws {
        guard let path else {
            handle = FileHandle.standardOutput
            return
        }
        handle = nil
        let temporary = path + ".partial-\(ProcessInfo.processInfo.processIdentifier)"
        file = (try fileSystem.open(temporary, create: true, truncate: true), temporary, path)
    }

    deinit {
        // Unfinished: the partial file goes, and the one at the path stays as it was.
        if let file {
            file.handle.close()
            try? fileSystem.remove(file.temporary)
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
        if let file {
            try file.handle.write(buffer, at: Int64(written))
        } else {
            do { try handle?.write(contentsOf: buffer) } catch {
                throw CairnError(.io, "cannot write the output: \(error.localizedDescription)")
            }
        }
        written += buffer.count
        buffer.removeAll(keepingCapacity: true)
    }

    /// Writes what is buffered and, for a file, syncs it and renames it into place (then
    /// syncs its directory): the file at the path is the whole output from then on.
    func finish() throws {
        try flush()
        guard let file else { return }
        try file.handle.sync()
        file.handle.close()
        try fileSystem.rename(file.temporary, file.path)
        self.file = nil
        let directory = (file.path as NSString).deletingLastPathComponent
        try fileSystem.syncDirectory(directory.isEmpty ? "." : directory)
    }
}

enum ExportCommand: Command {
    static let name = "export"
    static let help = """
        USAGE: cairn export DIR [--entity NAME] [--out FILE] [--as-of TOKEN]

        Writes every record (or those of one entity) as NDJSON, one object per line:
        {"entity": "Person", "id": "E1-3", "username": "alice", "age": 30, "dvds": ["E2-5"]}
        Dates are ISO 8601 strings, binary base64, decimals strings, absent values null.

        --as-of TOKEN exports the state just after that transaction (a history token,
        STOREID:SEQUENCE, as `cairn history --json` prints them, or a sequence number):
        one since the last compaction, or one the store's kept history still holds.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "export", valued: ["--entity", "--out", "--as-of"], switches: [])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        let store = try openStore(directory, command: "export", readOnly: true)
        defer { try? store.close() }
        let past = try HistoryCommand.sequence(args.options["--as-of"], store: store, option: "--as-of", command: "export")
        let generation = try past.map { try store.pastGeneration(at: $0, by: "cairn export") }
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
            try store.scan(entity: entity.number, at: generation) { id, record in
                // Checked against the schema, as verify and query check what they read: a
                // short record is an error naming it, not a line of nulls.
                let values: [Value]
                do { values = try store.decodeLocated(record, id: id, entity: entity) } catch let error as CairnError {
                    throw CairnError(error.code, "\(entity.name) \(id): \(error.message)", path: error.path, offset: error.offset)
                }
                try sink.write { RecordJSON.appendLine(entity: entity, id: id, values: values, to: &$0) }
                written += 1
                if written % 10_000 == 0 { Console.progress("exported \(written) records", json: json) }
            }
        }
        try sink.finish()
        Console.endProgress(json: json)
        if let out = args.options["--out"] { Console.out("exported \(written) records to \(out)") }
    }
}
