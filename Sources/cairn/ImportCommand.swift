import CairnInterchange
import CairnStorage
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
        // A file is mapped, not read: the import reads it twice, front to back, and lets
        // go of its pages as it goes (standard input is read whole).
        let input: FileMapping
        if let path = args.options["--in"] {
            do { input = try POSIXFileSystem().mapForReading(path) } catch let error as CairnError {
                throw CairnError(.notFound, "cannot read \(path): \(error.message)")
            }
        } else {
            input = FileMapping(copying: [UInt8](FileHandle.standardInput.readDataToEndOfFile()))
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
            try importer.run(input.bytes, evicting: input.dropResidentPages)
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

/// One import: the lines' labels (first pass), then objects made, set and saved batch by
/// batch (second pass, reading the lines again). Memory grows with the labels, about 16
/// bytes for each that is a record ID (as an export's are), not with the lines or the file.
struct Importer {
    let context: Context
    let schema: Schema
    /// Lines per batch at least; nil: one transaction.
    let batch: Int?
    let upsert: Bool

    /// Labels that are record IDs of their line's entity, written as ``RecordID`` prints
    /// them (an export's).
    var idLabels = IDLabels()
    /// Other labels: text → line number and entity.
    var textLabels: [String: (line: Int, entity: UInt16)] = [:]
    /// The record of each labelled line read or referenced so far, by line number (a
    /// kept ID's line: `idLabels` says whether it was made).
    var records: [Int: RecordID] = [:]
    /// Lines referenced (their objects inserted) but not read yet: a batch cannot end.
    var pending = Set<Int>()
    /// Uniqueness keys of the lines of this import: (entity, group, values) → line number.
    var claims: [UniqueKey: Int] = [:]
    /// The objects of the batch being built, by record.
    var objects: [RecordID: ManagedObject] = [:]
    /// The labelled lines whose objects the batch made, with them: an upsert's save may
    /// give such an object the ID of the record it matched, which later references must name.
    var made: [(line: Int, object: ManagedObject, labelled: Bool, kept: RecordID?)] = []
    /// The record of each line that claimed a uniqueness key, by line number (for an
    /// upsert's later line with the same key).
    var claimRecords: [Int: RecordID] = [:]
    /// The line being imported: its record once made or found.
    var current: (line: Int, record: RecordID?) = (0, nil)

    struct UniqueKey: Hashable {
        let entity: UInt16
        let group: Int
        let key: [String]
    }

    /// A line of the text: its number and bytes.
    struct Line {
        let number: Int
        let bytes: UnsafeRawBufferPointer
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

    /// Calls `body` with each line of `text` that is not blank, in order, until it
    /// returns false.
    static func forEachLine(_ text: UnsafeRawBufferPointer, _ body: (Line) throws -> Bool) rethrows {
        var start = 0, number = 0
        while start < text.count {
            var end = start
            while end < text.count, text[end] != 0x0A { end += 1 }
            number += 1
            let bytes = UnsafeRawBufferPointer(rebasing: text[start..<end])
            start = end + 1
            if bytes.allSatisfy(JSONText.isSpace) { continue }
            guard try body(Line(number: number, bytes: bytes)) else { return }
        }
    }

    /// The record ID a label is written as (`E1-5`, as ``RecordID`` prints it; not `E1-05`),
    /// if it is one.
    static func idLabel(_ label: String) -> RecordID? {
        guard let id = RecordID(label), id.description == label else { return nil }
        return id
    }

    mutating func run(_ text: UnsafeRawBufferPointer, evicting evict: () -> Void = {}) throws {
        // Pass 1: each line's label. A line that does not parse, or repeats a label, stops
        // the import there: the lines before it are still imported.
        var stop: CairnError?
        var stopLine = Int.max
        // The text read so far is let go of every 64 MiB (each pass reads it front to back),
        // after the line that reaches past the mark (one long line is let go of at once).
        var nextEviction = 64 << 20
        func evictPast(_ line: Line) {
            guard let start = line.bytes.baseAddress, let base = text.baseAddress, start - base + line.bytes.count >= nextEviction else { return }
            nextEviction = start - base + line.bytes.count + 64 << 20
            evict()
        }
        Self.forEachLine(text) { line in
            defer { evictPast(line) }
            let parsed: RecordJSON.ParsedLine
            do { parsed = try RecordJSON.parse(utf8: line.bytes, schema: schema) } catch let error as CairnError {
                (stop, stopLine) = (failure(line.number, error.message), line.number)
                return false
            } catch {
                (stop, stopLine) = (failure(line.number, "\(error)"), line.number)
                return false
            }
            if let label = parsed.id {
                if let id = Self.idLabel(label), id.entity == parsed.entity.number, id.serial > RecordID.maxImportedSerial {
                    // (Kept, it would leave later inserts few serials or none.)
                    (stop, stopLine) = (failure(line.number, "id \(label) has serial \(id.serial), past \(RecordID.maxImportedSerial), the highest a store takes with a record (FORMAT.md §2.3); give it another label to have a new ID made"), line.number)
                    return false
                } else if let id = Self.idLabel(label), id.entity == parsed.entity.number, line.number <= IDLabels.maxLine {
                    idLabels.append(id.rawValue, line: line.number)
                } else if let other = textLabels[label] {
                    (stop, stopLine) = (failure(line.number, "id \(label) is also the id of line \(other.line)"), line.number)
                    return false
                } else {
                    textLabels[label] = (line.number, parsed.entity.number)
                }
            }
            return true
        }
        evict()
        nextEviction = 64 << 20
        // A label repeated among the record IDs (found once they are sorted), or written
        // both ways, stops the import at its second line if that comes first.
        var repeated: (line: Int, first: Int, label: String)?
        if let twice = idLabels.sort() { repeated = (twice.second, twice.first, RecordID(rawValue: twice.raw).description) }
        for (label, place) in textLabels {
            guard let id = Self.idLabel(label), let found = idLabels.find(id.rawValue) else { continue }
            let (first, second) = (min(place.line, found.line), max(place.line, found.line))
            if second < repeated?.line ?? Int.max { repeated = (second, first, label) }
        }
        if let repeated, repeated.line < stopLine {
            (stop, stopLine) = (failure(repeated.line, "id \(repeated.label) is also the id of line \(repeated.first)"), repeated.line)
        }
        // Labels of lines past the stop do not exist (those lines are not imported).
        if stopLine != Int.max {
            idLabels.removeLines(from: stopLine)
            textLabels = textLabels.filter { $0.value.line < stopLine }
        }
        // Record IDs the store never handed out are kept (an export's, into a new store).
        var labels = idLabels
        context.coordinator.store.reserveSerials { labels.keep(from: $0) }
        idLabels = labels

        // Pass 2: objects, batch by batch.
        var committed = 0, sinceCommit = 0, batchStart = 0, lastLine = 0
        do {
            try Self.forEachLine(text) { line in
                guard line.number < stopLine else { return false }
                if sinceCommit == 0 { batchStart = line.number }
                try importLine(line)
                lastLine = line.number
                sinceCommit += 1
                if let batch, sinceCommit >= batch, pending.isEmpty {
                    try save(from: batchStart, to: line.number)
                    committed += sinceCommit
                    sinceCommit = 0
                    Console.out("committed \(committed)")
                }
                evictPast(line)
                return true
            }
            if sinceCommit > 0, stop == nil {
                try save(from: batchStart, to: lastLine)
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
        for (line, object, labelled, kept) in made {
            let id = object.objectID.recordID
            if labelled, id != kept { records[line] = id }
            if claimRecords[line] != nil { claimRecords[line] = id }
        }
        made.removeAll(keepingCapacity: true)
        context.reset()
        objects.removeAll(keepingCapacity: true)
    }

    /// The line that defines label `text`, with its entity and its kept ID's entry, if any.
    func definition(of text: String) -> (line: Int, entity: UInt16, kept: (entry: Int, id: RecordID)?)? {
        if let place = textLabels[text] { return (place.line, place.entity, nil) }
        guard let id = Self.idLabel(text), let found = idLabels.find(id.rawValue) else { return nil }
        return (found.line, id.entity, idLabels.isKept(found.entry) ? (found.entry, id) : nil)
    }

    /// The record of labelled line `line` if it was made or found already.
    func record(ofLine line: Int, kept: (entry: Int, id: RecordID)?) -> RecordID? {
        if line == current.line, let record = current.record { return record }
        if let record = records[line] { return record }
        if let kept, idLabels.isMade(kept.entry) { return kept.id }
        return nil
    }

    /// Notes that the current line claimed its uniqueness keys, for later lines repeating them.
    mutating func claimed(_ line: Int) {
        guard let id = current.record, let object = objects[id] else { return }
        claimRecords[line] = id
        made.append((line, object, false, nil))
    }

    /// The object of a line, given what its label says: made when the line, or a
    /// reference to it, is first read.
    mutating func object(ofLine line: Int, entityName: String, label: String?) throws -> ManagedObject {
        let place = label.flatMap { definition(of: $0) }
        if let id = record(ofLine: line, kept: place?.kept) { return try object(id, entityName: entityName) }
        let made = try place?.kept.map { try context.insertObject(entityName: entityName, reserved: $0.id) }
            ?? context.insertObject(entityName: entityName)
        let id = made.objectID.recordID
        if line == current.line { current.record = id }
        if let kept = place?.kept {
            idLabels.setMade(kept.entry)
            self.made.append((line, made, true, kept.id))
        } else if label != nil {
            records[line] = id
            self.made.append((line, made, true, nil))
        }
        objects[id] = made
        return made
    }

    /// The object of a record this import wrote or the store holds.
    mutating func object(_ id: RecordID, entityName: String) throws -> ManagedObject {
        if let known = objects[id] { return known }
        let found = try context.existingObject(with: ObjectID(recordID: id, entityName: entityName))
        objects[id] = found
        return found
    }

    mutating func importLine(_ text: Line) throws {
        let number = text.number
        let line: RecordJSON.ParsedLine
        do { line = try RecordJSON.parse(utf8: text.bytes, schema: schema) } catch let error as CairnError {
            throw failure(number, error.message)
        }
        let entity = line.entity
        current = (number, nil)
        if let label = line.id, let place = definition(of: label), place.line == number {
            current.record = record(ofLine: number, kept: place.kept)
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
        let target = try targetObject(ofLine: number, entity: entity, label: line.id, values: values)
        pending.remove(number)
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

    /// The object line `line` sets: its own, or with `upsert` an earlier line's whose
    /// uniqueness key it repeats. Without `upsert`, a repeated key is an error naming both
    /// lines (a key the store holds is the save's to find).
    mutating func targetObject(ofLine line: Int, entity: EntityDescription, label: String?,
                               values: [(String, Value)]) throws -> ManagedObject {
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
                claims[claim] = line
                continue
            }
            let described = zip(names, key).map { "\($0) = \($1)" }.joined(separator: ", ")
            guard upsert, current.record == nil else {
                throw failure(line, "uniqueness of \(entity.name) (\(names.joined(separator: ", "))) violated: \(described) is also on line \(earlier)", code: .validation)
            }
            // This line's label names the earlier line's record from now on.
            guard let id = claimRecords[earlier] else { continue }
            current.record = id
            if label != nil { records[line] = id }
            return try object(id, entityName: entity.name)
        }
        if upsert, current.record == nil {
            for key in keys {
                let format = key.names.map { "\($0) == %@" }.joined(separator: " AND ")
                let request = FetchQuery<ManagedObject>(entityName: entity.name, fetchPredicate: try FetchPredicate(format: format, arguments: key.values))
                if let existing = try context.fetch(request).first {
                    current.record = existing.objectID.recordID
                    if label != nil { records[line] = existing.objectID.recordID }
                    objects[existing.objectID.recordID] = existing
                    claimed(line)
                    return existing
                }
            }
        }
        let made = try object(ofLine: line, entityName: entity.name, label: label)
        if !keys.isEmpty { claimed(line) }
        return made
    }

    /// The raw ID a reference text names: a line of the file (its object made now if the
    /// line comes later, which keeps the batch open until it), else a record of the store.
    mutating func resolve(_ text: String, to relationship: RelationshipDescription) throws -> UInt64 {
        guard let destination = schema.entity(named: relationship.destination) else {
            throw CairnError(.invalidArgument, "points at unknown entity \(relationship.destination)")
        }
        if let place = definition(of: text) {
            guard place.entity == destination.number else {
                let name = schema.entity(number: place.entity)?.name ?? "E\(place.entity)"
                throw CairnError(.invalidArgument, "\(text) (line \(place.line)) is a \(name), not a \(destination.name)")
            }
            if record(ofLine: place.line, kept: place.kept) == nil { pending.insert(place.line) }
            return try object(ofLine: place.line, entityName: destination.name, label: text).objectID.recordID.rawValue
        }
        if let literal = RecordID(text), literal.entity == destination.number, context.coordinator.store.contains(literal) {
            return literal.rawValue
        }
        throw CairnError(.invalidArgument, "\(text) is neither an id in the file nor a \(destination.name) of the store")
    }
}
