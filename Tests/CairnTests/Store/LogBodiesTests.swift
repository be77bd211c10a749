import CairnCollections
import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage
import CairnTesting

/// The log overlay keeps no record bodies: its entries point into the log, which the store
/// maps and reads. These tests hold it to that, and to reading the right bytes through
/// every change of mapping: appends past it, compaction, a reopen, a failed sync.
@Suite struct LogBodiesTests {
    static func blob(_ serial: UInt64, _ name: String, _ size: Int = 8) -> RecordOperation {
        let values: [Value] = [.string(name), .bytes(Data(repeating: UInt8(truncatingIfNeeded: serial), count: size))]
        return .put(RecordID(entity: 1, serial: serial), body: ValueCoding.encode(values))
    }

    static func name(_ store: Store, _ serial: UInt64) throws -> String? {
        guard let record = try store.get(RecordID(entity: 1, serial: serial)) else { return nil }
        guard case .string(let name) = record.values[0] else { return nil }
        return name
    }

    /// A directory for a store on disk (a real mapping of the log), and its options.
    static func diskStore(_ name: String = #function) -> (directory: String, options: StoreOptions) {
        var options = StoreOptions(compaction: .manual, preallocationBytes: 4096)
        options.backgroundChecksumMinimum = 0
        return (temporaryDirectory(name), options)
    }

    /// What the overlay holds per record: an entry into the log, no body of its own.
    static func heldCount(_ store: Store) -> Int { store.state.withLock { $0.bodies.held.count } }
    static func loggedCount(_ store: Store) -> Int {
        store.state.withLock { state in state.overlay[1]?.values.filter { $0.logRange != nil }.count ?? 0 }
    }

    @Test func entriesPointIntoTheLogAfterCommitsAndAfterAReopen() throws {
        let (directory, options) = Self.diskStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var store = try Store.open(at: directory, schema: TestSchemas.blobs, options: options)
        // Enough transactions to take the log past its first mappings (1 MiB, then doubling).
        for batch in 0..<60 {
            let operations = (1...100).map { Self.blob(UInt64(batch * 100 + $0), "r\(batch * 100 + $0)", 400) }
            try store.commit(operations: operations, durable: false)
        }
        try store.commit([.delete(RecordID(entity: 1, serial: 7))])
        #expect(store.statistics.logBytes > 2 << 20, "the log outgrew its first mappings")
        #expect(Self.heldCount(store) == 0)
        #expect(Self.loggedCount(store) == 5_999)
        for serial in [1, 6, 8, 2_500, 6_000] as [UInt64] { #expect(try Self.name(store, serial) == "r\(serial)") }
        #expect(try Self.name(store, 7) == nil)
        try store.close()

        store = try Store.open(at: directory, options: options)
        #expect(Self.heldCount(store) == 0)
        #expect(Self.loggedCount(store) == 5_999)
        #expect(store.count(entity: 1) == 5_999)
        let records = try store.records(entity: 1)
        #expect(records.count == 5_999)
        #expect(records.allSatisfy { record in
            guard case .string(let name) = record.values[0], case .bytes(let data) = record.values[1] else { return false }
            return name == "r\(record.id.serial)" && data == Data(repeating: UInt8(truncatingIfNeeded: record.id.serial), count: 400)
        })
        // The log's transactions came before this open: their records' versions are 0.
        #expect(store.version(of: RecordID(entity: 1, serial: 1)) == 0)
        try store.commit(operations: [Self.blob(1, "again")], durable: true)
        #expect(store.version(of: RecordID(entity: 1, serial: 1)) == store.lastSequence)
        try store.close()
    }

    /// A scan that took its state before a compaction reads every body after it, though
    /// the log it points into was retired and removed; so does one across appends that
    /// map the log anew.
    @Test func aScanOutlivesTheLogItReads() throws {
        let (directory, options) = Self.diskStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Store.open(at: directory, schema: TestSchemas.blobs, options: options)
        try store.commit(operations: (1...2_000).map { Self.blob($0, "r\($0)", 100) }, durable: true)
        var seen = 0
        try store.scan(entity: 1) { id, body in
            if seen == 10 {
                try store.compact()
                #expect(!FileManager.default.fileExists(atPath: directory + "/" + StoreFileName.log(2)), "the old log is gone")
                // More than the new log's first mapping, so it is mapped again.
                try store.commit(operations: (3_000...5_000).map { Self.blob($0, "new\($0)", 1_000) }, durable: false)
            }
            let values = try body.values()
            #expect(values[0] == .string("r\(id.serial)"))
            seen += 1
        }
        #expect(seen == 2_000)
        #expect(try Self.name(store, 4_000) == "new4000")
        #expect(try Self.name(store, 1_999) == "r1999")
        try store.close()
    }

    /// A body too long for an entry's 24-bit length is held in memory, and reads back.
    @Test func aBodyOf16MiBIsHeld() throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs))
        try store.commit(operations: [Self.blob(1, "big", 1 << 24), Self.blob(2, "small")], durable: true)
        #expect(Self.heldCount(store) == 1)
        #expect(Self.loggedCount(store) == 1)
        let record = try #require(try store.get(RecordID(entity: 1, serial: 1)))
        #expect(record.values[1] == .bytes(Data(repeating: 1, count: 1 << 24)))
        try store.close()
        let reopened = try Store.open(at: "/db", options: memoryOptions(fs))
        #expect(Self.heldCount(reopened) == 1)
        #expect(try reopened.get(RecordID(entity: 1, serial: 1))?.values[1] == .bytes(Data(repeating: 1, count: 1 << 24)))
        #expect(try Self.name(reopened, 2) == "small")
    }

    @Test func entriesPackOffsetAndLength() {
        let entry = OverlayEntry.logged(offset: 123_456_789, length: 4_321)
        #expect(entry?.logRange == 123_456_789..<(123_456_789 + 4_321))
        #expect(entry?.heldIndex == nil && entry?.isLive == true)
        #expect(OverlayEntry.logged(offset: 0, length: 1 << 24) == nil, "too long")
        #expect(OverlayEntry.logged(offset: 1 << 39, length: 1) == nil, "too far")
        #expect(OverlayEntry.logged(offset: (1 << 39) - 1, length: (1 << 24) - 1) != nil)
        #expect(OverlayEntry.held(5).heldIndex == 5 && OverlayEntry.held(5).logRange == nil)
        #expect(OverlayEntry.deleted.isDeleted && !OverlayEntry.deleted.isLive && OverlayEntry.deleted.logRange == nil)
        #expect(MemoryLayout<OverlayEntry>.stride == 8)
    }

    /// A deferred commit whose sync then fails stays readable in this process (its frame
    /// loses its header in the log, its body is copied to memory); a reopen does not have it.
    @Test func aDeferredCommitStaysReadableAfterAFailedSync() throws {
        let base = MemoryFileSystem()
        let faulty = FaultInjectingFileSystem(base: base)
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(faulty, durability: .deferred))
        try store.commit([.put(RecordID(entity: 1, serial: 1), [.string("a"), .bytes(Data())])], durability: .durable)
        try store.commit([.put(RecordID(entity: 1, serial: 2), [.string("b"), .bytes(Data(count: 40))])])
        #expect(Self.heldCount(store) == 0)
        faulty.fail(calls: [faulty.callCount + 1])
        #expect { try store.sync() } throws: { ($0 as? CairnError)?.code == .io }
        #expect(Self.heldCount(store) == 1, "the unsynced body was copied when its frame was discarded")
        #expect(try Self.name(store, 2) == "b")
        #expect(try Self.name(store, 1) == "a")
        let reopened = try Store.open(at: "/db", options: memoryOptions(base.crashImage(.keepAll)))
        #expect(try Self.name(reopened, 1) == "a")
        #expect(try Self.name(reopened, 2) == nil)
        #expect(reopened.recovery.truncatedBytes > 0, "the unsynced frame lost its header; the open cuts it")
    }
}

