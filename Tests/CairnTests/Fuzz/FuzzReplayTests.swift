import CairnInterchange
import Foundation
import Testing
@testable import Cairn
@testable import CairnTesting
@testable import CairnStorage

/// Replays every kept fuzz input (seed corpus and fixed crash inputs under Fuzz/regressions) through the fuzz entry points
/// without libFuzzer; with CAIRN_WRITE_SEEDS=1 it first (re)writes the seed corpus.
@Suite struct FuzzReplayTests {
    static let fuzzDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz").path

    static func seeds() throws -> [FuzzEntry: [[UInt8]]] {
        var seeds: [FuzzEntry: [[UInt8]]] = [:]
        var generator = ValueGenerator(random: SplitMix64(seed: 99))
        seeds[.value] = (0..<8).map { _ in ValueCoding.encode((0..<4).map { _ in generator.value() }) }
        seeds[.schema] = [SchemaCoding.encode(TestSchemas.people), SchemaCoding.encode(TestSchemas.blobs)]
        let canonical = try CanonicalStore(smallTransactions(6, seed: 3, maxBlob: 8))
        let compacted = try CanonicalStore(smallTransactions(6, seed: 4, maxBlob: 8), compactAfter: 4)
        seeds[.log] = [canonical.logBytes, compacted.logBytes] + (try historySeeds())
        // With attribute indexes stored in the snapshot (FORMAT.md §6.6).
        let indexed = try CanonicalStore(StoredIndexTests.transactions(6), compactAfter: 4, schema: StoredIndexTests.schema)
        seeds[.snapshot] = [compacted.fs.contents(of: compacted.snapshotPath)!, indexed.fs.contents(of: indexed.snapshotPath)!]
        seeds[.storeOpen] = try [canonical, compacted, indexed].map { store in
            try storeOpenInput(manifest: store.fs.contents(of: store.manifestPath)!, snapshot: store.fs.contents(of: store.snapshotPath)!,
                               log: store.logBytes)
        } + [try checkpointedStoreOpenInput()]
        seeds[.predicate] = ["age >= 18 AND name BEGINSWITH[c] 'a'", "ANY dvds.title LIKE[cd] '*x?' OR dvds.@count > 2",
                             "%K IN {1, 2, 3} AND NOT (x BETWEEN {1, 5})", "TRUEPREDICATE", "a MATCHES '[a-z]+' && b == nil"]
            .map { Array($0.utf8) }
        let thing = FuzzEntry.interchangeSchema.entities[0]
        let id = RecordID(entity: 1, serial: 3)
        var lines = (0..<4).map { round -> String in
            let values: [Value] = thing.attributes.map { attribute in
                guard round > 0 else { return attribute.defaultValue ?? .null }
                var value = generator.value()
                while !attribute.type.accepts(value) { value = generator.value() }
                return value
            } + [.reference(id.rawValue), .references([id.rawValue, RecordID(entity: 1, serial: 9).rawValue])]
            return RecordJSON.line(entity: thing, id: id, values: values)
        }
        lines.append(#"{"entity": "Thing", "double": "NaN", "float": 1e-50, "date": "2026-11-22T16:13:27.123456Z", "decimal": "3.14159265358979323846264338327950288"}"#)
        lines.append(#"{"entity": "Thing", "int8": 300}"#)
        seeds[.ndjson] = lines.map { Array($0.utf8) } + [Array(lines.joined(separator: "\n").utf8)]
        seeds[.contextOps] = (1...6).map { seed in
            var random = SplitMix64(seed: UInt64(seed))
            return (0..<512).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        }
        return seeds
    }

    /// A `store_open` input: the manifest, snapshot and log (and a checkpoint, which the
    /// entry splits off the log at its magic), renumbered as the entry names them (1, 2).
    static func storeOpenInput(manifest: [UInt8], snapshot: [UInt8], log: [UInt8], checkpoint: [UInt8] = []) throws -> [UInt8] {
        var decoded = try manifest.withUnsafeBytes { try Manifest.decode($0) }
        decoded.snapshotNumber = 1
        decoded.logNumber = 2
        decoded.nextFileNumber = 3
        var files = [snapshot, log, checkpoint]
        for (index, (kind, number)) in [(FileHeader.Kind.snapshot, UInt64(1)), (.log, 2), (.checkpoint, 2)].enumerated() where !files[index].isEmpty {
            var header = try files[index].withUnsafeBytes { try FileHeader.decode($0, expected: kind) }
            header.fileNumber = number
            files[index].replaceSubrange(0..<64, with: header.encoded())
        }
        let encoded = decoded.encoded()
        let lengths: [UInt8] = [UInt8(encoded.count & 0xFF), UInt8(encoded.count >> 8),
                                UInt8(files[0].count & 0xFF), UInt8(files[0].count >> 8)]
        return lengths + encoded + files[0] + files[1] + files[2]
    }

    /// A store whose log has a checkpoint (FORMAT.md §12) with a table and two index runs:
    /// 20 records compacted, then five commits of puts and deletes, then a clean close.
    static func checkpointedStoreOpenInput() throws -> [UInt8] {
        let fs = try StoredIndexTests.compactedStore(20)
        var options = memoryOptions(fs)
        options.checkpointMinimumRecords = 1
        let store = try Store.open(at: "/db", options: options)
        var random = SplitMix64(seed: 5)
        for commit in 0..<5 {
            var changes: [Change] = (0..<3).map { n in
                .put(RecordID(entity: 1, serial: UInt64(100 + commit * 3 + n)),
                     StoredIndexTests.values(&random, serial: UInt64(500 + commit * 3 + n)))
            }
            changes.append(.delete(RecordID(entity: 1, serial: UInt64(1 + commit))))
            try store.commit(changes)
        }
        try store.close()
        let manifest = try Store.readManifest(in: "/db", fileSystem: fs)
        return try storeOpenInput(manifest: fs.contents(of: "/db/MANIFEST")!,
                                  snapshot: fs.contents(of: "/db/" + StoreFileName.snapshot(manifest.snapshotNumber))!,
                                  log: fs.contents(of: "/db/" + StoreFileName.log(manifest.logNumber))!,
                                  checkpoint: fs.contents(of: "/db/" + StoreFileName.checkpoint(manifest.logNumber))!)
    }

    @Test func seedsOpenAsStores() throws {
        // The store seeds must be real stores, or the fuzzer starts from nothing useful.
        for input in try Self.seeds()[.storeOpen]! {
            let body = Array(input.dropFirst(4))
            let first = Int(UInt16(input[0]) | UInt16(input[1]) << 8)
            let second = first + Int(UInt16(input[2]) | UInt16(input[3]) << 8)
            let fs = MemoryFileSystem()
            try fs.createDirectory("/s")
            try fs.setContents(of: "/s/MANIFEST", to: Array(body[0..<first]))
            try fs.setContents(of: "/s/000001.snapshot", to: Array(body[first..<second]))
            let log = Array(body[second...]), magic = Array("CAIRNCKP".utf8)
            let checkpoint = log.indices.first { log[$0...].starts(with: magic) }
            try fs.setContents(of: "/s/000002.log", to: Array(log[..<(checkpoint ?? log.count)]))
            if let checkpoint { try fs.setContents(of: "/s/000002.checkpoint", to: Array(log[checkpoint...])) }
            let store = try Store.open(at: "/s", options: memoryOptions(fs))
            #expect(store.lastSequence == 6)
            #expect(store.recovery.usedCheckpoint == (checkpoint != nil), "\(store.recovery)")
            try store.close()
        }
    }

    /// A log whose frames carry history notes (FORMAT.md §5.1): HistoryFeedTests' saves;
    /// and the history file a compaction then writes (§14).
    static func historySeeds() throws -> [[UInt8]] {
        let fs = MemoryFileSystem()
        let (coordinator, model) = try HistoryFeedTests.open(fs)
        _ = try HistoryFeedTests.saves(coordinator, model)
        let path = coordinator.store.logPath(coordinator.store.log.withLock { $0?.manifest.logNumber } ?? 0)
        let log = try #require(fs.contents(of: path))
        try coordinator.compact()
        let kept = try #require(try fs.listDirectory("/db").first { $0.hasSuffix(".history") })
        let history = try #require(fs.contents(of: "/db/" + kept))
        try coordinator.close()
        return [log, history]
    }

    @Test func keptInputsReplayWithoutCrashing() throws {
        let fm = FileManager.default
        if ProcessInfo.processInfo.environment["CAIRN_WRITE_SEEDS"] == "1" {
            for (entry, inputs) in try Self.seeds() {
                let directory = Self.fuzzDirectory + "/corpus/" + entry.rawValue
                try fm.createDirectory(atPath: directory, withIntermediateDirectories: true)
                for (index, input) in inputs.enumerated() {
                    try Data(input).write(to: URL(fileURLWithPath: directory + "/seed-\(index)"))
                }
            }
        }
        var replayed = 0
        for entry in FuzzEntry.allCases {
            for folder in ["corpus", "regressions"] {
                let directory = Self.fuzzDirectory + "/\(folder)/" + entry.rawValue
                for name in (try? fm.contentsOfDirectory(atPath: directory)) ?? [] where !name.hasPrefix(".") {
                    guard let data = fm.contents(atPath: directory + "/" + name) else { continue }
                    entry.run([UInt8](data))
                    replayed += 1
                }
            }
            // And the generated seeds, whether or not they were written.
            for input in try Self.seeds()[entry] ?? [] { entry.run(input) }
        }
        #expect(replayed >= FuzzEntry.allCases.count, "kept inputs replayed: \(replayed)")
    }

    /// The differential context target, without libFuzzer: many seeded random operation
    /// sequences (inserts, updates, re-parenting, cascading deletes, saves, undo, redo,
    /// rollback, crashes, compactions), each step compared with the reference model.
    @Test func contextOperationsMatchTheReferenceModel() {
        for seed in 100..<160 {
            var random = SplitMix64(seed: UInt64(seed))
            // Bias towards changes so the graphs grow: opcodes 0–3 twice as often.
            let bytes = (0..<512).map { index -> UInt8 in
                let value = UInt8(truncatingIfNeeded: random.next())
                return index % 2 == 0 && value % 3 != 0 ? value % 4 : value
            }
            FuzzEntry.contextOps.run(bytes)
        }
    }
}
