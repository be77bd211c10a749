import Foundation
import Testing
@testable import Cairn
@_spi(Storage) @testable import CairnStorage

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
}