/// Versions moved out of the store's hash table into runs read back as they were.
@Suite struct VersionRunsTests {
    @Test(arguments: [1, 2, 3] as [UInt64]) func mergingMatchesAModel(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var model: [UInt64: UInt64] = [:]
        var runs = VersionRuns.empty
        var sequence: UInt64 = 0
        for _ in 0..<30 {
            var recent = IDMap<UInt64, UInt64>()
            for _ in 0..<Int(random.next() % 40) {
                sequence += 1
                // A bulk run of consecutive IDs, or a few scattered ones, some over old ones.
                let start = random.next() % 500 + 1
                let count = random.next() % 3 == 0 ? random.next() % 60 + 1 : 1
                for id in start..<(start + count) {
                    recent[id] = sequence
                    model[id] = sequence
                }
            }
            runs = runs.merging(recent)
            for id in 0...UInt64(600) { #expect(runs.version(of: id) == model[id], "id \(id)") }
        }
        #expect(runs.runCount < model.count, "consecutive IDs of one transaction share a run")
    }

    /// Runs that reach the largest raw ID (entity 65535, the last serial) split and join
    /// without overflowing.
    @Test func runsReachTheLargestID() {
        var recent = IDMap<UInt64, UInt64>()
        for id in (UInt64.max - 9)...UInt64.max { recent[id] = 1 }
        var runs = VersionRuns.empty.merging(recent)
        #expect(runs.runCount == 1 && runs.version(of: .max) == 1 && runs.version(of: .max - 10) == nil)
        var later = IDMap<UInt64, UInt64>()
        later[.max] = 2
        later[.max - 5] = 3
        runs = runs.merging(later)
        #expect(runs.version(of: .max) == 2 && runs.version(of: .max - 5) == 3 && runs.version(of: .max - 1) == 1)
        #expect(runs.version(of: .max - 9) == 1 && runs.runCount == 4)
    }

    /// Past the store's limit of recent versions, older ones move to runs; every record's
    /// version still reads back, in lookups and in scans.
    @Test func aStoreKeepsEveryVersionPastTheLimit() throws {
        var options = memoryOptions(MemoryFileSystem())
        options.recentVersionsLimit = 20_000
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: options)
        let total = 3 * options.recentVersionsLimit + 1_000
        var expected: [UInt64: UInt64] = [:]
        var serial: UInt64 = 1
        while serial <= UInt64(total) {
            let operations = (serial..<min(serial + 5_000, UInt64(total) + 1)).map { LogBodiesTests.blob($0, "r\($0)", 1) }
            let sequence = try store.commit(operations: operations, durable: false)
            for operation in operations { expected[operation.id.rawValue] = sequence }
            serial += 5_000
        }
        let updated = try store.commit(operations: [LogBodiesTests.blob(17, "again", 1)], durable: false)
        expected[RecordID(entity: 1, serial: 17).rawValue] = updated
        #expect(store.state.withLock { $0.versions.count } < options.recentVersionsLimit)
        #expect(store.state.withLock { $0.versionRuns.runCount } > 0)
        var checked = 0
        try store.scanVersioned(entity: 1) { id, version, _ in
            #expect(version == expected[id.rawValue])
            #expect(store.version(of: id) == version)
            checked += 1
        }
        #expect(checked == total)
    }
}

