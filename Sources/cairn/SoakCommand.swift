import Cairn
import Foundation

/// `cairn _soak-writer DIR`: an internal command for the SIGKILL soak test (TESTING.md).
/// Commits transactions durably forever, each setting two counters to n and adding one
/// log record n, and prints `ack n` after each returns. Not listed in --help.
enum SoakCommand {
    static let schema = Schema(entities: [
        EntityDescription(name: "Counter", number: 1, attributes: [AttributeDescription(name: "value", type: .int64)]),
        EntityDescription(name: "Entry", number: 2, attributes: [AttributeDescription(name: "n", type: .int64)]),
    ])

    static func run(_ arguments: [String]) throws {
        guard let directory = arguments.first else { throw UsageError(message: "missing the store directory", command: "_soak-writer") }
        let store = try Store.open(at: directory, schema: schema,
                                   options: StoreOptions(compaction: .automatic(ratio: 1.0, minimumLogBytes: 64 << 10)))
        let x = RecordID(entity: 1, serial: 1), y = RecordID(entity: 1, serial: 2)
        var n: Int64 = 0
        if case .int64(let current)? = try store.get(x)?.values.first { n = current }
        FileHandle.standardOutput.write(Data("ready \(n)\n".utf8))
        while n < 10_000_000 {
            n += 1
            let entry = try store.allocateID(entity: 2)
            try store.commit([.put(x, [.int64(n)]), .put(entry, [.int64(n)]), .put(y, [.int64(n)])], durability: .durable)
            FileHandle.standardOutput.write(Data("ack \(n)\n".utf8))
        }
    }
}
