import Foundation
import Cairn
import CairnStorage

/// The object the differential target works on: a tree (or graph: cycles are allowed)
/// whose deletes cascade to children.
final class FuzzNode: ManagedObject {
    @Attribute(indexed: true) var key: Int64 = 0
    @Attribute var value: Int64 = 0
    @ToOne(inverse: "children", deleteRule: .nullify) var parent: FuzzNode?
    @ToMany(inverse: "parent", deleteRule: .cascade) var children: [FuzzNode]
}

/// The differential target (`Fuzz/targets/context_ops.swift`): the input is a sequence
/// of context operations — insert, update, re-parent, delete, save, undo, redo,
/// rollback, crash-and-reopen, compact — run on a real stack over a `MemoryFileSystem`
/// and on a plain reference model (`[key: (value, parent)]` with undo and redo as
/// stacks of whole states). After every step the context's objects must equal the
/// model, sorted fetches (whole and a window) the model sorted, and live results (one of
/// the entity alone, one sorted through a relationship, the first four by a descending
/// key) must equal a fresh fetch once told of the changes; any difference stops the process
/// (`preconditionFailure`) so libFuzzer keeps the input.
struct ContextDifferential {
    struct Node: Equatable, CustomStringConvertible {
        var value: Int64
        var parent: Int64?
        var description: String { "\(value)^\(parent.map(String.init) ?? "-")" }
    }
    typealias World = [Int64: Node]

    var fs = MemoryFileSystem()
    let model: Model
    var coordinator: Coordinator
    var context: Context
    var committed: World = [:]
    var working: World = [:]
    var undo: [World] = []
    var redo: [World] = []
    var nextKey: Int64 = 1
    var log: [String] = []
    /// Live results on the context, made again with it after a crash.
    var results: [LiveResults<FuzzNode>] = []

    static let path = "/fuzz"

    init() throws {
        model = try Model(FuzzNode.self)
        coordinator = try Coordinator(path: Self.path, schema: model.schema, options: Self.options(fs))
        context = Context(coordinator: coordinator, model: model)
        results = try Self.liveResults(on: context)
    }

    static func liveResults(on context: Context) throws -> [LiveResults<FuzzNode>] {
        var firstFew = FetchQuery(FuzzNode.self, fetchPredicate: nil, sortKeys: [SortKey("key", ascending: false)])
        firstFew.fetchLimit = 4
        return [try LiveResults(request: FetchQuery(FuzzNode.self, fetchPredicate: nil, sortKeys: [SortKey("key")]), context: context),
                try LiveResults(request: FetchQuery(FuzzNode.self, fetchPredicate: nil, sortKeys: [SortKey("parent.key"), SortKey("key")]),
                                   context: context),
                try LiveResults(request: firstFew, context: context)]
    }

    static func options(_ fs: MemoryFileSystem) -> StoreOptions {
        StoreOptions(fileSystem: fs, compaction: .manual, preallocationBytes: 4096)
    }

    static func run(_ bytes: [UInt8]) {
        guard var differential = try? ContextDifferential() else { preconditionFailure("the fuzz model does not build") }
        var index = 0
        while index + 1 < bytes.count, differential.log.count < 256 {
            differential.step(bytes[index], bytes[index + 1])
            index += 2
        }
        try? differential.coordinator.close()
    }

    func fail(_ message: String) -> Never {
        preconditionFailure("\(message)\nsteps: \(log.joined(separator: "; "))")
    }

    func node(_ key: Int64) -> FuzzNode {
        guard let found = try? context.fetch(FuzzNode.self, filter: { $0.key == key }).first else {
            fail("object \(key) is in the model but not in the context")
        }
        return found
    }

    /// The keys a cascading delete of `key` removes: it and, recursively, its children.
    func cascade(from key: Int64) -> Set<Int64> {
        var gone: Set<Int64> = [key]
        var frontier = [key]
        while let next = frontier.popLast() {
            for (child, node) in working where node.parent == next && !gone.contains(child) {
                gone.insert(child)
                frontier.append(child)
            }
        }
        return gone
    }

    mutating func change(_ label: String, _ body: () -> Void, model update: (inout World) -> Void) {
        log.append(label)
        context.undoGroup(body)
        undo.append(working)
        redo.removeAll()
        update(&working)
    }