/// A compaction's index column sorts its record positions as the values would sort.
@Suite struct IndexColumnTests {
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64]) func positionsMatchSortingTheValues(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let count = Int(random.next() % 2_000) + (seed == 1 ? 0 : 300)
        var values: [Value] = []
        for position in 0..<count {
            switch seed {
            case 1, 2: values.append(.int64(Int64(position) - 50))                          // ascending
            case 3: values.append(random.next() % 7 == 0 ? .null : .int64(Int64(position / 3)))  // ascending with nils
            case 4: values.append(random.next() % 5 == 0 ? .null : .int32(Int32(truncatingIfNeeded: random.next() % 100) - 50))
            case 5: values.append(position == count / 2 ? .string("x") : .int64(Int64(random.next() % 10)))  // turns to values
            case 6: values.append(position == count / 3 ? .int16(3) : .int64(Int64(random.next() % 10)))   // another width
            case 7:  // ascending from the lowest to the highest key, then one descends
                let key: Int64 = position == 0 ? .min : position == 1 ? -1 : position < count / 2 ? .max - Int64(count) + Int64(position) : 5
                values.append(position % 11 == 0 && position > 0 ? .null : .int64(key))
            default: values.append(position == count / 2 ? .string("x") : .int64(Int64(position) * 1_000))  // ascending, then values
            }
        }
        var column = IndexColumn()
        for value in values { column.append(value) }
        #expect(column.takeSortedPositions().listed == IndexOrder.sortedPositions(values))
    }
}

/// The in-place radix sort of a compaction's integer column orders by key, then
/// position, as a comparison sort does: keys wide and narrow, negative, repeated.
@Suite struct InPlaceRadixTests {
    @Test(arguments: [(3, 100_000), (1_000, 100_000), (UInt64.max, 100_000), (5, 40), (UInt64.max, 1)] as [(UInt64, Int)])
    func sortsLikeAComparisonSort(distinctKeys: UInt64, count: Int) {
        var random = SplitMix64(seed: distinctKeys &+ UInt64(count))
        var keys: [Int64] = (0..<count).map { _ in
            distinctKeys == .max ? Int64(bitPattern: random.next()) : Int64(bitPattern: random.next() % distinctKeys) - Int64(distinctKeys / 2)
        }
        var positions = (0..<count).map { UInt32($0) }
        let expected = zip(keys, positions).sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
        keys.withUnsafeMutableBufferPointer { keys in
            positions.withUnsafeMutableBufferPointer { InPlaceRadix.sort(keys: keys, positions: $0) }
        }
        #expect(keys == expected.map(\.0))
        #expect(positions == expected.map(\.1))
    }
}

/// The tail's integer index runs sort by key, then ID, whether keys repeat little or much.
@Suite struct KeyThenIDSortTests {
    @Test(arguments: [3, 500, 1_000_000] as [UInt64]) func sortsLikeAComparisonSort(distinctKeys: UInt64) {
        var random = SplitMix64(seed: distinctKeys)
        var pairs: [(key: Int64, id: UInt64)] = (0..<5_000).map { _ in
            (Int64(bitPattern: random.next() % distinctKeys) - Int64(distinctKeys / 2), random.next() >> 8)
        }
        let expected = pairs.sorted { $0.key != $1.key ? $0.key < $1.key : $0.id < $1.id }
        SecondaryIndex.sortByKeyThenID(&pairs)
        #expect(pairs.map(\.key) == expected.map(\.key) && pairs.map(\.id) == expected.map(\.id))
    }
}
