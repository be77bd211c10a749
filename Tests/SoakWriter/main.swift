import CairnStorage
import Cairn
import Foundation

/// `cairn-soak-writer DIR [--blob BYTES]`: the writer the SIGKILL soak test kills
/// (TESTING.md), a test helper apart from the user-facing `cairn` tool. Commits
/// transactions durably forever, each setting two counters to n and adding one log record
/// n (and with `--blob`, replacing a record of that many random bytes, so that frames can
/// be larger than the log's preallocation), and prints `ack n` after each returns.
enum SoakWriter {
    static let schema = Schema(entities: [
        EntityDescription(name: "Counter", number: 1, attributes: [AttributeDescription(name: "value", type: .int64)]),
        EntityDescription(name: "Entry", number: 2, attributes: [AttributeDescription(name: "n", type: .int64)]),
        EntityDescription(name: "Blob", number: 3, attributes: [AttributeDescription(name: "bytes", type: .binary)]),
    ])

    static func run(_ arguments: [String]) throws {
        guard let directory = arguments.first else { throw SoakWriterUsage() }
        var blobBytes = 0
        if arguments.count == 3, arguments[1] == "--blob", let bytes = Int(arguments[2]), bytes >= 0 {
            blobBytes = bytes
        } else if arguments.count != 1 {
            throw SoakWriterUsage()
        }
        var random = SplitMix64(seed: UInt64(UInt32(truncatingIfNeeded: getpid())))
        let store = try Store.open(at: directory, schema: schema,
                                   options: StoreOptions(compaction: .automatic(ratio: 1.0, minimumLogBytes: 64 << 10)))
        let x = RecordID(entity: 1, serial: 1), y = RecordID(entity: 1, serial: 2)
        var n: Int64 = 0
        if case .int64(let current)? = try store.get(x)?.values.first { n = current }
        FileHandle.standardOutput.write(Data("ready \(n)\n".utf8))
        while n < 10_000_000 {
            n += 1
            let entry = try store.allocateID(entity: 2)
            var changes: [Change] = [.put(x, [.int64(n)]), .put(entry, [.int64(n)]), .put(y, [.int64(n)])]
            if blobBytes > 0 {
                var blob = [UInt8](repeating: 0, count: blobBytes)
                blob.withUnsafeMutableBytes { bytes in
                    for i in stride(from: 0, to: bytes.count - 7, by: 8) { bytes.storeBytes(of: random.next(), toByteOffset: i, as: UInt64.self) }
                }
                changes.insert(.put(RecordID(entity: 3, serial: 3), [.bytes(Data(blob))]), at: 1)
            }
            try store.commit(changes, durability: .durable)
            FileHandle.standardOutput.write(Data("ack \(n)\n".utf8))
        }
    }
}

struct SoakWriterUsage: Error, CustomStringConvertible {
    var description: String { "usage: cairn-soak-writer DIR [--blob BYTES]" }
}

do {
    try SoakWriter.run(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("cairn-soak-writer: \(error)\n".utf8))
    exit(1)
}
