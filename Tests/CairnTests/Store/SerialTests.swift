import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Record IDs are never handed out twice: not after a footer that claims too little, not
/// after a repair drops transactions.
@Suite struct SerialTests {
    /// A store of five records E1-1 … E1-5, compacted, with its snapshot footer's next
    /// serial rewritten to `claimed` (checksum fixed, so only the claim is wrong).
    static func storeWithFooterClaiming(_ claimed: UInt64) throws -> MemoryFileSystem {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs))
        for _ in 1...5 {
            let id = try store.allocateID(entity: 1)
            try store.commit([.put(id, [.string("r\(id.serial)"), .bytes(Data())])])
        }
        try store.compact()
        try store.close()
        let manifest = try Store.readManifest(in: "/db", fileSystem: fs)
        let path = "/db/" + StoreFileName.snapshot(manifest.snapshotNumber)
        var bytes = try #require(fs.contents(of: path))
        var footer = try bytes.withUnsafeBytes { try SnapshotFooter.decode(file: $0) }
        #expect(footer.nextSerial == 6)
        footer.nextSerial = claimed
        bytes.replaceSubrange((bytes.count - SnapshotFooter.size)..., with: footer.encoded())
        try fs.setContents(of: path, to: bytes)
        return fs
    }

    @Test func aFooterThatClaimsTooLowANextSerialIsNotTrusted() throws {
        let fs = try Self.storeWithFooterClaiming(1)
        let store = try Store.open(at: "/db", options: memoryOptions(fs))
        defer { try? store.close() }
        let id = try store.allocateID(entity: 1)
        #expect(id.serial == 6, "E1-1 … E1-5 exist; a new record must not take one of their IDs")
        let problems = store.verify()
        #expect(problems.contains { $0.message.contains("next serial 1") && $0.message.contains("E1-5") }, "\(problems)")
    }

    @Test func repairNeverHandsOutTheSerialsOfDroppedTransactions() throws {
        let fs = MemoryFileSystem()
        do {
            let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs))
            for _ in 1...5 {
                let id = try store.allocateID(entity: 1)
                try store.commit([.put(id, [.string("r\(id.serial)"), .bytes(Data())])])
            }
            try store.close()
        }
        let logPath = "/db/" + StoreFileName.log(2)
        var bytes = try #require(fs.contents(of: logPath))
        let third = bytes.withUnsafeBytes { buffer -> Int in
            var offset = FileHeader.size
            for _ in 0..<2 { if case .frame(_, _, _, let next) = LogFrame.parse(buffer, at: offset) { offset = next } }
            return offset
        }
        bytes[third + 40] ^= 0x01  // transaction 3 is damaged; 4 and 5, written after it was durable, are dropped
        try fs.setContents(of: logPath, to: bytes)
        #expect(throws: CairnError.self) { try Store.open(at: "/db", options: memoryOptions(fs)) }
        let report = try Store.repair(at: "/db", fileSystem: fs)
        #expect(report.keptTransactions == 2)
        #expect(report.droppedTransactions == [4, 5])
        for round in 0..<2 {  // right after the repair, and after a reopen
            let store = try Store.open(at: "/db", options: memoryOptions(fs))
            #expect(store.count(entity: 1) == 2 + round)
            let id = try store.allocateID(entity: 1)
            #expect(id.serial >= 6 + UInt64(round), "round \(round): E1-3 … E1-5 named records before the repair; got \(id)")
            try store.commit([.put(id, [.string("new"), .bytes(Data())])])
            #expect(store.verify().isEmpty)
            try store.close()
        }
    }

    /// A log transaction naming serial 0 is corrupt (it passed open before, and the next
    /// compaction wrote a snapshot that no open could read).
    @Test func aLoggedSerialZeroIsCorrupt() throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs))
        try store.commit([.put(RecordID(entity: 1, serial: 1), [.string("a"), .bytes(Data())])])
        let end = try #require(store.log.withLock { $0?.appendOffset })
        try store.close()
        let logPath = "/db/" + StoreFileName.log(2)
        var bytes = Array(try #require(fs.contents(of: logPath))[..<end])
        var frame = ByteWriter()
        LogFrame.append(to: &frame, sequence: 2, syncedThrough: 1) {
            TransactionCoding.encode([.put(RecordID(entity: 1, serial: 0), body: ValueCoding.encode([.string("z"), .bytes(Data())]))],
                                     timestamp: 0, into: &$0)
        }
        try fs.setContents(of: logPath, to: bytes + frame.bytes)
        #expect { try Store.open(at: "/db", options: memoryOptions(fs)) } throws: { error in
            (error as? CairnError)?.code == .corrupt && (error as? CairnError)?.message.contains("serial 0") == true
        }
        bytes.removeAll()
    }

    /// A reference value must name a record ID of its relationship's destination: a
    /// writer refuses another entity's, an unknown entity's and serial 0.
    @Test func writersRefuseReferencesNoRecordCouldHave() throws {
        let schema = Schema(entities: [
            EntityDescription(name: "A", number: 1, relationships: [RelationshipDescription(name: "b", destination: "B", isOptional: true)]),
            EntityDescription(name: "B", number: 2),
        ])
        let store = try Store.open(at: "/db", schema: schema, options: memoryOptions(MemoryFileSystem()))
        defer { try? store.close() }
        try store.commit([.put(RecordID(entity: 2, serial: 1), [])])
        try store.commit([.put(RecordID(entity: 1, serial: 2), [.reference(RecordID(entity: 2, serial: 1).rawValue)])])
        for bad in [RecordID(entity: 9, serial: 1), RecordID(entity: 1, serial: 2), RecordID(entity: 2, serial: 0)] {
            #expect(throws: CairnError.self, "\(bad)") {
                try store.commit([.put(RecordID(entity: 1, serial: 3), [.reference(bad.rawValue)])])
            }
        }
    }
}
