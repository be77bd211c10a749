import CairnCollections
import CairnStorage
import Foundation

/// A persistent first-in, first-out queue of `Codable` values — the offline-request queue
/// of the eppz samples, done once.
///
/// Every push and pop is its own durable transaction: after a crash or a restart an
/// element is either wholly in the queue or not. Many named queues share one store
/// (``Container/queue(named:of:)``); the same name gives the same queue. Safe to use from
/// several tasks at once: operations on one queue are serialised.
///
/// ```swift
/// let outbox = try container.queue(named: "outbox", of: Request.self)
/// try outbox.push(Request(path: "/like/42"))
/// while let next = try outbox.popFirst() { send(next) }
/// ```
public struct ObjectQueue<Element: Codable & Sendable>: Sendable {
    let storage: ObjectQueueStorage

    /// The queue's name in its store.
    public var name: String { storage.name }

    /// Appends `element` at the end.
    public func push(_ element: Element) throws {
        try storage.push(try Self.encode(element))
    }

    /// Appends `element` at the end: the same as ``push(_:)``.
    public func append(_ element: Element) throws { try push(element) }

    /// Removes and returns the first element, or nil if the queue is empty. An element
    /// that does not decode as `Element` throws and stays in the queue.
    public func popFirst() throws -> Element? {
        try storage.popFirst(decoding: Self.decode)
    }

    /// The first element, without removing it.
    public func peek() throws -> Element? {
        try storage.payload(at: 0).map(Self.decode)
    }

    /// How many elements the queue holds.
    public var count: Int { get throws { try storage.count() } }
    /// Whether the queue holds no element.
    public var isEmpty: Bool { get throws { try storage.count() == 0 } }

    /// Every element, first to last.
    public func elements() throws -> [Element] {
        try storage.payloads().map(Self.decode)
    }

    /// Removes and returns the element at `index` (0 is the first). An element that does
    /// not decode as `Element` throws and stays in the queue.
    @discardableResult
    public func remove(at index: Int) throws -> Element {
        try storage.remove(at: index, decoding: Self.decode)
    }

    /// Removes every element, in one durable transaction.
    public func removeAll() throws { try storage.removeAll() }

    static func encode(_ element: Element) throws -> Data {
        do { return try JSONArchive.encoder().encode(element) } catch {
            throw CairnError(.invalidArgument, "cannot archive \(Element.self) for the queue: \(error)")
        }
    }

    /// An element that does not decode is not damage: it was most likely pushed as
    /// another type (by an earlier version of the app), so the error is a mismatch.
    static func decode(_ data: Data) throws -> Element {
        do { return try JSONArchive.decoder().decode(Element.self, from: data) } catch {
            throw CairnError(.schemaMismatch, "a queued element does not decode as \(Element.self) (was it pushed as another type?): \(error)")
        }
    }
}

/// One named queue's records, as (position, record ID) in order, loaded on first use.
final class ObjectQueueStorage: Sendable {
    let name: String
    let coordinator: Coordinator
    let entity: UInt16
    /// The element type the queue was first opened with in this container.
    let elementType: String
    private let items = Protected<QueueItems?>(nil)

    init(name: String, coordinator: Coordinator, elementType: String) throws {
        self.elementType = elementType
        guard let entity = coordinator.schema.entity(named: Container.queueEntity.name) else {
            throw CairnError(.invalidArgument, "this store has no queue entity; open it through a Container")
        }
        self.name = name
        self.coordinator = coordinator
        self.entity = entity.number
    }

    /// Runs `body` with the loaded items, under the queue's lock.
    private func withItems<T>(_ body: (inout QueueItems) throws -> T) throws -> T {
        try items.withLock { items in
            var loaded: QueueItems
            if let existing = items { loaded = existing } else { loaded = try load() }
            items = nil  // (`loaded` is then its array's only holder: changes to it copy nothing)
            defer { items = loaded }
            return try body(&loaded)
        }
    }

