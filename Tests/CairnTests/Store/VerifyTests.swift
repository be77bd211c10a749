import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// `verify` checks what it says it checks, and changes nothing.
@Suite struct VerifyChecksTests {
    /// Options for a read-only open, as `cairn verify` has them.
    static func readOnly(_ fs: any FileSystem) -> StoreOptions {
        var options = memoryOptions(fs)
        options.readOnly = true
        return options
    }

    /// A read-only open with a torn log tail reports what a normal open would cut, and
    /// cuts nothing: the log's bytes are the same after it and after verify.
    @Test func aReadOnlyOpenReportsATornTailAndChangesNothing() throws {
        let canonical = try CanonicalStore(smallTransactions(4, seed: 5))
        var bytes = canonical.logBytes
        let end = canonical.frames.last!.end
        bytes.replaceSubrange(end..<(end + 20), with: [UInt8](repeating: 0xAB, count: 20))
        let image = try canonical.image(replacing: canonical.logPath, with: bytes)
        let store = try Store.open(at: "/db", options: Self.readOnly(image))
        #expect(store.recovery.truncatedAt == Int64(end))
        #expect(store.verify().isEmpty)
        #expect { try store.commit([.delete(RecordID(entity: 1, serial: 1))]) } throws: {
            ($0 as? CairnError)?.message.contains("read-only") == true
        }
        try store.close()
        #expect(image.contents(of: canonical.logPath) == bytes, "a read-only open and verify change nothing")
    }

    /// The CLI's verify says what an open would cut, and leaves the log as it was.
    @Test func cairnVerifyReportsATornTailWithoutCuttingIt() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Store.open(at: directory, schema: TestSchemas.blobs)
        for n in 1...3 { try store.commit([.put(RecordID(entity: 1, serial: UInt64(n)), [.string("r\(n)"), .bytes(Data([1]))])]) }
        let end = try #require(store.log.withLock { $0?.appendOffset })
        try store.close()
        let logPath = directory + "/" + StoreFileName.log(2)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: logPath)))
        bytes.replaceSubrange(end..<(end + 40), with: [UInt8](repeating: 0x5A, count: 40))
        try Data(bytes).write(to: URL(fileURLWithPath: logPath))
        let result = try CLI.run(["verify", directory])
        #expect(result.out.contains("offset \(end)") && result.out.contains("cut"), "\(result.out)\(result.err)")
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: logPath))) == bytes, "verify changed the log")
    }

    /// A store a writer holds is verified as it stands: verify is a reader, so it neither
    /// waits for nor disturbs the writer, and changes no byte.
    @Test func cairnVerifyReadsAStoreAWriterHolds() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try Store.open(at: directory, schema: TestSchemas.blobs)
        defer { try? store.close() }
        for n in 1...3 { try store.commit([.put(RecordID(entity: 1, serial: UInt64(n)), [.string("r\(n)"), .bytes(Data([1]))])]) }
        let before = try directoryContents(directory)
        let result = try CLI.run(["verify", directory])
        #expect(result.status == 0, "\(result.out)\(result.err)")
        #expect(try directoryContents(directory) == before, "verify changed the store")
        try store.commit([.put(RecordID(entity: 1, serial: 4), [.string("r4"), .bytes(Data())])])  // the writer goes on
    }

    /// A record body in the log that a later transaction replaced is decoded by verify
    /// all the same, and reported with the log's path and the body's file offset.
    @Test func verifyDecodesLogBodiesThatLaterTransactionsReplaced() throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs))
        let id = RecordID(entity: 1, serial: 1)
        let first: [Value] = [.string("first-version"), .bytes(Data())]
        try store.commit([.put(id, first)])
        try store.commit([.put(id, [.string("second"), .bytes(Data())])])
        try store.close()
        let logPath = "/db/" + StoreFileName.log(2)
        var bytes = try #require(fs.contents(of: logPath))
        let body = ValueCoding.encode(first)
        let at = try #require((0...(bytes.count - body.count)).first { Array(bytes[$0..<($0 + body.count)]) == body })
        bytes[at] = 1  // one value, then bytes left over: a body that does not decode
        // The frame's checksum made to hold again: only the body is wrong.
        let frame = FileHeader.size
        let length = Int(bytes[frame + 4]) | Int(bytes[frame + 5]) << 8
        let crc = bytes.withUnsafeBytes { CRC32C.masked(UnsafeRawBufferPointer(rebasing: $0[(frame + 4)..<(frame + 32 + length)])) }
        withUnsafeBytes(of: crc.littleEndian) { bytes.replaceSubrange(frame..<(frame + 4), with: $0) }
        try fs.setContents(of: logPath, to: bytes)
        let reopened = try Store.open(at: "/db", options: memoryOptions(fs))
        defer { try? reopened.close() }
        #expect(try reopened.get(id)?.values.first == .string("second"))
        let problems = reopened.verify()
        #expect(problems.contains { $0.path == logPath && $0.offset.map { $0 >= Int64(at) && $0 < Int64(at + body.count) } == true },
                "\(problems)")
    }

    /// A snapshot index entry that overstates its frame's size (into the record area's
    /// padding) is reported by verify, as every read reports it.
    @Test func verifyChecksEachFrameAgainstTheIndexSize() throws {
        for extra in 0..<8 {
            let fs = MemoryFileSystem()
            let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs))
            for n in 1...3 { try store.commit([.put(RecordID(entity: 1, serial: UInt64(n)), [.string("r\(n)" + String(repeating: "x", count: extra)), .bytes(Data())])]) }
            try store.compact()
            let (reader, manifest) = (store.state.withLock { $0.snapshot }, store.log.withLock { $0!.manifest })
            var last: (offset: Int, size: Int)?
            reader.forEach(entity: 1) { _, place in last = (place.offset, place.size) }
            let padding = reader.recordsEnd - (last!.offset + last!.size)
            let range = reader.index.entities[0]
            try store.close()
            guard padding >= 1 else { continue }
            let path = "/db/" + StoreFileName.snapshot(manifest.snapshotNumber)
            var bytes = try #require(fs.contents(of: path))
            let sizeAt = range.entryBytesOffset + range.entryBytesLength - 1  // the last record's frame size (one byte)
            #expect(Int(bytes[sizeAt]) == last!.size)
            bytes[sizeAt] += 1
            var footer = try bytes.withUnsafeBytes { try SnapshotFooter.decode(file: $0) }
            footer.indexChecksum = bytes.withUnsafeBytes {
                CRC32C.masked(UnsafeRawBufferPointer(rebasing: $0[Int(footer.indexOffset)..<Int(footer.indexOffset + footer.indexLength)]))
            }
            bytes.replaceSubrange((bytes.count - SnapshotFooter.size)..., with: footer.encoded())
            try fs.setContents(of: path, to: bytes)
            let damaged = try Store.open(at: "/db", options: memoryOptions(fs))
            defer { try? damaged.close() }
            let problems = damaged.verify()
            #expect(problems.contains { $0.message.contains("where the index says") }, "\(problems)")
            return
        }
        Issue.record("no layout left padding after the last frame")
    }

    /// An error in a record body read from the log names the log and the absolute offset,
    /// not an offset inside the body and no file.
    @Test func aBodyErrorNamesTheLogAndTheAbsoluteOffset() throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs))
        try store.commit([.put(RecordID(entity: 1, serial: 1), [.string("a"), .bytes(Data([1]))])])
        let end = try #require(store.log.withLock { $0?.appendOffset })
        try store.close()
        let logPath = "/db/" + StoreFileName.log(2)
        var bytes = Array(try #require(fs.contents(of: logPath))[..<end])
        let short = RecordID(entity: 1, serial: 2)
        let body = ValueCoding.encode([.string("only one")])
        var frame = ByteWriter()
        LogFrame.append(to: &frame, sequence: 2, syncedThrough: 1) {
            TransactionCoding.encode([.put(short, body: body)], timestamp: 0, into: &$0)
        }
        let bodyAt = end + LogFrame.headerSize + 8 + 1 + 1 + 8 + 1  // time, count, kind, ID, length
        bytes += frame.bytes
        #expect(Array(bytes[bodyAt..<(bodyAt + body.count)]) == body)
        try fs.setContents(of: logPath, to: bytes)
        let reopened = try Store.open(at: "/db", options: memoryOptions(fs))
        defer { try? reopened.close() }
        #expect { try reopened.get(short) } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .corrupt && error.path == logPath && error.offset == Int64(bodyAt)
        }
        #expect(reopened.verify().contains { $0.record == short && $0.path == logPath && $0.offset == Int64(bodyAt) })
    }
}
