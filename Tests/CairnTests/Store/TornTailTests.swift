import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Torn last frames at the production preallocation (4 MiB), with frames smaller and
/// larger than it: what a crash mid-write leaves, which must open by itself.
@Suite struct TornTailTests {
    /// Options as an app has them (the default preallocation), in memory.
    static func productionOptions(_ fs: MemoryFileSystem, streamed: Bool = false) -> StoreOptions {
        var options = StoreOptions(fileSystem: fs, compaction: .manual)
        if streamed {
            options.streamedFramesMinimum = 0
            options.framePieceBytes = 64 << 10
        }
        return options
    }

    /// A store of three small transactions, then one whose frame holds `size` bytes of
    /// random data (which supplies plenty of would-be frame headers to the probe after
    /// damage). Returns the file system, the log's path, the last frame's extent and the
    /// contents before it.
    static func storeWithLargeLastFrame(size: Int, seed: UInt64, streamed: Bool)
        throws -> (fs: MemoryFileSystem, log: String, last: Range<Int>, before: Contents) {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: productionOptions(fs, streamed: streamed))
        var workload = BlobWorkload(seed: seed)
        for _ in 0..<3 { try store.commit(workload.nextTransaction()) }
        let before = try contents(of: store)
        var random = SplitMix64(seed: seed)
        let blob = (0..<size).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        try store.commit([.put(RecordID(entity: 1, serial: 1000), [.string("large"), .bytes(Data(blob))])])
        try store.close()
        let log = "/db/" + StoreFileName.log(2)
        let bytes = try #require(fs.contents(of: log))
        let frames = bytes.withUnsafeBytes { buffer in
            var result: [Range<Int>] = []
            var offset = FileHeader.size
            while case .frame(_, _, _, let next) = LogFrame.parse(buffer, at: offset) { result.append(offset..<next); offset = next }
            return result
        }
        #expect(frames.count == 4)
        return (fs, log, try #require(frames.last), before)
    }

    /// Zeroing the last frame from any point on (the file keeps its size, as preallocated
    /// space does) opens, cutting that frame only: at 4 KiB, 64 KiB, 1 MiB and a frame
    /// larger than the preallocation, written whole and in pieces.
    @Test(arguments: [(4 << 10, false), (64 << 10, false), (1 << 20, false), (5 << 20, false), (5 << 20, true)])
    func aTornLastFrameOfAnySizeOpens(size: Int, streamed: Bool) throws {
        let (fs, log, last, before) = try Self.storeWithLargeLastFrame(size: size, seed: UInt64(size), streamed: streamed)
        let original = try #require(fs.contents(of: log))
        var random = SplitMix64(seed: 7)
        for round in 0..<6 {
            // Cuts inside the header, early in the payload, and anywhere in it.
            let cut = round == 0 ? last.lowerBound + 5 : last.lowerBound + 32 + Int(random.next() % UInt64(last.count - 40))
            var torn = original
            for i in cut..<last.upperBound { torn[i] = 0 }
            let image = fs.crashImage(.keepAll)
            try image.setContents(of: log, to: torn)
            let store = try Store.open(at: "/db", options: Self.productionOptions(image))
            #expect(store.lastSequence == 3, "cut at \(cut) of \(last)")
            #expect(try contents(of: store) == before, "cut at \(cut)")
            #expect(store.recovery.truncatedAt == Int64(last.lowerBound), "cut at \(cut)")
            // The store goes on from the cut.
            try store.commit([.put(RecordID(entity: 1, serial: 2000), [.string("after"), .bytes(Data([1]))])])
            try store.close()
            let reopened = try Store.open(at: "/db", options: Self.productionOptions(image))
            #expect(reopened.lastSequence == 4)
            #expect(try reopened.get(RecordID(entity: 1, serial: 2000)) != nil)
            try reopened.close()
        }
    }

    /// Damage inside a large frame that a later frame records as durable is still
    /// refused, and the message names that later frame.
    @Test func damageFollowedByADurableFrameIsRefusedNamingIt() throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: Self.productionOptions(fs))
        var random = SplitMix64(seed: 11)
        let blob = (0..<(256 << 10)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        try store.commit([.put(RecordID(entity: 1, serial: 1), [.string("a"), .bytes(Data(blob))])])
        try store.commit([.put(RecordID(entity: 1, serial: 2), [.string("b"), .bytes(Data([2]))])])
        try store.close()
        let log = "/db/" + StoreFileName.log(2)
        var bytes = try #require(fs.contents(of: log))
        let second = bytes.withUnsafeBytes { buffer -> Int in
            guard case .frame(_, _, _, let next) = LogFrame.parse(buffer, at: FileHeader.size) else { return 0 }
            return next
        }
        bytes[FileHeader.size + 1000] ^= 0x10
        let image = fs.crashImage(.keepAll)
        try image.setContents(of: log, to: bytes)
        #expect { try Store.open(at: "/db", options: Self.productionOptions(image)) } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .corrupt && error.offset == Int64(FileHeader.size)
                && error.message.contains("transaction 2 at offset \(second)") && !error.message.contains("too much")
        }
    }
}
