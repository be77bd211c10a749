import CairnInterchange
import Foundation
import Cairn
import CairnStorage

/// The entry points of the fuzz targets (`Fuzz/`), kept in the library so the ordinary
/// test suite replays every kept input through exactly the same code without libFuzzer.
/// Each takes arbitrary bytes and must return (or throw a `CairnError`) — never trap,
/// hang, or allocate beyond what the input justifies.
package enum FuzzEntry: String, CaseIterable, Sendable {
    case value, schema, log, snapshot, storeOpen = "store_open", predicate, ndjson, contextOps = "context_ops"

    package func run(_ bytes: [UInt8]) {
        switch self {
        case .value: Self.value(bytes)
        case .schema: Self.schema(bytes)
        case .log: Self.log(bytes)
        case .snapshot: Self.snapshot(bytes)
        case .storeOpen: Self.storeOpen(bytes)
        case .predicate: Self.predicate(bytes)
        case .ndjson: Self.ndjson(bytes)
        case .contextOps: ContextDifferential.run(bytes)
        }
    }

    /// Record values (FORMAT.md §2.2), also kept undecoded for objects (``RecordArena``: a
    /// kept record must read as decoded, against an entity that takes its values and one
    /// of ten integers), and the same bytes as a context's kept undo stacks.
    static func value(_ bytes: [UInt8]) {
        if let values = try? ValueCoding.decode(bytes) {
            // What decodes must encode back to the same bytes (NaN payloads aside).
            _ = ValueCoding.encode(values)
            if let entity = KeptRecordCheck.entity(taking: values), let mismatch = KeptRecordCheck.mismatch(bytes, entity: entity) {
                preconditionFailure("kept record: \(mismatch)")
            }
        }
        if let mismatch = KeptRecordCheck.mismatch(bytes, entity: integers) { preconditionFailure("kept record: \(mismatch)") }
        if let stacks = try? KeptUndoCoding.decode(bytes) { _ = KeptUndoCoding.encode(stacks) }
    }

    /// An entity of ten required integers, as a record the value target may be kept against.
    private static let integers = EntityDescription(name: "Integers", number: 1,
                                                    attributes: (0..<10).map { AttributeDescription(name: "a\($0)", type: .int64) })

    static func schema(_ bytes: [UInt8]) {
        _ = try? bytes.withUnsafeBytes { try SchemaCoding.decode($0) }
    }

    /// A log file's bytes: every frame parsed, every payload decoded with its history
    /// notes (FORMAT.md §5.1); and the same bytes as a history file (§14), past values and
    /// all. The bytes past the header are also decoded as one payload and as one history
    /// entry (by versions 5 and 6), so that mutations reach those decoders without a
    /// frame checksum to pass.
    static func log(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            _ = try? HistoryFileCoding.decode(buffer, pastValues: true)
            if buffer.count > FileHeader.size + LogFrame.headerSize {
                let payload = UnsafeRawBufferPointer(rebasing: buffer[(FileHeader.size + LogFrame.headerSize)...])
                _ = try? TransactionCoding.decode(payload, notes: { _ in }) { _, _ in }
                _ = try? HistoryFileCoding.entry(payload, sequence: 1, base: 0, version: 5)
                _ = try? HistoryFileCoding.entry(payload, sequence: 1, base: 0, pastValues: true)
            }
            _ = try? FileHeader.decode(buffer, expected: .log)
            var offset = min(FileHeader.size, buffer.count)
            var frames = 0
            while frames < 100_000, case .frame(_, _, let payload, let next) = LogFrame.parse(buffer, at: offset) {
                _ = try? TransactionCoding.decode(UnsafeRawBufferPointer(rebasing: buffer[payload]), notes: { _ in }) { _, body in
                    if let body { _ = try? ValueCoding.decode(body) }
                }
                offset = next
                frames += 1
            }
        }
    }

    /// A snapshot file's bytes: opened through footer, schema and index, every record read.
    static func snapshot(_ bytes: [UInt8]) {
        let fs = MemoryFileSystem()
        try? fs.createDirectory("/f")
        guard (try? fs.setContents(of: "/f/1.snapshot", to: bytes)) != nil,
              let file = try? fs.open("/f/1.snapshot", create: false, truncate: false),
              let reader = try? SnapshotReader(file: file) else { return }
        for entity in reader.index.entities {
            reader.forEach(entity: entity.entity) { id, place in
                // Twice: the second read takes the path of a frame already checked.
                for _ in 0..<2 { if let body = try? reader.body(at: place, id: id) { _ = try? ValueCoding.decode(body) } }
            }
        }
        for block in reader.index.attributeIndexes { _ = try? reader.verifyAttributeIndex(block) }
    }

    /// The input becomes the files of a store directory: `MANIFEST`, a snapshot and a
    /// log, split at two offsets taken from the first bytes, and the log's checkpoint:
    /// the log's bytes from the first checkpoint magic (`CAIRNCKP`) on, if any; then open,
    /// read, verify.
    static func storeOpen(_ bytes: [UInt8]) {
        guard bytes.count >= 4 else { return }
        let body = Array(bytes.dropFirst(4))
        let first = min(body.count, Int(UInt16(bytes[0]) | UInt16(bytes[1]) << 8))
        let second = min(body.count, first + Int(UInt16(bytes[2]) | UInt16(bytes[3]) << 8))
        let fs = MemoryFileSystem()
        try? fs.createDirectory("/s")
        try? fs.setContents(of: "/s/MANIFEST", to: Array(body[0..<first]))
        try? fs.setContents(of: "/s/000001.snapshot", to: Array(body[first..<second]))
        let log = body[second...]
        let magic = Array(FileHeader.Kind.checkpoint.rawValue.utf8)
        let checkpoint = log.indices.first { at in at + magic.count <= log.endIndex && log[at..<(at + magic.count)].elementsEqual(magic) }
        try? fs.setContents(of: "/s/000002.log", to: Array(log[..<(checkpoint ?? log.endIndex)]))
        if let checkpoint { try? fs.setContents(of: "/s/000002.checkpoint", to: Array(log[checkpoint...])) }
        var options = StoreOptions(fileSystem: fs, compaction: .manual, preallocationBytes: 4096)
        options.createIfMissing = false
        guard let store = try? Store.open(at: "/s", options: options) else { return }
        _ = store.verify()
        for entity in store.schema.entities { _ = try? store.records(entity: entity.number) }
        // Lookups through every index the snapshot stores.
        for block in store.snapshotAttributeIndexes {
            for condition: IndexCondition in [.equal([.null, .int64(1), .string("a")]),
                                              .range(lower: .int64(-3), lowerInclusive: false, upper: .string("z"), upperInclusive: true),
                                              .range(lower: nil, lowerInclusive: true, upper: nil, upperInclusive: true)] {
                _ = try? store.indexedIDs(entity: block.entity, slot: block.attribute, matching: condition)
            }
        }
        try? store.close()
    }

    static func predicate(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        _ = try? FetchPredicate(format: text, arguments: [.int64(1), .string("name"), .null])
        _ = try? FetchPredicate(format: text)
    }

    /// A schema with one attribute of every type (a required one with a default) and
    /// both kinds of relationship, for the interchange target.
    static let interchangeSchema = Schema(entities: [
        EntityDescription(name: "Thing", number: 1,
                          attributes: AttributeType.allCases.map { AttributeDescription(name: "\($0)", type: $0, isOptional: true) }
                              + [AttributeDescription(name: "count", type: .int64, defaultValue: .int64(7))],
                          relationships: [RelationshipDescription(name: "parent", destination: "Thing", inverse: "children"),
                                          RelationshipDescription(name: "children", destination: "Thing", isToMany: true,
                                                                  inverse: "parent")]),
    ])

    /// Each input line goes through the import path (parse, values). What it accepts
    /// must fit the entity, and export → import must reach a fixed point after one
    /// round (the first may normalise: -0, precision of dates).
    static func ndjson(_ bytes: [UInt8]) {
        let schema = interchangeSchema
        // Lines as bytes, as `cairn import` reads them: not UTF-8 is the parser's to refuse.
        for line in bytes.split(separator: 0x0A, maxSplits: 64, omittingEmptySubsequences: true) {
            func resolve(_ id: String) throws -> UInt64 {
                guard let literal = RecordID(id), literal.entity == 1 else { throw CairnError(.invalidArgument, "bad id") }
                return literal.rawValue
            }
            guard let parsed = try? Array(line).withUnsafeBytes({ try RecordJSON.parse(utf8: $0, schema: schema) }),
                  let values = try? RecordJSON.values(of: parsed, resolve: resolve) else { continue }
            let id = RecordID(entity: 1, serial: 1)
            do { try Store.check(values, of: id, against: schema) } catch {
                preconditionFailure("import accepted values that do not fit the entity: \(error)")
            }
            func roundTrip(_ values: [Value]) -> [Value] {
                let line = RecordJSON.line(entity: parsed.entity, id: id, values: values)
                do {
                    return try RecordJSON.values(of: try RecordJSON.parse(line, schema: schema), resolve: resolve)
                } catch {
                    preconditionFailure("export wrote a line import refuses: \(error)\n\(line)")
                }
            }
            let once = roundTrip(values), twice = roundTrip(once)
            precondition(ValueCoding.encode(once) == ValueCoding.encode(twice),
                         "export/import is not stable: \(once) then \(twice)")
        }
    }
}
