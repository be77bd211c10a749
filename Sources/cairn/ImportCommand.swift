@_spi(Storage) import CairnStorage
import Cairn
import Foundation

/// `cairn import`: NDJSON lines in the export format, made objects of a context and
/// saved, so that the model's rules hold as for any save.
enum ImportCommand: Command {
    static let name = "import"
    static let help = """
        USAGE: cairn import DIR [--in FILE] [--batch N] [--atomic] [--upsert]

        Reads NDJSON in the export format into an existing store. Each line becomes an
        object saved as an app's save is: types, required values, uniqueness and
        references are checked, and both sides of every relationship agree (a line that
        names one side sets the other). A line without "id" makes a new object; ids and
        references resolve within the file first, then to records of the store. An id
        that is a record ID never used in the store (as in an export) is kept; any other
        gets a new ID.

        Commits in batches of at least N lines (default 1000), cut only where every
        reference made so far points at a line already read: a reference to a later line
        keeps its batch open until that line. A line that fails stops the import with its
        line number and the reason: its batch is not committed, so nothing committed
        points at a record that is not there; earlier batches stay. The number committed
        is printed after each batch.

          --atomic   the whole file is one transaction: all of it, or (on any error) none
          --upsert   a line whose uniqueness-constrained values are those of a record of
                     the store, or of an earlier line, updates that record with the
                     members it names (its values win), instead of failing

        The store compacts itself as the import goes, once its log is over 16 MB and
        larger than its snapshot.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "import", valued: ["--in", "--batch"], switches: ["--atomic", "--upsert"])
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
        guard FileManager.default.fileExists(atPath: directory + "/MANIFEST") else { throw CairnError(.notFound, "no store at \(directory)") }
        // Compacting as an app's store does: a large import otherwise left all it wrote in
        // the log, which every open then replays.
        var options = StoreOptions()
        options.createIfMissing = false
        let stored = try openStore(directory, command: "import").schemaClosing()
        let model = try Model(entities: stored.entities.sorted { $0.number < $1.number }, version: stored.version)
        let coordinator = try Coordinator(path: directory, schema: model.schema, options: options)
        var importer = Importer(coordinator: coordinator, model: model, batch: args.flags.contains("--atomic") ? nil : batch,
                                upsert: args.flags.contains("--upsert"))
        do {
            try data.withUnsafeBytes { try importer.run($0) }
        } catch {
            try? coordinator.close()
            throw error
        }
        try coordinator.close()
    }
}

extension Store {
    /// The schema, the store closed (the importer reopens it through a coordinator).
    func schemaClosing() throws -> Schema {
        let schema = self.schema
        try close()
        return schema
    }
}

/// One import: the lines' places and labels (first pass), then objects made, set and
/// saved batch by batch (second pass).
struct Importer {
    let context: Context
    let schema: Schema
    /// Lines per batch at least; nil: one transaction.
    let batch: Int?
    let upsert: Bool

    /// Each line that holds an object: its number, bytes, entity and `id` label.
    var lines: [(number: Int, range: Range<Int>, entity: EntityDescription, label: String?)] = []
    /// Label → the line that defines it.
    var labels: [String: Int] = [:]
    /// IDs kept from the file (record IDs the store never used), by line.
    var reserved: [Int: RecordID] = [:]
    /// The record of each line read or referenced so far, by line.
    var records: [Int: RecordID] = [:]
    /// Lines referenced (their objects inserted) but not read yet: a batch cannot end.
    var pending = Set<Int>()
    /// Uniqueness keys of the lines of this import: (entity, group, values) → line.
    var claims: [UniqueKey: Int] = [:]
    /// The objects of the batch being built, by record.
    var objects: [RecordID: ManagedObject] = [:]
    /// The lines whose objects the batch made, with them: an upsert's save may give such an
    /// object the ID of the record it matched, which later references must name.
    var made: [(line: Int, object: ManagedObject)] = []

    struct UniqueKey: Hashable {
        let entity: UInt16
        let group: Int
        let key: [String]
    }

    init(coordinator: Coordinator, model: Model, batch: Int?, upsert: Bool) {
        context = Context(coordinator: coordinator, model: model)
        context.undoManager.isEnabled = false
        // (Upserts are found by the importer, which sets only the members a line names; the
        // save refuses any other repeat of unique values.)
        context.mergePolicy = .error
        schema = coordinator.store.schema
        self.batch = batch
        self.upsert = upsert
    }

    func failure(_ number: Int, _ message: String, code: CairnError.Code = .invalidArgument) -> CairnError {
        CairnError(code, "line \(number): \(message)")
    }

    mutating func run(_ text: UnsafeRawBufferPointer) throws {
        // Pass 1: where each line is, its entity and label. A line that does not parse stops
        // the import there: the lines before it are still imported.
        var stop: CairnError?
        var start = 0, number = 0
        while start < text.count {
            var end = start
            while end < text.count, text[end] != 0x0A { end += 1 }
            number += 1
            let range = start..<end
            start = end + 1
            let bytes = UnsafeRawBufferPointer(rebasing: text[range])
            if bytes.allSatisfy(JSONText.isSpace) { continue }
            let parsed: RecordJSON.ParsedLine
            do { parsed = try RecordJSON.parse(utf8: bytes, schema: schema) } catch let error as CairnError {
                stop = failure(number, error.message)
                break
            }
            if let label = parsed.id {
                if let other = labels[label] {
                    stop = failure(number, "id \(label) is also the id of line \(lines[other].number)")
                    break
                }
                labels[label] = lines.count
            }
            lines.append((number, range, parsed.entity, parsed.id))
        }
        // Record IDs the store never handed out are kept (an export's, into a new store).
        let candidates = lines.indices.compactMap { index -> (Int, RecordID)? in
            guard let label = lines[index].label, let id = RecordID(label), id.entity == lines[index].entity.number else { return nil }
            return (index, id)
        }
        let kept = context.coordinator.store.reserveIDs(candidates.map(\.1))
        for (index, id) in candidates where kept.contains(id) { reserved[index] = id }

        // Pass 2: objects, batch by batch.
        var committed = 0, sinceCommit = 0, batchStart = lines.first?.number ?? 0
        do {
            for index in lines.indices {
                try importLine(index, text: text)
                sinceCommit += 1
                if let batch, sinceCommit >= batch, pending.isEmpty {
                    try save(from: batchStart, to: lines[index].number)
                    committed += sinceCommit
                    sinceCommit = 0
                    batchStart = index + 1 < lines.count ? lines[index + 1].number : 0
                    Console.out("committed \(committed)")
                }
            }
            if sinceCommit > 0, stop == nil {
                try save(from: batchStart, to: lines.last?.number ?? 0)
                committed += sinceCommit
                Console.out("committed \(committed)")
            }
        } catch let error as CairnError {
            stop = error
        }
        if let stop {
            context.rollback()
            if batch == nil || committed == 0 {
                Console.error("\(stop.message); nothing was imported")
            } else {
                Console.error("\(stop.message); the \(committed) records of the batches before it were imported")
            }
            throw Failure()
        }
        Console.out("imported \(committed) records")
    }

    /// Saves the batch of lines `first`…`last` and forgets its objects (memory stays
    /// bounded by a batch).
    mutating func save(from first: Int, to last: Int) throws {
        do { try context.save() } catch let error as CairnError {
            throw CairnError(error.code, "the batch of lines \(first)–\(last): \(error.message)")
        }
        for (line, object) in made { records[line] = object.objectID.recordID }
        made.removeAll(keepingCapacity: true)
        context.reset()
        objects.removeAll(keepingCapacity: true)
    }

    /// The object of line `index`: made when the line, or a reference to it, is first read.
    mutating func object(ofLine index: Int) throws -> ManagedObject {
        if let id = records[index] { return try object(id, entityName: lines[index].entity.name) }
        let name = lines[index].entity.name
        let made = try reserved[index].map { try context.insertObject(entityName: name, reserved: $0) }
            ?? context.insertObject(entityName: name)
        records[index] = made.objectID.recordID
        objects[made.objectID.recordID] = made
        self.made.append((index, made))
        return made
    }

    /// The object of a record this import wrote or the store holds.
    mutating func object(_ id: RecordID, entityName: String) throws -> ManagedObject {
        if let known = objects[id] { return known }
        let found = try context.existingObject(with: ObjectID(recordID: id, entityName: entityName))
        objects[id] = found
        return found
    }

    mutating func importLine(_ index: Int, text: UnsafeRawBufferPointer) throws {
        let (number, range, entity, _) = lines[index]
        let line: RecordJSON.ParsedLine
        do { line = try RecordJSON.parse(utf8: UnsafeRawBufferPointer(rebasing: text[range]), schema: schema) } catch let error as CairnError {
            throw failure(number, error.message)
        }
        // The attributes the line names, as values; then its target object.
        var values: [(String, Value)] = []
        for attribute in entity.attributes {
            guard let raw = line[attribute.name] else { continue }
            do {
                let value = try RecordJSON.value(raw, type: attribute.type)
                try value.checkLimits("\(entity.name).\(attribute.name)")
                values.append((attribute.name, value))
            } catch let error as CairnError {
                throw failure(number, "\(entity.name).\(attribute.name): \(error.message)")
            }
        }
        let target = try targetObject(ofLine: index, values: values)
        pending.remove(index)
        for (name, value) in values {
            do { try target.setValue(value, forKey: name) } catch let error as CairnError { throw failure(number, error.message) }
        }
        for relationship in entity.relationships {
            guard let raw = line[relationship.name] else { continue }
            let value: Value
            do {
                value = try RecordJSON.value(raw, of: relationship, in: entity) { text in try resolve(text, to: relationship) }
                try target.setValue(value, forKey: relationship.name)
            } catch let error as CairnError {
                throw failure(number, error.message)
            }
        }
        // Required values are checked here, to name the line (the save checks them again).
        if target.isInserted {
            for attribute in entity.attributes where !attribute.isOptional && target.value(forKey: attribute.name).isNull {
                throw failure(number, "\(entity.name).\(attribute.name) is required")
            }
            // (A required to-one may still be set by a later line naming the inverse: the
            // save checks it.)
        }
    }

    /// The object line `index` sets: its own, or with `upsert` an earlier line's whose
    /// uniqueness key it repeats. Without `upsert`, a repeated key is an error naming both
    /// lines (a key the store holds is the save's to find).
    mutating func targetObject(ofLine index: Int, values: [(String, Value)]) throws -> ManagedObject {
        let entity = lines[index].entity
        var keys: [(names: [String], values: [Value])] = []
        for (group, names) in entity.uniqueness.enumerated() {
            var key: [String] = []
            var keyValues: [Value] = []
            for name in names {
                guard let value = values.last(where: { $0.0 == name })?.1, !value.isNull else { key = []; break }
                key.append(JSONText.value(value))
                keyValues.append(value)
            }
            guard !key.isEmpty else { continue }
            keys.append((names, keyValues))
            let claim = UniqueKey(entity: entity.number, group: group, key: key)
            guard let earlier = claims[claim] else {
                claims[claim] = index
                continue
            }
            let described = zip(names, key).map { "\($0) = \($1)" }.joined(separator: ", ")
            guard upsert, records[index] == nil else {
                throw failure(lines[index].number, "uniqueness of \(entity.name) (\(names.joined(separator: ", "))) violated: \(described) is also on line \(lines[earlier].number)", code: .validation)
            }
            // This line's label names the earlier line's record from now on.
            records[index] = records[earlier]
            if let id = records[earlier] { return try object(id, entityName: entity.name) }
        }
        if upsert, records[index] == nil {
            for key in keys {
                let format = key.names.map { "\($0) == %@" }.joined(separator: " AND ")
                let request = FetchQuery<ManagedObject>(entityName: entity.name, predicate: try FetchPredicate(format: format, arguments: key.values))
                if let existing = try context.fetch(request).first {
                    records[index] = existing.objectID.recordID
                    objects[existing.objectID.recordID] = existing
                    return existing
                }
            }
        }
        return try object(ofLine: index)
    }

    /// The raw ID a reference text names: a line of the file (its object made now if the
    /// line comes later, which keeps the batch open until it), else a record of the store.
    mutating func resolve(_ text: String, to relationship: RelationshipDescription) throws -> UInt64 {
        guard let destination = schema.entity(named: relationship.destination) else {
            throw CairnError(.invalidArgument, "points at unknown entity \(relationship.destination)")
        }
        if let line = labels[text] {
            guard lines[line].entity.number == destination.number else {
                throw CairnError(.invalidArgument, "\(text) (line \(lines[line].number)) is a \(lines[line].entity.name), not a \(destination.name)")
            }
            if records[line] == nil { pending.insert(line) }
            return try object(ofLine: line).objectID.recordID.rawValue
        }
        if let literal = RecordID(text), literal.entity == destination.number, context.coordinator.store.contains(literal) {
            return literal.rawValue
        }
        throw CairnError(.invalidArgument, "\(text) is neither an id in the file nor a \(destination.name) of the store")
    }
}
