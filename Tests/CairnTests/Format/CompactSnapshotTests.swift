import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Format version 3 snapshots (FORMAT.md §6.1, §6.3): compact frames, anchors and entry
/// bytes. Lookups across group boundaries and ID gaps, an index whose checksums were
/// fixed over wrong bytes, and salvage of frames that lie at any byte.
@Suite struct CompactSnapshotTests {
    static let schema = TestSchemas.people

    /// The FORMAT.md §6.1 example, byte for byte.
    @Test func aFrameIsWhatTheFormatSays() throws {
        let body = ValueCoding.encode([.string("bob"), .string("Bob"), .int64(0), .references([])])
        var writer = ByteWriter()
        let size = body.withUnsafeBytes { SnapshotRecord.append(to: &writer, id: RecordID(entity: 1, serial: 2), body: $0) }
        #expect(size == 22)
        #expect(writer.bytes == [0x87, 0xe2, 0x56, 0x27, 0x0f, 0x01, 0x02] + body)
        try writer.bytes.withUnsafeBytes { buffer in
            let read = try SnapshotRecord.body(in: buffer, at: 0, limit: buffer.count, expected: RecordID(entity: 1, serial: 2), version: 3)
            #expect(Array(read) == body)
            #expect { try SnapshotRecord.body(in: buffer, at: 0, limit: buffer.count, expected: RecordID(entity: 1, serial: 3), version: 3) }
                throws: { ($0 as? CairnError)?.message.contains("where the index says") == true }
            // One byte short of the frame: the body length runs past the limit.
            #expect { try SnapshotRecord.body(in: buffer, at: 0, limit: buffer.count - 1, expected: RecordID(entity: 1, serial: 2), version: 3) }
                throws: { ($0 as? CairnError)?.code == .corrupt && ($0 as? CairnError)?.offset == 0 }
        }
        for i in 0..<writer.count {
            var damaged = writer.bytes
            damaged[i] ^= 0x10
            damaged.withUnsafeBytes { buffer in
                _ = #expect(throws: CairnError.self) {
                    try SnapshotRecord.body(in: buffer, at: 0, limit: buffer.count, expected: RecordID(entity: 1, serial: 2), version: 3)
                }
            }
        }
    }

    static func body(_ id: RecordID) -> [UInt8] {
        if id.entity == 1 {
            // Some bodies past 127 bytes, so frame sizes take two varint bytes; one past 16 KiB, three.
            let name = String(repeating: "n", count: id.serial % 7 == 0 ? 200 : id.serial == 9 ? 20_000 : Int(id.serial % 5))
            return ValueCoding.encode([.string(name), .int64(Int64(id.serial) * 3), .references([])])
        }
        return ValueCoding.encode([.string("dvd-\(id.serial)"), .null, .null])
    }

    /// Writes a snapshot of `people` records and `dvds` records with the given serials.
    static func write(people: [UInt64], dvds: [UInt64], to fs: MemoryFileSystem, path: String = "/d/s.snapshot") throws {
        try? fs.createDirectory("/d")
        let file = try fs.open(path, create: true, truncate: true)
        defer { file.close() }
        var writer = SnapshotWriter(file: file, header: FileHeader(kind: .snapshot, storeID: UUID(), fileNumber: 1, baseSequence: 0,
                                                                   createdMilliseconds: 0),
                                    schema: schema)
        for (entity, serials) in [(UInt16(1), people), (UInt16(2), dvds)] {
            writer.beginEntity(entity)
            for serial in serials {
                let id = RecordID(entity: entity, serial: serial)
                try Self.body(id).withUnsafeBytes { try writer.append(id: id, body: $0) }
            }
        }
        _ = try writer.finish(lastSequence: 0, nextSerial: (people + dvds).max().map { $0 + 1 } ?? 1)
    }

    /// Serials with gaps: runs of one, big jumps, a jump past 2^40.
    static func serials(_ count: Int, seed: UInt64) -> [UInt64] {
        var random = SplitMix64(seed: seed)
        var serial: UInt64 = 0
        return (0..<count).map { i in
            serial += i == count / 2 ? 1 << 40 : [1, 1, 1, 2, 3, 130, 20_000][Int(random.next() % 7)]
            return serial
        }
    }

    @Test(arguments: [0, 1, 15, 16, 17, 33, 200])
    func everyRecordIsFoundAndNothingElse(count: Int) throws {
        let fs = MemoryFileSystem()
        let people = Self.serials(count, seed: UInt64(count)), dvds: [UInt64] = [5, 6, 7]
        try Self.write(people: people, dvds: dvds, to: fs)
        let reader = try SnapshotReader(file: try fs.open("/d/s.snapshot", create: false, truncate: false))
        #expect(reader.header.version == FileHeader.currentVersion)
        for (entity, serials) in [(UInt16(1), people), (UInt16(2), dvds)] {
            #expect(reader.count(of: entity) == serials.count)
            var listed: [UInt64] = []
            try reader.forEach(entity: entity) { id, offset in
                listed.append(id.serial)
                let body = try reader.body(at: offset, id: id)
                #expect(Array(body) == Self.body(id))
            }
            #expect(listed == serials)
            for serial in serials {
                let id = RecordID(entity: entity, serial: serial)
                let offset = try #require(reader.offset(of: id))
                #expect(Array(try reader.body(at: offset, id: id)) == Self.body(id))
            }
            // IDs that are not there: below, between, above.
            let present = Set(serials)
            var absent: [UInt64] = [1, 2, 3, 4, 8, (serials.last ?? 0) + 1, RecordID.maxSerial]
            for serial in serials { absent += [serial - 1, serial + 1] }
            for serial in absent where serial >= 1 && !present.contains(serial) {
                #expect(reader.offset(of: RecordID(entity: entity, serial: serial)) == nil, "\(entity)-\(serial)")
            }
        }
        #expect(reader.offset(of: RecordID(entity: 3, serial: 1)) == nil)
    }

    /// Writes the snapshot the tests of changed index entries change: 40 people with gapped
    /// serials and 3 DVDs.
    static func writeChangeable(to fs: MemoryFileSystem) throws -> (people: [UInt64], dvds: [UInt64]) {
        let people = Self.serials(40, seed: 7), dvds: [UInt64] = [3, 4, 90]
        try Self.write(people: people, dvds: dvds, to: fs)
        return (people, dvds)
    }

    /// Runs `body(byte, mask)` with `/d/s.snapshot` changed at each byte of its index
    /// entries by each of four masks, the index and footer checksums fixed over the change
    /// (a buggy writer, not a bad disk); with `unchangedFirst`, first as it is (byte -1).
    static func withEveryEntryChanged(in fs: MemoryFileSystem, unchangedFirst: Bool = false,
                                      _ body: (Int, UInt8) throws -> Void) throws {
        let original = try #require(fs.contents(of: "/d/s.snapshot"))
        let footer = try original.withUnsafeBytes { try SnapshotFooter.decode(file: $0) }
        let index = try original.withUnsafeBytes {
            try SnapshotIndex.decode(file: $0, indexOffset: Int(footer.indexOffset), indexLength: Int(footer.indexLength))
        }
        let entriesStart = try #require(index.entities.first?.entriesOffset)
        let indexEnd = Int(footer.indexOffset + footer.indexLength)
        for at in (unchangedFirst ? [-1] : []) + Array(entriesStart..<indexEnd) {
            for mask: UInt8 in at < 0 ? [0] : [0x01, 0x02, 0x80, 0xFF] {
                var bytes = original
                if at >= 0 { bytes[at] ^= mask }
                var fixed = footer
                fixed.indexChecksum = CRC32C.masked(bytes[Int(footer.indexOffset)..<indexEnd])
                bytes.replaceSubrange((bytes.count - SnapshotFooter.size)..., with: fixed.encoded())
                try fs.setContents(of: "/d/s.snapshot", to: bytes)
                try body(at, mask)
            }
        }
    }

    /// Every byte of the index entries changed, with the index and footer checksums fixed
    /// over the change (a buggy writer, not a bad disk): open refuses with a corruption
    /// error, or what it opens never hands back another record's body, and nothing traps.
    @Test func anIndexChangedUnderGoodChecksumsIsRefusedOrCaughtOnRead() throws {
        let fs = MemoryFileSystem()
        let (people, dvds) = try Self.writeChangeable(to: fs)
        let ids = people.map { RecordID(entity: 1, serial: $0) } + dvds.map { RecordID(entity: 2, serial: $0) }
        var refused = 0, opened = 0
        try Self.withEveryEntryChanged(in: fs) { at, mask in
            let reader: SnapshotReader
            do {
                reader = try SnapshotReader(file: try fs.open("/d/s.snapshot", create: false, truncate: false))
            } catch let error as CairnError {
                #expect(error.code == .corrupt)
                refused += 1
                return
            }
            opened += 1
            func check(_ id: RecordID, _ offset: Int) {
                do {
                    let body = try reader.body(at: offset, id: id)
                    #expect(Array(body) == Self.body(id), "byte \(at) ^ \(mask): \(id) read another record's body")
                } catch let error as CairnError {
                    #expect(error.code == .corrupt)
                } catch {
                    Issue.record("byte \(at) ^ \(mask): \(error)")
                }
            }
            for id in ids { if let offset = reader.offset(of: id) { check(id, offset) } }
            for entity: UInt16 in [1, 2] { reader.forEach(entity: entity) { check($0, $1.offset) } }
        }
        // Most changes break the structure; an ID delta moved by a little still reads,
        // and the frame then names the ID it holds.
        #expect(refused > 3 * opened, "refused \(refused), opened \(opened)")
    }

    /// With the entries' structure checked on the checksums' thread (as a store's open
    /// does), the same changed indexes as above: lookups made before the check is known
    /// trap on none of them, and the check refuses exactly the indexes that checking at
    /// open refuses, with the same error; an index it passes answers every lookup as the
    /// reader that checked at open does.
    @Test func entriesCheckedInTheBackgroundRefuseWhatTheOpenRefuses() throws {
        let fs = MemoryFileSystem()
        let (people, dvds) = try Self.writeChangeable(to: fs)
        var probes = people.map { RecordID(entity: 1, serial: $0) } + dvds.map { RecordID(entity: 2, serial: $0) }
        probes += [1, 2, 5, 89, 91, RecordID.maxSerial].flatMap { [RecordID(entity: 1, serial: $0), RecordID(entity: 2, serial: $0)] }
        var refused = 0, passed = 0
        try Self.withEveryEntryChanged(in: fs, unchangedFirst: true) { at, mask in
            func open(background: Bool) throws -> SnapshotReader {
                try SnapshotReader(file: try fs.open("/d/s.snapshot", create: false, truncate: false),
                                   backgroundChecksumMinimum: background ? 0 : nil)
            }
            let checkedAtOpen: Result<SnapshotReader, CairnError>
            do { checkedAtOpen = .success(try open(background: false)) } catch let error as CairnError { checkedAtOpen = .failure(error) }
            let reader: SnapshotReader
            do {
                reader = try open(background: true)
            } catch let error as CairnError {
                // Refused by the checks still made at open (the index's tables).
                guard case .failure(let expected) = checkedAtOpen else {
                    Issue.record("byte \(at) ^ \(mask): refused in the background only: \(error)")
                    return
                }
                #expect(error.message == expected.message)
                return
            }
            // Lookups before the check is known: any answer, no trap.
            let early = probes.map { reader.offset(of: $0) }
            _ = probes.map { reader.contains($0) }
            switch checkedAtOpen {
            case .failure(let expected):
                refused += 1
                #expect(throws: CairnError.self, "byte \(at) ^ \(mask)") { try reader.awaitIndexChecksum() }
                do { try reader.awaitIndexChecksum() } catch let error as CairnError {
                    #expect(error.message == expected.message, "byte \(at) ^ \(mask)")
                }
            case .success(let checked):
                passed += 1
                #expect(throws: Never.self, "byte \(at) ^ \(mask)") { try reader.awaitIndexChecksum() }
                #expect(early == probes.map { checked.offset(of: $0) }, "byte \(at) ^ \(mask)")
                #expect(probes.map { reader.contains($0) } == probes.map { checked.contains($0) })
            }
        }
        #expect(refused > 3 * passed && passed > 1, "refused \(refused), passed \(passed)")
    }

    /// Repair walks version-3 frames byte by byte when the index is gone: every record
    /// but the damaged one comes back, and nothing is made up from the index's bytes.
    @Test func repairSalvagesCompactFramesWithoutTheIndex() throws {
        let fs = MemoryFileSystem()
        let (store, ids, initial) = try Self.people(60, in: fs) { id in
            [.string(String(repeating: "x", count: Int(id.serial % 9) * 20)), .int64(Int64(id.serial)), .references([])]
        }
        var expected = initial
        try store.compact()
        try store.close()
        let (path, original, reader) = try Self.currentSnapshot(fs)
        var bytes = original
        let victim = ids[23]
        let victimBody = try reader.body(at: try #require(reader.offset(of: victim)), id: victim)
        let victimAt = reader.fileOffset(of: victimBody)
        let indexAt = Int(reader.footer.indexOffset) + 30
        bytes[victimAt + 3] ^= 0x20
        bytes[indexAt] ^= 0x01  // the index checksum fails: open refuses, repair rebuilds
        try fs.setContents(of: path, to: bytes)
        #expect(throws: CairnError.self) { try Store.open(at: "/db", options: memoryOptions(fs)).close() }

        let report = try Store.repair(at: "/db", fileSystem: fs)
        #expect(report.salvagedRecords == 59)
        #expect(report.damagedSnapshotRegions == 1)
        expected[victim] = nil
        let repaired = try Store.open(at: "/db", options: memoryOptions(fs))
        defer { try? repaired.close() }
        #expect(try contents(of: repaired) == expected)
        #expect(repaired.verify().isEmpty)
    }

    /// Compaction copies a current-version frame as it is (its checksum checked once, not
    /// computed again): a second compaction writes the same frames, a record changed
    /// in the log between them is written anew, and a damaged frame stops the compaction
    /// with `.corrupt` rather than being copied.
    @Test func compactionCopiesCheckedFramesAsTheyAre() throws {
        let fs = MemoryFileSystem()
        let (store, ids, initial) = try Self.people(40, in: fs) { id in
            [.string("p\(id.serial)"), .int64(Int64(id.serial % 7)), .references([])]
        }
        var expected = initial
        try store.compact()
        let first = try Self.currentSnapshot(fs)
        try store.compact()
        let second = try Self.currentSnapshot(fs)
        #expect(first.path != second.path)
        for id in ids {
            let places = (try #require(first.reader.place(of: id)), try #require(second.reader.place(of: id)))
            let a = try #require(try first.reader.currentFrame(at: places.0, id: id))
            let b = try #require(try second.reader.currentFrame(at: places.1, id: id))
            #expect(Array(a.frame) == Array(b.frame))
        }

        let changed: [Value] = [.string("changed"), .int64(99), .references([])]
        try store.commit([.put(ids[5], changed)])
        expected[ids[5]] = changed
        try store.compact()
        #expect(try contents(of: store) == expected)
        #expect(store.verify().isEmpty)
        try store.close()

        let third = try Self.currentSnapshot(fs)
        var bytes = third.bytes
        let victim = ids[17]
        let body = try third.reader.body(at: try #require(third.reader.offset(of: victim)), id: victim)
        bytes[third.reader.fileOffset(of: body)] ^= 0x04
        try fs.setContents(of: third.path, to: bytes)
        let damaged = try Store.open(at: "/db", options: memoryOptions(fs))
        defer { try? damaged.close() }
        #expect {
            try damaged.compact()
        } throws: { error in
            (error as? CairnError)?.code == .corrupt
        }
    }

    /// A store at "/db" in `fs` with `count` people whose values `values` gives, in one
    /// commit (not compacted); the store, the IDs and the contents.
    static func people(_ count: Int, in fs: MemoryFileSystem,
                       values: (RecordID) -> [Value]) throws -> (store: Store, ids: [RecordID], contents: Contents) {
        let store = try Store.open(at: "/db", schema: schema, options: memoryOptions(fs))
        var contents: Contents = [:]
        let ids = try (0..<count).map { _ in try store.allocateID(entity: 1) }
        try store.commit(ids.map { id in
            contents[id] = values(id)
            return .put(id, values(id))
        })
        return (store, ids, contents)
    }

    /// The snapshot the manifest at "/db" in `fs` names: its path, bytes and a reader.
    static func currentSnapshot(_ fs: MemoryFileSystem) throws -> (path: String, bytes: [UInt8], reader: SnapshotReader) {
        let manifest = try Store.readManifest(in: "/db", fileSystem: fs)
        let path = "/db/" + StoreFileName.snapshot(manifest.snapshotNumber)
        let bytes = try #require(fs.contents(of: path))
        return (path, bytes, try SnapshotReader(file: try fs.open(path, create: false, truncate: false)))
    }
}

/// The fast walk of a version-3 index group at open against the walk that says what is
/// wrong: it may give up on a group, but what it accepts the careful walk accepts too,
/// with the same last ID, frame end and entry end, and it accepts every group whose
/// varints are of one or two bytes and whose checks pass.
@Suite struct QuickGroupTests {
    @Test func quickGroupAgreesWithCheckGroup() throws {
        var random = SplitMix64(seed: 11)
        var accepted = 0, givenUp = 0, acceptedUsual = 0
        for round in 0..<20_000 {
            // A third of the rounds: full groups of one-byte varints, the usual group (read
            // 8 bytes at a time), with a delta of 0 or a size under the minimum now and then.
            let usual = round % 3 == 0
            let members = usual ? 16 : Int(random.next() % 16) + 1
            var bytes: [UInt8] = []
            var short = true  // every varint written in one or two bytes
            func varint(_ value: UInt64) {
                var v = value
                // Sometimes padded with a redundant continuation byte (still a valid varint).
                let padded = random.next() % 16 == 0
                var written = 0
                while v >= 0x80 || (padded && written == 0) {
                    bytes.append(UInt8(truncatingIfNeeded: v) | 0x80); v >>= 7; written += 1
                }
                bytes.append(UInt8(v)); written += 1
                if written > 2 { short = false }
            }
            for member in 0..<members {
                if usual {
                    if member > 0 { bytes.append(random.next() % 64 == 0 ? 0 : UInt8(1 + random.next() % 127)) }
                    bytes.append(random.next() % 64 == 0 ? UInt8(random.next() % 7) : UInt8(7 + random.next() % 121))
                    continue
                }
                if member > 0 { varint(random.next() % 8 == 0 ? random.next() % 20_000 : random.next() % 200) }
                varint(random.next() % 8 == 0 ? random.next() % 40_000 : random.next() % 300)
            }
            if round % 5 == 0, !bytes.isEmpty {
                bytes[Int(random.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: random.next())
                short = false  // the changed byte may make a longer varint
            }
            if round % 7 == 0, !bytes.isEmpty { bytes.removeLast(Int(random.next() % UInt64(bytes.count))) }
            let entity = UInt16(random.next() % 3 == 0 ? 65_535 : 1 + random.next() % 100)
            let highest = UInt64(entity) << RecordID.serialBits | RecordID.maxSerial
            let id = highest - (random.next() % 2 == 0 ? random.next() % 3_000 : random.next() % RecordID.maxSerial)
            let frameEnd = 64 + Int(random.next() % 1_000)
            let recordsEnd = frameEnd + Int(random.next() % 2 == 0 ? random.next() % 5_000 : random.next() % 1_000_000)

            let quick = bytes.withUnsafeBytes {
                SnapshotReader.quickGroup($0, from: 0, to: $0.count, members: members, id: id, highest: highest,
                                          frameEnd: frameEnd, recordsEnd: recordsEnd)
            }
            let careful = bytes.withUnsafeBytes { buffer -> (id: UInt64, frameEnd: Int, end: Int)? in
                var reader = ByteReader(buffer)
                guard let walked = try? SnapshotReader.checkGroup(&reader, members: members, id: id, highest: highest,
                                                                  frameEnd: frameEnd, recordsEnd: recordsEnd, entity: entity) else { return nil }
                return (walked.id, walked.frameEnd, reader.position)
            }
            if let quick {
                accepted += 1
                if usual && bytes.count == 31 { acceptedUsual += 1 }
                let careful = try #require(careful, "round \(round): accepted by the quick walk only")
                #expect(quick.id == careful.id && quick.frameEnd == careful.frameEnd && quick.end == careful.end, "round \(round)")
            } else if careful != nil {
                givenUp += 1
                #expect(!short, "round \(round): a group of short varints whose checks pass was given up")
            }
        }
        #expect(accepted > 1_000 && givenUp > 100 && acceptedUsual > 1_000,
                "accepted \(accepted) (full groups of one-byte varints \(acceptedUsual)), given up \(givenUp)")
    }
}

