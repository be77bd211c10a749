import Testing
import Foundation
@testable import Cairn
@testable import CairnStorage

@Suite struct SmokeTests {
    @Test func commitReopen() throws {
        let fs = MemoryFileSystem()
        let schema = TestSchemas.people
        let options = StoreOptions(fileSystem: fs, compaction: .manual, preallocationBytes: 4096)
        var ids: [RecordID] = []
        do {
            let store = try Store.open(at: "/db", schema: schema, options: options)
            for i in 0..<10 {
                let id = try store.allocateID(entity: 1)
                ids.append(id)
                try store.commit([.put(id, [.string("user\(i)"), .int64(Int64(i)), .references([])])])
            }
            #expect(store.count(entity: 1) == 10)
            try store.commit([.delete(ids[3])])
            try store.compact()
            try store.commit([.put(ids[4], [.string("changed"), .int64(44), .references([])])])
            try store.close()
        }
        let store = try Store.open(at: "/db", options: options)
        #expect(store.count(entity: 1) == 9)
        #expect(try store.get(ids[4])?.values == [.string("changed"), .int64(44), .references([])])
        #expect(try store.get(ids[3]) == nil)
        #expect(try store.records(entity: 1).map(\.id) == ids.filter { $0 != ids[3] })
    }
}

