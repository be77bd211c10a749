import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Reads that copy the log's tables out of the store (`ids(entity:)`, scans) while
/// another thread commits inserts and deletes. Run under the thread sanitizer in CI: a
/// read let go of its copy outside the lock, and the commit that then wrote the shared
/// table in place (no copy was left) was reported as racing with the read. The order
/// was there (the reference count's), the sanitizer could not see it.
@Suite struct ReadWhileCommitTests {
    @Test func readsOfTheLogTailWhileCommitsInsertAndDelete() throws {
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(MemoryFileSystem(), durability: .deferred))
        let done = Locked(false)
        let writer = Thread {
            var serial: UInt64 = 1
            while !done.value {
                _ = try? store.commit([.put(RecordID(entity: 1, serial: serial), [.string("a"), .bytes(Data())])])
                if serial > 3 { _ = try? store.commit([.delete(RecordID(entity: 1, serial: serial - 3))]) }
                serial += 1
            }
            done.withLock { $0 = false }
        }
        writer.start()
        for round in 0..<2_000 {
            let ids = store.ids(entity: 1)
            #expect(ids.count <= 4 && ids == ids.sorted(), "round \(round): \(ids)")
            var scanned = 0
            try store.scan(entity: 1) { _, _ in scanned += 1 }
            #expect(scanned <= 4)
        }
        done.withLock { $0 = true }
        while done.value { Thread.sleep(forTimeInterval: 0.001) }  // the writer has stopped
    }

    /// Bodies read from the log's mapping while another thread commits (mapping the log
    /// anew as it grows) and compacts (retiring it): every read gives the bytes committed.
    @Test func bodiesReadWhileTheLogIsMappedAnewAndRetired() throws {
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(MemoryFileSystem(), durability: .deferred))
        @Sendable func values(_ serial: UInt64) -> [Value] { [.string("r\(serial)"), .bytes(Data(repeating: UInt8(truncatingIfNeeded: serial), count: 300))] }
        try store.commit((1...50).map { .put(RecordID(entity: 1, serial: $0), values($0)) })
        let done = Locked(false), compactions = Locked(0)
        let writer = Thread {
            var serial: UInt64 = 51
            while !done.value {
                _ = try? store.commit((serial..<(serial + 20)).map { .put(RecordID(entity: 1, serial: $0), values($0)) })
                serial += 20
                if serial % 400 == 11, (try? store.compact()) != nil { compactions.withLock { $0 += 1 } }
            }
            done.withLock { $0 = false }
        }
        writer.start()
        var round = 0
        while round < 1_000 || compactions.value < 5 {
            round += 1
            for serial in [1, 25, 50] as [UInt64] {
                #expect(try store.get(RecordID(entity: 1, serial: serial))?.values == values(serial), "round \(round)")
            }
            if round % 50 == 0 {
                try store.scan(entity: 1) { id, body in
                    let decoded = try body.values()
                    #expect(decoded == values(id.serial), "round \(round), \(id)")
                }
            }
        }
        done.withLock { $0 = true }
        while done.value { Thread.sleep(forTimeInterval: 0.001) }
    }
}
