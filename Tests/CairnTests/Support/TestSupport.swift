import CairnCollections
import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// Seeds for property tests: `CAIRN_SEED=N` replays one; otherwise a fixed set.
enum Seeds {
    static func list(_ defaults: [UInt64] = [1, 2, 3, 0xC0FFEE, 0xDEADBEEF]) -> [UInt64] {
        if let text = ProcessInfo.processInfo.environment["CAIRN_SEED"], let seed = UInt64(text) { return [seed] }
        return defaults
    }
}

/// A thread-safe box for test bookkeeping captured by `@Sendable` hooks.
typealias Locked<Value: Sendable> = Protected<Value>

extension Protected {
    var value: Value { withLock { $0 } }
}

enum TestSchemas {
    /// Person ↔ DVD, the model of the issues.
    static let people = Schema(entities: [
        EntityDescription(name: "Person", number: 1,
                          attributes: [AttributeDescription(name: "username", type: .string),
                                       AttributeDescription(name: "age", type: .int64)],
                          relationships: [RelationshipDescription(name: "dvds", destination: "DVD", isToMany: true,
                                                                  inverse: "owner", deleteRule: .cascade)]),
        EntityDescription(name: "DVD", number: 2,
                          attributes: [AttributeDescription(name: "title", type: .string),
                                       AttributeDescription(name: "purchaseDate", type: .date, isOptional: true)],
                          relationships: [RelationshipDescription(name: "owner", destination: "Person", inverse: "dvds")]),
    ])

    /// One entity with a string and a blob, for sized records.
    static let blobs = Schema(entities: [
        EntityDescription(name: "Blob", number: 1,
                          attributes: [AttributeDescription(name: "name", type: .string),
                                       AttributeDescription(name: "data", type: .binary)]),
    ])
}

/// The expected contents of a store: record ID → values.
typealias Contents = [RecordID: [Value]]

/// Everything in a store (at `generation`, or the newest state), by entity, as a `Contents`.
func contents(of store: Store, at generation: StoreGeneration? = nil) throws -> Contents {
    var model: Contents = [:]
    for entity in store.schema.entities {
        let records = try store.records(entity: entity.number, at: generation)
        for record in records { model[record.id] = record.values }
        #expect(store.count(entity: entity.number, at: generation) == store.ids(entity: entity.number, at: generation).count)
        #expect(store.count(entity: entity.number, at: generation) == records.count)
    }
    return model
}

/// Applies changes to a model the way the store applies them.
func apply(_ changes: [Change], to model: inout Contents) {
    for change in changes {
        switch change {
        case .put(let id, let values): model[id] = values
        case .delete(let id): model[id] = nil
        }
    }
}

/// A seeded workload generator over `TestSchemas.blobs`.
struct BlobWorkload {
    var random: SplitMix64
    var nextSerial: UInt64 = 1
    var model: Contents = [:]

    init(seed: UInt64) { random = SplitMix64(seed: seed) }

    /// The next transaction: 1–4 changes, inserts, replacements and deletes.
    mutating func nextTransaction(maxBlob: Int = 64) -> [Change] {
        var changes: [Change] = []
        var touched = Set<RecordID>()
        for _ in 0..<(1 + Int(random.next() % 4)) {
            let roll = random.next() % 10
            let existing = model.keys.filter { !touched.contains($0) }
            if roll < 2, let victim = existing.min(by: { _, _ in random.next() % 2 == 0 }) {
                changes.append(.delete(victim))
                touched.insert(victim)
            } else {
                let id: RecordID
                if roll < 4, let target = existing.min(by: { _, _ in random.next() % 2 == 0 }) {
                    id = target
                } else {
                    id = RecordID(entity: 1, serial: nextSerial)
                    nextSerial += 1
                }
                touched.insert(id)
                let size = Int(random.next() % UInt64(maxBlob + 1))
                let bytes = (0..<size).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                changes.append(.put(id, [.string("blob-\(id.serial)-\(random.next() % 1000)"), .bytes(Data(bytes))]))
            }
        }
        Cairn_apply(changes, to: &model)
        return changes
    }
}

/// `apply` under another name, for use inside types that have their own `apply`.
func Cairn_apply(_ changes: [Change], to model: inout Contents) { apply(changes, to: &model) }

/// A fresh temporary directory on disk, removed by the caller.
func temporaryDirectory(_ name: String = #function) -> String {
    let base = FileManager.default.temporaryDirectory.path
    let path = "\(base)/cairn-tests-\(name.filter { $0.isLetter || $0.isNumber })-\(UUID().uuidString)"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// Options for a test store; its snapshot index's checksum is always computed in the
/// background (as for a large store), so the tests exercise that hand-over.
/// With `streamed`, every commit writes its frames in pieces of 61 bytes (`LogWriter.appendFrame`).
func memoryOptions(_ fs: any FileSystem, durability: Durability = .durable, streamed: Bool = false) -> StoreOptions {
    var options = StoreOptions(fileSystem: fs, durability: durability, compaction: .manual, preallocationBytes: 4096)
    options.backgroundChecksumMinimum = 0
    if streamed {
        options.streamedFramesMinimum = 0
        options.framePieceBytes = 61
    }
    return options
}

/// Every file of a directory on disk with its bytes: what a reader must leave as it was.
func directoryContents(_ path: String) throws -> [String: [UInt8]] {
    var result: [String: [UInt8]] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: path) {
        result[name] = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path + "/" + name)))
    }
    return result
}
