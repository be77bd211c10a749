import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Files crafted to break the reader's assumptions (checksums that hold around bad
/// contents, numbers at the edge of their range, work that grows with the square of the
/// input): each gives a typed error, never a trap or a hang.
@Suite struct HostileInputTests {
    /// A log whose tail holds a plausible frame header every 32 bytes, each claiming a
    /// payload to the end of the file. Checking every one would hash O(n²) bytes (hours
    /// for 4 MiB); recovery bounds the work and refuses the file.
    @Test func frameHeadersEverywhereAfterDamageDoNotHangRecovery() throws {
        let canonical = try CanonicalStore(smallTransactions(3, seed: 11))
        var bytes = Array(canonical.logBytes[..<canonical.frames[2].end])
        let size = 4 << 20
        var writer = ByteWriter()
        while bytes.count + writer.count < size {
            let left = size - bytes.count - writer.count
            writer.u32(0)                      // checksum: wrong
            writer.u32(UInt32(left - 32))      // payload to the end of the file
            writer.u64(1_000)                  // sequence
            writer.u64(500)                    // synced-through, past the damage
            writer.u8(LogFrame.typeTransaction)
            writer.append([0, 0, 0, 0, 0, 0, 0])
        }
        bytes += writer.bytes
        let image = try canonical.image(replacing: canonical.logPath, with: bytes)
        #expect { try Store.open(at: "/db", options: memoryOptions(image)) } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .corrupt && error.offset == Int64(canonical.frames[2].end) && error.message.contains("repair")
        }
        // Repair cuts the log at the damage and keeps the three transactions.
        let report = try Store.repair(at: "/db", fileSystem: image)
        #expect(report.keptTransactions == 3)
        let repaired = try Store.open(at: "/db", options: memoryOptions(image))
        #expect(try contents(of: repaired) == canonical.states[3])
        try repaired.close()
    }

    /// Sequence and file numbers near UInt64.max would trap when counted on; the
    /// decoders refuse them.
    @Test func numbersAtTheEdgeOfTheirRangeAreRefused() throws {
        let header = FileHeader(kind: .log, storeID: UUID(), fileNumber: 2, baseSequence: UInt64.max, createdMilliseconds: 0)
        #expect { try header.encoded().withUnsafeBytes { try FileHeader.decode($0, expected: .log) } } throws: {
            ($0 as? CairnError)?.code == .corrupt && ($0 as? CairnError)?.offset == 40
        }
        let manifest = Manifest(header: FileHeader(kind: .manifest, storeID: UUID(), fileNumber: 0, baseSequence: 0,
                                                   createdMilliseconds: 0),
                                snapshotNumber: UInt64.max - 2, logNumber: UInt64.max - 1, nextFileNumber: UInt64.max)
        #expect { try manifest.encoded().withUnsafeBytes { try Manifest.decode($0) } } throws: {
            ($0 as? CairnError)?.code == .corrupt
        }
        var frame = ByteWriter()
        LogFrame.append(to: &frame, sequence: UInt64.max, syncedThrough: 0) {
            TransactionCoding.encode([], timestamp: 0, into: &$0)
        }
        frame.bytes.withUnsafeBytes { buffer in
            guard case .invalid = LogFrame.parse(buffer, at: 0) else {
                Issue.record("a frame with sequence UInt64.max parsed"); return
            }
        }
        // A frame cannot record itself (or later) as durable.
        var selfSynced = ByteWriter()
        LogFrame.append(to: &selfSynced, sequence: 7, syncedThrough: 7) { TransactionCoding.encode([], timestamp: 0, into: &$0) }
        selfSynced.bytes.withUnsafeBytes { buffer in
            guard case .invalid = LogFrame.parse(buffer, at: 0) else { Issue.record("synced-through == sequence parsed"); return }
        }
    }

    /// A record whose checksum holds but whose values do not fit its entity (too few,
    /// wrong type) is reported as corrupt when read, not handed to the object layer.
    @Test func aRecordThatDoesNotFitTheSchemaIsCorrupt() throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs))
        let good = RecordID(entity: 1, serial: 1)
        try store.commit([.put(good, [.string("a"), .bytes(Data([1]))])])
        try store.close()
        let logPath = "/db/" + StoreFileName.log(2)
        var bytes = fs.contents(of: logPath)!
        let end = bytes.withUnsafeBytes { buffer -> Int in
            guard case .frame(_, _, _, let next) = LogFrame.parse(buffer, at: FileHeader.size) else { return 0 }
            return next
        }
        bytes = Array(bytes[..<end])
        let short = RecordID(entity: 1, serial: 2), mistyped = RecordID(entity: 1, serial: 3)
        var frame = ByteWriter()
        LogFrame.append(to: &frame, sequence: 2, syncedThrough: 1) {
            TransactionCoding.encode([.put(short, body: ValueCoding.encode([.string("only one")])),
                                      .put(mistyped, body: ValueCoding.encode([.int64(5), .bytes(Data())]))],
                                     timestamp: 0, into: &$0)
        }
        bytes += frame.bytes
        try fs.setContents(of: logPath, to: bytes)
        let reopened = try Store.open(at: "/db", options: memoryOptions(fs))
        defer { try? reopened.close() }
        #expect(try reopened.get(good)?.values == [.string("a"), .bytes(Data([1]))])
        for id in [short, mistyped] {
            #expect { try reopened.get(id) } throws: { ($0 as? CairnError)?.code == .corrupt }
            #expect { try reopened.getVersioned(id) } throws: { ($0 as? CairnError)?.code == .corrupt }
        }
        #expect { try reopened.records(entity: 1) } throws: { ($0 as? CairnError)?.code == .corrupt }
        #expect(!reopened.verify().isEmpty)
    }

    /// Writers refuse what their reader would refuse, so no file is written that cannot
    /// be read back.
    @Test func writersEnforceTheFormatLimits() throws {
        let long = String(repeating: "n", count: FormatLimits.maxNameBytes + 1)
        let schemas: [(String, Schema)] = [
            ("long entity name", Schema(entities: [EntityDescription(name: long, number: 1)])),
            ("long attribute name", Schema(entities: [EntityDescription(name: "E", number: 1,
                                                                       attributes: [AttributeDescription(name: long, type: .int64)])])),
            ("empty renaming identifier", Schema(entities: [EntityDescription(name: "E", number: 1, renamingIdentifier: "")])),
            ("empty relationship name", Schema(entities: [EntityDescription(name: "E", number: 1, relationships: [
                RelationshipDescription(name: "", destination: "E")])])),
        ]
        for (label, schema) in schemas {
            #expect(throws: CairnError.self, "\(label)") { try schema.validate() }
            #expect(throws: CairnError.self, "\(label)") {
                try Store.open(at: "/db", schema: schema, options: memoryOptions(MemoryFileSystem()))
            }
        }
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(MemoryFileSystem()))
        defer { try? store.close() }
        // calloc'd: no pages are touched.
        let huge = Data(count: FormatLimits.maxValueBytes + 1)
        #expect { try store.commit([.put(RecordID(entity: 1, serial: 1), [.string("x"), .bytes(huge)])]) } throws: {
            ($0 as? CairnError)?.code == .tooLarge
        }
        #expect(store.lastSequence == 0)
    }
}