    /// The queue's records, read from the coordinator.
    private func load() throws -> QueueItems {
        var loaded: [(position: Int64, id: RecordID)] = []
        for id in try coordinator.indexedIDs(entity: entity, slot: 0, matching: .equal([.string(name)])) {
            guard let record = try coordinator.get(id), case .int64(let position) = record.values[1] else { continue }
            loaded.append((position, id))
        }
        loaded.sort { $0.position < $1.position }
        return QueueItems(loaded)
    }

    func push(_ payload: Data) throws {
        try withItems { items in
            let position = (items.last?.position ?? 0) + 1
            let id = try coordinator.allocateID(entity: entity)
            try coordinator.commitQueue([.put(id, [.string(name), .int64(position), .archived(payload)])], durability: .durable)
            items.append((position, id))
        }
    }

    private func payload(of id: RecordID) throws -> Data {
        guard let record = try coordinator.get(id), case .archived(let data) = record.values[2] else {
            throw CairnError(.corrupt, "queue \(name): element \(id) is missing or malformed")
        }
        return data
    }

    /// Removes the first element, decoded by `decode` before its removal is committed: an
    /// element that does not decode stays (decoded after, it was gone and the pop threw).
    func popFirst<T>(decoding decode: (Data) throws -> T) throws -> T? {
        try withItems { items in
            guard let first = items.first else { return nil }
            let element = try decode(try payload(of: first.id))
            try coordinator.commitQueue([.delete(first.id)], durability: .durable)
            items.removeFirst()
            return element
        }
    }

    func payload(at index: Int) throws -> Data? {
        try withItems { items in index < items.count ? try payload(of: items[index].id) : nil }
    }

    func payloads() throws -> [Data] {
        try withItems { items in try (0..<items.count).map { try payload(of: items[$0].id) } }
    }

    func count() throws -> Int { try withItems { $0.count } }

    /// Removes the element at `index`, decoded as ``popFirst(decoding:)`` decodes it.
    func remove<T>(at index: Int, decoding decode: (Data) throws -> T) throws -> T {
        try withItems { items in
            guard index >= 0, index < items.count else {
                throw CairnError(.invalidArgument, "queue \(name) has \(items.count) elements; there is none at \(index)")
            }
            let element = try decode(try payload(of: items[index].id))
            try coordinator.commitQueue([.delete(items[index].id)], durability: .durable)
            items.remove(at: index)
            return element
        }
    }

    func removeAll() throws {
        try withItems { items in
            guard items.count > 0 else { return }
            try coordinator.commitQueue((0..<items.count).map { .delete(items[$0].id) }, durability: .durable)
            items = QueueItems([])
        }
    }
}

/// A queue's (position, record ID) pairs, first to last. Removing the first moves a start
/// offset, not the rest of the array (`Array.removeFirst` moves every element: popping a
/// queue of n elements would take time in n²); the removed part is dropped once it is the larger.
struct QueueItems: Sendable {
    private var storage: [(position: Int64, id: RecordID)]
    private var start = 0

    init(_ items: [(position: Int64, id: RecordID)]) { storage = items }

    var count: Int { storage.count - start }
    var first: (position: Int64, id: RecordID)? { count > 0 ? storage[start] : nil }
    var last: (position: Int64, id: RecordID)? { count > 0 ? storage[storage.count - 1] : nil }
    subscript(index: Int) -> (position: Int64, id: RecordID) { storage[start + index] }

    mutating func append(_ item: (position: Int64, id: RecordID)) { storage.append(item) }

    mutating func removeFirst() {
        start += 1
        if start == storage.count {
            storage.removeAll(keepingCapacity: true)
            start = 0
        } else if start >= 64, start * 2 >= storage.count {
            storage.removeFirst(start)
            start = 0
        }
    }

    mutating func remove(at index: Int) { storage.remove(at: start + index) }
}
