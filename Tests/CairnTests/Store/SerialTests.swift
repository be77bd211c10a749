import Foundation
import Testing
@testable import Cairn

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
}