    mutating func step(_ opcode: UInt8, _ argument: UInt8) {
        let keys = working.keys.sorted()
        let pick = keys.isEmpty ? nil : keys[Int(argument) % keys.count]
        let context = self.context
        switch opcode % 10 {
        case 0:
            let key = nextKey, value = Int64(argument)
            nextKey += 1
            change("insert \(key)=\(value)", {
                let node = FuzzNode(context: context)
                node.key = key
                node.value = value
            }, model: { $0[key] = Node(value: value, parent: nil) })
        case 1:
            guard let key = pick, let old = working[key] else { return }
            let value = old.value + 1 + Int64(argument)
            let object = node(key)
            change("update \(key)=\(value)", { object.value = value }, model: { $0[key]?.value = value })
        case 2:
            guard let key = pick else { return }
            let parent: Int64? = argument % 4 == 0 ? nil : keys[Int(argument / 4) % keys.count]
            guard working[key]?.parent != parent else { return }
            let object = node(key), target = parent.map(node)
            change("parent \(key)->\(parent.map(String.init) ?? "nil")", { object.parent = target },
                   model: { $0[key]?.parent = parent })
        case 3:
            guard let key = pick else { return }
            let gone = cascade(from: key)
            let object = node(key)
            change("delete \(key) (\(gone.sorted()))", { context.delete(object) }, model: { world in
                for key in gone { world[key] = nil }
                for (other, node) in world where node.parent.map(gone.contains) == true { world[other]?.parent = nil }
            })
        case 4:
            log.append("save")
            do { try context.save() } catch { fail("save failed: \(error)") }
            committed = working
        case 5:
            log.append("undo")
            guard context.undoManager.canUndo == !undo.isEmpty else { fail("canUndo disagrees") }
            guard let previous = undo.popLast() else { return }
            context.undo()
            redo.append(working)
            working = previous
        case 6:
            log.append("redo")
            guard context.undoManager.canRedo == !redo.isEmpty else { fail("canRedo disagrees") }
            guard let next = redo.popLast() else { return }
            context.redo()
            undo.append(working)
            working = next
        case 7:
            log.append("rollback")
            context.rollback()
            working = committed
            undo.removeAll()
            redo.removeAll()
        case 8:
            // Power loss with the store open: only what was synced survives. Saves are
            // durable, so that is every save.
            log.append("crash")
            let image = fs.crashImage(argument % 2 == 0 ? .dropAll : .random(seed: UInt64(argument)))
            try? coordinator.close()
            fs = image
            do {
                coordinator = try Coordinator(path: Self.path, schema: model.schema, options: Self.options(fs))
            } catch {
                fail("reopen after a crash failed: \(error)")
            }
            self.context = Context(coordinator: coordinator, model: model)
            do { results = try Self.liveResults(on: self.context) } catch { fail("live results after a crash failed: \(error)") }
            working = committed
            undo.removeAll()
            redo.removeAll()
            if !coordinator.store.verify().isEmpty { fail("verify after a crash: \(coordinator.store.verify())") }
        default:
            log.append("compact")
            do { try coordinator.store.compact() } catch { fail("compact failed: \(error)") }
        }
        check()
    }

    func check() {
        let objects: [FuzzNode]
        do { objects = try context.fetch(FuzzNode.self) } catch { fail("fetch failed: \(error)") }
        var seen: World = [:]
        for object in objects {
            guard seen.updateValue(Node(value: object.value, parent: object.parent?.key), forKey: object.key) == nil else {
                fail("key \(object.key) appears twice")
            }
        }
        guard seen == working else {
            let keys = Set(seen.keys).union(working.keys).sorted()
            let differences = keys.filter { seen[$0] != working[$0] }.prefix(8).map {
                "\($0): context \(seen[$0].map(String.init(describing:)) ?? "none"), model \(working[$0].map(String.init(describing:)) ?? "none")"
            }
            fail("context and model differ: \(differences.joined(separator: ", "))")
        }
        // Sorted fetches are the model sorted: by value, highest first, then key; whole, and
        // a window of it (the first rows kept as the scan reads them, ``TopRows``).
        let sorted = working.sorted { a, b in a.value.value != b.value.value ? a.value.value > b.value.value : a.key < b.key }.map(\.key)
        var bySort = FetchQuery(FuzzNode.self, fetchPredicate: nil, sortKeys: [SortKey("value", ascending: false), SortKey("key")])
        do {
            let whole = try context.fetch(bySort).map(\.key)
            guard whole == sorted else { fail("a fetch sorted by value and key gives \(whole), the model \(sorted)") }
            bySort.fetchOffset = log.count % 4
            bySort.fetchLimit = 1 + log.count % 7
            let window = try context.fetch(bySort).map(\.key)
            let expected = Array(sorted.dropFirst(bySort.fetchOffset).prefix(bySort.fetchLimit ?? 0))
            guard window == expected else {
                fail("a window of \(bySort.fetchOffset)+\(bySort.fetchLimit ?? 0) sorted by value and key gives \(window), the model \(expected)")
            }
            // By the indexed key alone: a walk of its index in reverse.
            var byKey = FetchQuery(FuzzNode.self, fetchPredicate: nil, sortKeys: [SortKey("key", ascending: false)])
            byKey.fetchOffset = log.count % 3
            byKey.fetchLimit = 1 + log.count % 5
            let keys = try context.fetch(byKey).map(\.key)
            let wantedKeys = Array(working.keys.sorted(by: >).dropFirst(byKey.fetchOffset).prefix(byKey.fetchLimit ?? 0))
            guard keys == wantedKeys else {
                fail("a window of \(byKey.fetchOffset)+\(byKey.fetchLimit ?? 0) by key descending gives \(keys), the model \(wantedKeys)")
            }
        } catch { fail("a sorted fetch failed: \(error)") }
        // Live results, told of the changes (edits alone tell no one), are a fresh fetch.
        context.processPendingChanges()
        for live in results {
            let fresh: [FuzzNode]
            do { fresh = try context.fetch(live.request) } catch { fail("fetch failed: \(error)") }
            guard live.objects.map(\.key) == fresh.map(\.key), live.objects.allSatisfy({ $0.context === context }) else {
                fail("live results by \(live.request.sortKeys.map { $0.keyPath.joined(separator: ".") }) are "
                     + "\(live.objects.map(\.key)), a fetch gives \(fresh.map(\.key))")
            }
        }
        // Each to-many is the inverse of the to-ones.
        for object in objects {
            let children = Set(object.children.map(\.key))
            let expected = Set(working.filter { $0.value.parent == object.key }.keys)
            guard children == expected else { fail("children of \(object.key) are \(children.sorted()), expected \(expected.sorted())") }
        }
    }
}
