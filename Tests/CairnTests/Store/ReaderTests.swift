import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Readers (`StoreOptions.readOnly`, FORMAT.md §13): an open that succeeds while a writer
/// holds the store, reads one committed state, and changes nothing in the directory.
@Suite struct ReaderTests {
    static func readerOptions(_ fs: any FileSystem = POSIXFileSystem()) -> StoreOptions {
        var options = StoreOptions(fileSystem: fs, compaction: .manual)
        options.createIfMissing = false
        options.readOnly = true
        return options
    }

    static func blob(_ n: Int, _ name: String) -> Change {
        .put(RecordID(entity: 1, serial: UInt64(n)), [.string(name), .bytes(Data(repeating: UInt8(n & 0xFF), count: 100))])
    }

    /// A reader opens while the writer holds the store, keeps the state of its open while
    /// the writer commits and compacts (which retires the files the reader opened), and a
    /// new reader sees the writer's latest commit. The reader refuses writes.
    @Test func aReaderOpensBesideAWriterAndKeepsItsState() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let writer = try Store.open(at: directory, schema: TestSchemas.blobs)
        defer { try? writer.close() }
        try writer.commit((1...200).map { Self.blob($0, "first\($0)") })
        let reader = try Store.open(at: directory, options: Self.readerOptions())
        defer { try? reader.close() }
        let seen = try contents(of: reader)
        #expect(seen.count == 200)

        try writer.commit((1...200).map { Self.blob($0, "second\($0)") })
        _ = try writer.compact()
        try writer.commit([.delete(RecordID(entity: 1, serial: 1))])
        let retired = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(!retired.contains(StoreFileName.snapshot(1)), "the compaction retired the reader's snapshot: \(retired)")

        #expect(try contents(of: reader) == seen, "the reader's state moved")
        #expect(try reader.get(RecordID(entity: 1, serial: 7))?.values.first == .string("first7"))
        #expect(throws: CairnError.self) { try reader.commit([Self.blob(500, "no")]) }
        #expect(throws: CairnError.self) { _ = try reader.compact() }

