import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A snapshot reader checks a version-3 frame's checksum the first time a read reaches it
/// through a ``SnapshotReader/Place`` and not again; reads by bare offset, and `verify`,
/// check every time.
@Suite struct CheckedFrameTests {
    /// Every place a scan gives reads the same body before and after its frame was
    /// checked, and the same as a read by offset; a point lookup finds the same place.
    @Test func checkedFramesReadTheSameBodies() throws {
        let fs = MemoryFileSystem()
        let people = (1...90).map { UInt64($0 * 2) }, dvds: [UInt64] = [3, 4, 9]
        try CompactSnapshotTests.write(people: people, dvds: dvds, to: fs)
        let reader = try SnapshotReader(file: try fs.open("/d/s.snapshot", create: false, truncate: false))
        for entity: UInt16 in [1, 2] {
            for round in 0..<2 {
                var seen = 0
                try reader.forEach(entity: entity) { id, place in
                    let body = Array(try reader.body(at: place, id: id))
                    #expect(body == CompactSnapshotTests.body(id), "round \(round): \(id)")
                    #expect(body == Array(try reader.body(at: place.offset, id: id)))
                    #expect(reader.place(of: id) == place)
                    seen += 1
                }
                #expect(seen == (entity == 1 ? people.count : dvds.count))
            }
        }
    }

    /// A checked frame read under another ID is refused as before (the check is done
    /// again, and fails); a damaged frame is refused on every read, not only the first.
    @Test func aCheckedPlaceStillRefusesAnotherIDAndDamageKeepsFailing() throws {
        let fs = MemoryFileSystem()
        try CompactSnapshotTests.write(people: [1, 2, 3, 4, 5], dvds: [], to: fs)
        let reader = try SnapshotReader(file: try fs.open("/d/s.snapshot", create: false, truncate: false))
        let first = RecordID(entity: 1, serial: 1), second = RecordID(entity: 1, serial: 2)
        let place = try #require(reader.place(of: first))
        _ = try reader.body(at: place, id: first)
        #expect(throws: CairnError.self) { try reader.body(at: place, id: second) }

        var bytes = try #require(fs.contents(of: "/d/s.snapshot"))
        let body = try reader.body(at: place.offset, id: first)
        bytes[reader.fileOffset(of: body) + body.count - 1] ^= 0x01
        try fs.setContents(of: "/d/s.snapshot", to: bytes)
        let damaged = try SnapshotReader(file: try fs.open("/d/s.snapshot", create: false, truncate: false))
        let damagedPlace = try #require(damaged.place(of: first))
        for _ in 0..<3 {
            #expect(throws: CairnError.self) { try damaged.body(at: damagedPlace, id: first) }
        }
        #expect(Array(try damaged.body(at: try #require(damaged.place(of: second)), id: second))
                == CompactSnapshotTests.body(second))
    }

    /// `verify` computes every checksum again: bytes that change under a mapped snapshot
    /// after a scan checked them are reported, though scans keep trusting the frames they
    /// checked. (On disk, where the mapping is shared with the file.)
    @Test func verifyChecksFramesAScanAlreadyChecked() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let schema = Schema(entities: [EntityDescription(name: "Note", number: 1, attributes: [
            AttributeDescription(name: "text", type: .string),
        ])])
        let store = try Store.open(at: directory, schema: schema, options: StoreOptions(compaction: .manual))
        defer { try? store.close() }
        let ids = try (0..<50).map { _ in try store.allocateID(entity: 1) }
        try store.commit(ids.map { .put($0, [.string("note \($0.serial) xxxxxxxx")]) })
        try store.compact()
        #expect(try store.records(entity: 1).count == 50)  // every frame checked
        #expect(store.verify().isEmpty)

        let manifest = try Store.readManifest(in: directory, fileSystem: POSIXFileSystem())
        let path = directory + "/" + StoreFileName.snapshot(manifest.snapshotNumber)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let marker = Array("note \(ids[7].serial) x".utf8)
        let at = try #require((0..<(bytes.count - marker.count)).first { Array(bytes[$0..<($0 + marker.count)]) == marker })
        bytes[at + marker.count - 1] = UInt8(ascii: "y")  // still a valid string: only the checksum can tell
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seek(toOffset: UInt64(at + marker.count - 1))
        try handle.write(contentsOf: [bytes[at + marker.count - 1]])
        try handle.close()

        let problems = store.verify()
        #expect(problems.count == 1 && problems.first?.message.contains("checksum") == true, "\(problems)")
    }

    /// Two neighbouring frame sizes in the index changed by the same amount in opposite
    /// directions, under good index and footer checksums: the frames still lie back to
    /// back, so open accepts the index. A read of the first, whose frame is whole but
    /// whose size the index misstates, is refused every time (a later read trusts the
    /// index's size to find the body's end, so the first read must compare it); the
    /// second, which the index now places inside the first, is refused too; the rest read.
    @Test func aFrameSizeTheIndexMisstatesIsRefused() throws {
        let fs = MemoryFileSystem()
        let people: [UInt64] = [1, 2, 3, 4, 5, 6, 8, 10, 11, 12]  // small bodies: one-byte sizes
        try CompactSnapshotTests.write(people: people, dvds: [3], to: fs)
        var bytes = try #require(fs.contents(of: "/d/s.snapshot"))
        var footer = try bytes.withUnsafeBytes { try SnapshotFooter.decode(file: $0) }
        let index = try bytes.withUnsafeBytes {
            try SnapshotIndex.decode(file: $0, indexOffset: Int(footer.indexOffset), indexLength: Int(footer.indexLength))
        }
        // Entity 1's one group: size 0, then (ID delta, size) for each further record.
        let entries = try #require(index.entities.first { $0.entity == 1 }).entryBytesOffset
        #expect(bytes[entries] < 0x80 && bytes[entries + 2] < 0x80 && bytes[entries + 2] >= 12)
        bytes[entries] += 4
        bytes[entries + 2] -= 4
        let indexEnd = Int(footer.indexOffset + footer.indexLength)
        footer.indexChecksum = CRC32C.masked(bytes[Int(footer.indexOffset)..<indexEnd])
        bytes.replaceSubrange((bytes.count - SnapshotFooter.size)..., with: footer.encoded())
        try fs.setContents(of: "/d/s.snapshot", to: bytes)

        let reader = try SnapshotReader(file: try fs.open("/d/s.snapshot", create: false, truncate: false))
        var places: [(RecordID, SnapshotReader.Place)] = []
        reader.forEach(entity: 1) { places.append(($0, $1)) }
        #expect(places.map(\.0.serial) == people)
        for round in 0..<2 {
            #expect(throws: CairnError.self, "round \(round)") { try reader.body(at: places[0].1, id: places[0].0) }
            do {
                _ = try reader.body(at: places[0].1, id: places[0].0)
            } catch let error as CairnError {
                #expect(error.code == .corrupt && error.message.contains("where the index says"), "\(error.message)")
            }
            #expect(throws: CairnError.self, "round \(round)") { try reader.body(at: places[1].1, id: places[1].0) }
            for (id, place) in places.dropFirst(2) {
                #expect(Array(try reader.body(at: place, id: id)) == CompactSnapshotTests.body(id), "\(id), round \(round)")
            }
        }
    }
}