        let later = try Store.open(at: directory, options: Self.readerOptions())
        defer { try? later.close() }
        #expect(try later.get(RecordID(entity: 1, serial: 1)) == nil)
        #expect(try later.get(RecordID(entity: 1, serial: 7))?.values.first == .string("second7"))
        #expect(later.count(entity: 1) == 199)
    }

    /// With no writer, a reader still changes nothing: not the torn tail it finds (which
    /// it reports, as a writer's open would cut it), not a stray temporary file, not a
    /// checkpoint it cannot use, and it creates no `LOCK`.
    @Test func aReaderChangesNoByteAndNoFile() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var options = StoreOptions(compaction: .manual)
        options.checkpointMinimumRecords = 1
        let writer = try Store.open(at: directory, schema: TestSchemas.blobs, options: options)
        for n in 1...20 { try writer.commit([Self.blob(n, "r\(n)")]) }
        let end = try #require(writer.log.withLock { $0?.appendOffset })
        try writer.close()
        let logPath = directory + "/" + StoreFileName.log(2)
        var log = try [UInt8](Data(contentsOf: URL(fileURLWithPath: logPath)))
        log.replaceSubrange(end..<(end + 30), with: [UInt8](repeating: 0x5A, count: 30))  // a torn frame
        try Data(log).write(to: URL(fileURLWithPath: logPath))
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: directory + "/stray.snapshot.tmp"))
        try FileManager.default.removeItem(atPath: directory + "/" + StoreFileName.lock)
        let before = try directoryContents(directory)
        #expect(before.keys.contains(StoreFileName.checkpoint(2)))

        let reader = try Store.open(at: directory, options: Self.readerOptions())
        #expect(reader.recovery.truncatedAt == Int64(end))
        #expect(reader.recovery.removedFiles.isEmpty)
        #expect(reader.count(entity: 1) == 20)
        try reader.close()
        #expect(try directoryContents(directory) == before)
        // The writer's open then cuts the tail and removes the stray file, as always.
        try Store.open(at: directory).close()
        #expect(!FileManager.default.fileExists(atPath: directory + "/stray.snapshot.tmp"))
    }

    /// While a writer holds the store, bytes past its last whole frame are a frame being
    /// written: the reader stops before them and judges nothing, so it neither reports a
    /// cut nor refuses the store.
    @Test func aReaderStopsBeforeAFrameBeingWritten() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let writer = try Store.open(at: directory, schema: TestSchemas.blobs)
        defer { try? writer.close() }
        for n in 1...5 { try writer.commit([Self.blob(n, "r\(n)")]) }
        let end = try #require(writer.log.withLock { $0?.appendOffset })
        // Half of a frame, as a reader may find it while the writer's write is under way.
        let handle = try #require(FileHandle(forWritingAtPath: directory + "/" + StoreFileName.log(2)))
        try handle.seek(toOffset: UInt64(end))
        try handle.write(contentsOf: [UInt8](repeating: 0x77, count: 24))
        try handle.close()
        let reader = try Store.open(at: directory, options: Self.readerOptions())
        defer { try? reader.close() }
        #expect(reader.count(entity: 1) == 5)
        #expect(reader.recovery.truncatedAt == nil)
        #expect(reader.lastSequence == writer.lastSequence)
    }

    /// Through the in-memory file system, whose read-only handles throw on any write: a
    /// reader's open, reads and close write nothing, with a writer holding the store.
    @Test func aReaderWritesNothingThroughItsHandles() throws {
        let fs = MemoryFileSystem()
        let writer = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs))
        defer { try? writer.close() }
        try writer.commit((1...50).map { Self.blob($0, "r\($0)") })
        let reader = try Store.open(at: "/db", options: Self.readerOptions(fs))
        #expect(try contents(of: reader).count == 50)
        #expect(try reader.history().count == 1)
        try reader.close()
        #expect(throws: CairnError.self) {
            try fs.openForReading("/db/" + StoreFileName.log(2)).write(UnsafeRawBufferPointer(start: nil, count: 0), at: 0)
        }
    }

    /// No store: a reader says so, and creates nothing (not even the directory).
    @Test func aReaderOfNoStoreIsNotFound() throws {
        let directory = temporaryDirectory() + "/missing"
        #expect { try Store.open(at: directory, schema: TestSchemas.blobs, options: Self.readerOptions()) } throws: { error in
            (error as? CairnError)?.code == .notFound
        }
        #expect(!FileManager.default.fileExists(atPath: directory))
    }

    /// A reader moves to the writer's newest state on `advance()`: each transaction the
    /// writer appended, with what it inserted, updated (and which slots) and deleted; a
    /// frame not yet whole is left for the next call; after a compaction, the new files,
    /// with the difference between the two states.
    @Test func aReaderAdvancesTransactionByTransactionAndAcrossACompaction() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let writer = try Store.open(at: directory, schema: TestSchemas.blobs)
        defer { try? writer.close() }
        try writer.commit((1...3).map { Self.blob($0, "r\($0)") })
        let reader = try Store.open(at: directory, options: Self.readerOptions())
        defer { try? reader.close() }
        #expect(try reader.advance().isEmpty)

        let id = { (n: Int) in RecordID(entity: 1, serial: UInt64(n)) }
        try writer.commit([.put(id(4), [.string("r4"), .bytes(Data())])])
        try writer.commit([.put(id(1), [.string("renamed"), .bytes(Data(repeating: 1, count: 100))])])
        try writer.commit([.delete(id(2))])
        #expect(reader.count(entity: 1) == 3)  // nothing moves until asked
        let moved = try reader.advance()
        #expect(moved.map(\.sequence) == [2, 3, 4])
        #expect(moved.map(\.changes) == [[.init(id: id(4), kind: .insert, changedSlots: [])],
                                           [.init(id: id(1), kind: .update, changedSlots: [0])],
                                           [.init(id: id(2), kind: .delete, changedSlots: [])]])
        #expect(reader.lastSequence == 4 && reader.count(entity: 1) == 3)
        #expect(try reader.get(id(1))?.values.first == .string("renamed") && reader.get(id(2)) == nil)
        #expect(try contents(of: reader) == contents(of: writer))

        // Half of the next frame: not taken in until it is whole.
        try writer.commit([.put(id(5), [.string("r5"), .bytes(Data())])])
        let end = try #require(writer.log.withLock { $0?.appendOffset })
        let logPath = directory + "/" + StoreFileName.log(2)
        var log = try [UInt8](Data(contentsOf: URL(fileURLWithPath: logPath)))
        let whole = log
        let frameStart = try #require(reader.log.withLock { $0?.appendOffset })
        log.replaceSubrange((frameStart + (end - frameStart) / 2)..<end, with: [UInt8](repeating: 0, count: end - frameStart - (end - frameStart) / 2))
        try Data(log).write(to: URL(fileURLWithPath: logPath))
        #expect(try reader.advance().isEmpty && reader.lastSequence == 4)
        try Data(whole).write(to: URL(fileURLWithPath: logPath))
        #expect(try reader.advance().map(\.sequence) == [5])

        // A compaction retires the reader's files; later commits go to the new log.
        _ = try writer.compact()
        try writer.commit([.put(id(3), [.string("r3b"), .bytes(Data())]), .delete(id(4))])
        try writer.commit([.put(id(6), [.string("r6"), .bytes(Data())])])
        let across = try reader.advance()
        #expect(across.count == 1 && across.first?.sequence == writer.lastSequence)
        #expect(across.first?.changes == [.init(id: id(3), kind: .update, changedSlots: [0, 1]),
                                          .init(id: id(4), kind: .delete, changedSlots: []),
                                          .init(id: id(6), kind: .insert, changedSlots: [])])
        #expect(try contents(of: reader) == contents(of: writer))
        // And on from there, frame by frame in the new log.
        try writer.commit([.delete(id(6))])
        #expect(try reader.advance().map(\.changes) == [[.init(id: id(6), kind: .delete, changedSlots: [])]])
        #expect(throws: CairnError.self) { _ = try writer.advance() }
    }

    /// A writer's recovery cuts a torn tail by zeroing it in place: the log keeps its size,
    /// so a reader that mapped it before goes on reading (nothing it could read is gone)
    /// and then follows the writer's new frames written over the zeros.
    @Test func aWritersRecoveryZeroesATornTailUnderAReader() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let logPath = directory + "/" + StoreFileName.log(2)
        var first = try Store.open(at: directory, schema: TestSchemas.blobs)
        for n in 1...5 { try first.commit([Self.blob(n, "r\(n)")]) }
        let end = try #require(first.log.withLock { $0?.appendOffset })
        try first.close()
        let handle = try #require(FileHandle(forWritingAtPath: logPath))
        try handle.seek(toOffset: UInt64(end))
        try handle.write(contentsOf: [UInt8](repeating: 0x77, count: 5_000))  // a torn frame, past a page
        try handle.close()
        let size = try #require(FileManager.default.attributesOfItem(atPath: logPath)[.size] as? Int)

        let reader = try Store.open(at: directory, options: Self.readerOptions())
        defer { try? reader.close() }
        #expect(reader.recovery.truncatedAt == Int64(end))
        first = try Store.open(at: directory)
        defer { try? first.close() }
        #expect(first.recovery.truncatedAt == Int64(end))
        let after = try [UInt8](Data(contentsOf: URL(fileURLWithPath: logPath)))
        #expect(after.count == size, "the cut kept the file's size")
        #expect(after[end..<(end + 5_000)].allSatisfy { $0 == 0 })
        #expect(try contents(of: reader).count == 5)
        #expect(try reader.advance().isEmpty)
        try first.commit([Self.blob(6, "r6")])
        #expect(try reader.advance().map(\.sequence) == [6])
        #expect(try contents(of: reader) == contents(of: first))
    }
}
