import CairnStorage
import Foundation

/// Undo that outlives the process: a context's undo and redo stacks, kept in the store
/// under a name with each of its saves (in the same transaction, so a crash never leaves
/// them apart from the changes they undo), and taken back by a context of a later
/// launch that keeps undo under that name.
///
/// They live in a record of the store's own entity (the one object queues use,
/// `CairnQueueElement`), whose queue is the reserved name `"\0undo:" + name`.
final class KeptUndo {
    let name: String
    let entity: UInt16
    /// The record the stacks are kept in, once there is one.
    var recordID: RecordID?
    /// For every object the kept groups touch: a fingerprint of its record as this context
    /// last saved it or read it (`RecordFingerprint`; 0: no record). An
    /// undo of a group an earlier launch kept checks its objects against these.
    var expected: [RecordID: UInt64] = [:]

    init(name: String, entity: UInt16, recordID: RecordID?) {
        (self.name, self.entity, self.recordID) = (name, entity, recordID)
    }

    /// The queue name its record is kept under.
    var queueName: String { KeptUndoCoding.queuePrefix + name }
}

/// The kept stacks' bytes (the record's `payload`):
///
/// ```
/// u8      layout (1)
/// varint  n, n × (u64 record ID, u64 fingerprint): the objects as last saved (0: absent)
/// varint  undo group count, the groups, oldest first; then the redo groups, oldest first
/// group:  u8 has-name, name (varint length, UTF-8) if it has one, varint record count,
///         records in the order they were recorded
/// record: u8 kind, u64 record ID, then by kind:
///         1 value:    varint slot, varint length + the value (FORMAT.md §2.2, one value)
///         2 whole:    u8 flags (1 exists, 2 registered), varint length + the values (§2.2)
///         3 inserted, 4 removed: varint slot, u64 target ID, varint index
/// ```
/// A transient property's record is not kept (transient values do not outlive a launch).
package enum KeptUndoCoding {
    static let queuePrefix = "\u{0}undo:"
    /// The most bytes kept stacks take; beyond it their oldest groups are not kept.
    static let maximumBytes = FormatLimits.maxValueBytes / 4

    /// A group as kept: its name and records by record ID.
    package struct Group: Equatable {
        var name: String?
        var records: [(id: RecordID, recorded: Recorded)]

        package static func == (lhs: Group, rhs: Group) -> Bool {
            lhs.name == rhs.name && lhs.records.count == rhs.records.count
                && zip(lhs.records, rhs.records).allSatisfy { $0.id == $1.id && $0.recorded == $1.recorded }
        }
    }

    package enum Recorded: Equatable {
        case value(slot: Int, Value)
        case whole(values: [Value], exists: Bool, isRegistered: Bool)
        case inserted(slot: Int, raw: UInt64, index: Int)
        case removed(slot: Int, raw: UInt64, index: Int)

        /// An undo record as kept; nil for a transient property's, which is not kept.
        init?(_ recorded: UndoStack.Recorded) {
            switch recorded {
            case .value(let slot, let value): self = .value(slot: slot, value)
            case .whole(let values, let exists, let isRegistered): self = .whole(values: values, exists: exists, isRegistered: isRegistered)
            case .inserted(let slot, let raw, let index): self = .inserted(slot: slot, raw: raw, index: index)
            case .removed(let slot, let raw, let index): self = .removed(slot: slot, raw: raw, index: index)
            case .transient: return nil
            }
        }

        /// The undo record it stands for.
        var undoRecorded: UndoStack.Recorded {
            switch self {
            case .value(let slot, let value): .value(slot: slot, value)
            case .whole(let values, let exists, let isRegistered): .whole(values: values, exists: exists, isRegistered: isRegistered)
            case .inserted(let slot, let raw, let index): .inserted(slot: slot, raw: raw, index: index)
            case .removed(let slot, let raw, let index): .removed(slot: slot, raw: raw, index: index)
            }
        }
    }

    package struct Stacks: Equatable {
        var expected: [RecordID: UInt64]
        var undo: [Group]
        var redo: [Group]
    }

    package static func encode(_ stacks: Stacks) -> [UInt8] {
        var writer = ByteWriter()
        writer.u8(1)
        writer.varint(UInt64(stacks.expected.count))
        for (id, print) in stacks.expected.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            writer.u64(id.rawValue)
            writer.u64(print)
        }
        for groups in [stacks.undo, stacks.redo] {
            writer.varint(UInt64(groups.count))
            for group in groups {
                writer.u8(group.name == nil ? 0 : 1)
                if let name = group.name { writer.string(name) }
                writer.varint(UInt64(group.records.count))
                for (id, recorded) in group.records {
                    switch recorded {
                    case .value(let slot, let value):
                        writer.u8(1)
                        writer.u64(id.rawValue)
                        writer.varint(UInt64(slot))
                        writer.lengthPrefixed(ValueCoding.encode([value]))
                    case .whole(let values, let exists, let isRegistered):
                        writer.u8(2)
                        writer.u64(id.rawValue)
                        writer.u8((exists ? 1 : 0) | (isRegistered ? 2 : 0))
                        writer.lengthPrefixed(ValueCoding.encode(values))
                    case .inserted(let slot, let raw, let index), .removed(let slot, let raw, let index):
                        if case .inserted = recorded { writer.u8(3) } else { writer.u8(4) }
                        writer.u64(id.rawValue)
                        writer.varint(UInt64(slot))
                        writer.u64(raw)
                        writer.varint(UInt64(index))
                    }
                }
            }
        }
        return writer.bytes
    }

    /// The stacks in `bytes`; anything else is `.corrupt`, naming what and where.
    package static func decode(_ bytes: [UInt8]) throws -> Stacks {
        try bytes.withUnsafeBytes { buffer in
            var reader = ByteReader(buffer)
            guard try reader.u8("kept undo layout") == 1 else { throw reader.failure("unknown kept undo layout", at: 0) }
            var stacks = Stacks(expected: [:], undo: [], redo: [])
            for _ in 0..<(try reader.count("kept undo object count", maximum: FormatLimits.maxOperations, minimumItemSize: 16)) {
                let id = RecordID(rawValue: try reader.u64("record ID"))
                stacks.expected[id] = try reader.u64("fingerprint")
            }
            for stack in 0..<2 {
                var groups: [Group] = []
                for _ in 0..<(try reader.count("undo group count", maximum: FormatLimits.maxOperations, minimumItemSize: 2)) {
                    var group = Group(name: nil, records: [])
                    switch try reader.u8("group name flag") {
                    case 0: break
                    case 1: group.name = try reader.string("group name", maximum: FormatLimits.maxValueBytes)
                    default: throw reader.failure("group name flag is neither 0 nor 1")
                    }
                    for _ in 0..<(try reader.count("undo record count", maximum: FormatLimits.maxOperations, minimumItemSize: 10)) {
                        let kindAt = reader.position
                        let kind = try reader.u8("undo record kind")
                        let id = RecordID(rawValue: try reader.u64("record ID"))
                        switch kind {
                        case 1:
                            let slot = try reader.count("slot", maximum: FormatLimits.maxValuesPerRecord, minimumItemSize: 0)
                            let values = try ValueCoding.decode(try reader.lengthPrefixedBytes("value"))
                            guard values.count == 1 else { throw reader.failure("an undo value record holds \(values.count) values") }
                            group.records.append((id, .value(slot: slot, values[0])))
                        case 2:
                            let flags = try reader.u8("whole record flags")
                            guard flags < 4 else { throw reader.failure("unknown whole record flags \(flags)") }
                            let values = try ValueCoding.decode(try reader.lengthPrefixedBytes("values"))
                            group.records.append((id, .whole(values: values, exists: flags & 1 != 0, isRegistered: flags & 2 != 0)))
                        case 3, 4:
                            let slot = try reader.count("slot", maximum: FormatLimits.maxValuesPerRecord, minimumItemSize: 0)
                            let raw = try reader.u64("target ID")
                            let index = try reader.count("list index", maximum: FormatLimits.maxReferences, minimumItemSize: 0)
                            group.records.append((id, kind == 3 ? .inserted(slot: slot, raw: raw, index: index)
                                                                : .removed(slot: slot, raw: raw, index: index)))
                        default:
                            throw reader.failure("unknown undo record kind \(kind)", at: kindAt)
                        }
                    }
                    groups.append(group)
                }
                if stack == 0 { stacks.undo = groups } else { stacks.redo = groups }
            }
            guard reader.isAtEnd else { throw reader.failure("\(reader.remaining) unexpected bytes after the kept undo stacks") }
            return stacks
        }
    }
}

extension Context {
    /// Keeps this context's undo and redo stacks in the store under `name`, so that an
    /// undo after a relaunch restores exactly what it would have restored before. Each
    /// save of this context from now on keeps the stacks as they are then, in the same
    /// transaction as its changes. If the store holds stacks kept under `name` (by a
    /// context of an earlier launch), they replace this context's.
    ///
    /// Undoing (or redoing) a group an earlier launch kept first checks that no other
    /// writer changed its objects since this context last saved them: if one did, the
    /// undo does nothing, the group stays, and ``UndoStack/refusal`` says which object
    /// clashed (code `.conflict`). Groups made in this launch undo as always. Transient
    /// properties' changes are not kept.
    ///
    /// For a root context of a ``Container``'s store, with no unsaved changes. A store
    /// keeps one pair of stacks per name: give each context that keeps undo its own.
    public func keepUndo(named name: String) throws {
        guard parent == nil else { throw CairnError(.invalidArgument, "a child context's changes are undone in its parent; keep the parent's undo") }
        try refuseWritesToThePast()
        guard let entity = coordinator.entity(named: Container.queueEntity.name) else {
            throw CairnError(.invalidArgument, "this store has no entity for kept undo; open it through a Container")
        }
        guard !hasChanges else { throw CairnError(.invalidArgument, "a context keeps undo from a save: save or roll back its changes first") }
        let kept = KeptUndo(name: name, entity: entity.number, recordID: nil)
        let ids = try coordinator.indexedIDs(entity: entity.number, slot: 0, matching: .equal([.string(kept.queueName)]))
        kept.recordID = ids.min { $0.rawValue < $1.rawValue }
        if let id = kept.recordID, let record = try coordinator.get(id) {
            guard record.values.count > 2, case .archived(let data) = record.values[2] else {
                throw CairnError(.corrupt, "the undo kept under '\(name)' (record \(id)) is not a kept undo record")
            }
            let stacks: KeptUndoCoding.Stacks
            do { stacks = try KeptUndoCoding.decode([UInt8](data)) } catch let error as CairnError {
                throw CairnError(.corrupt, "the undo kept under '\(name)' (record \(id)) is damaged: \(error.message)", offset: error.offset)
            }
            let undo = try stacks.undo.map(restoredGroup), redo = try stacks.redo.map(restoredGroup)
            undoManager.restoreKept(undo: undo, redo: redo)
            kept.expected = stacks.expected
        }
        keptUndo = kept
    }

    /// A kept group with its objects: those of this context, loaded (so that each knows
    /// whether its record exists now, as it did when the group was recorded).
    private func restoredGroup(_ group: KeptUndoCoding.Group) throws -> (name: String?, records: [UndoStack.Record]) {
        var records: [UndoStack.Record] = []
        for (id, recorded) in group.records {
            guard let object = object(for: id) else {
                throw CairnError(.invalidArgument, "the kept undo names record \(id), of an entity this store no longer has")
            }
            _ = try load(object)
            // (Checked against the entity as it is now: a kept record that does not fit it
            // is damage, not something to put back.)
            let width = object.entity.attributes.count + object.entity.relationships.count
            let fits: Bool
            switch recorded {
            case .value(let slot, _): fits = slot < width
            case .whole(let values, _, _): fits = values.count == width
            case .inserted(let slot, _, _), .removed(let slot, _, _): fits = slot >= object.entity.attributes.count && slot < width
            }
            guard fits else {
                throw CairnError(.corrupt, "the kept undo's record of \(object.entity.name) \(id) does not fit the entity's \(width) properties")
            }
            let restored = recorded.undoRecorded
            records.append(UndoStack.Record(object: object, recorded: restored))
        }
        return (group.name, records)
    }

    /// For a save while undo is kept: the write of the stacks as they are (one more
    /// operation of the save's transaction), and the fingerprints they carry: the saved
    /// records' new bodies, and for the other objects the stacks touch, what this context
    /// last saved or read of them.
    func keptUndoWrite(for items: [Coordinator.SaveItem]) throws -> (operation: RecordOperation, id: RecordID, expected: [RecordID: UInt64])? {
        guard let kept = keptUndo else { return nil }
        let closed = undoManager.closedGroups
        func groups(_ list: [(name: String?, records: [UndoStack.Record])]) -> [KeptUndoCoding.Group] {
            list.map { group in
                KeptUndoCoding.Group(name: group.name, records: group.records.compactMap { record in
                    KeptUndoCoding.Recorded(record.recorded).map { (record.object.recordID, $0) }
                })
            }
        }
        var stacks = KeptUndoCoding.Stacks(expected: [:], undo: groups(closed.undo), redo: groups(closed.redo))
        var saved: [RecordID: UInt64] = [:]
        for item in items { saved[item.id] = item.operation.fingerprint }
        // What each object is expected to be at an undo: as this save leaves it, unless
        // another writer changed it since the stacks last expected it (then that stays,
        // and an undo of a kept group touching it is refused); as expected before, for an
        // object this save leaves alone.
        func expect(_ id: RecordID) throws -> UInt64 {
            let before = kept.expected[id]
            if let after = saved[id] {
                guard let before else { return after }
                return try storedFingerprint(of: id) == before ? after : before
            }
            return try before ?? storedFingerprint(of: id)
        }
        var bytes: [UInt8] = []
        while true {
            stacks.expected = [:]
            for group in stacks.undo + stacks.redo {
                for (id, _) in group.records where stacks.expected[id] == nil { stacks.expected[id] = try expect(id) }
            }
            bytes = KeptUndoCoding.encode(stacks)
            // (Stacks too large for one value keep their newest groups: the save goes on.)
            guard bytes.count > KeptUndoCoding.maximumBytes, !(stacks.undo.isEmpty && stacks.redo.isEmpty) else { break }
            if stacks.redo.count > stacks.undo.count { stacks.redo.removeFirst() } else { stacks.undo.removeFirst() }
        }
        let id = try kept.recordID ?? coordinator.allocateID(entity: kept.entity)
        var preparer = coordinator.makePreparer()
        let values: [Value] = [.string(kept.queueName), .int64(0), .archived(Data(bytes))]
        return (try preparer.put(id, values), id, stacks.expected)
    }

    /// The fingerprint of record `id` as the store holds it now (0: none).
    func storedFingerprint(of id: RecordID) throws -> UInt64 {
        try coordinator.store.fingerprint(of: id)
    }

    /// Why a kept group (`undoing` it, or redoing it) may not run: one of its objects is
    /// not as this context last saved it, so another writer changed it since; nil if all are.
    func keptGroupConflict(_ records: [UndoStack.Record], named name: String?, undoing: Bool) -> CairnError? {
        guard let kept = keptUndo else { return nil }
        var seen = Set<RecordID>()
        for record in records where seen.insert(record.object.recordID).inserted {
            let id = record.object.recordID
            guard let expected = kept.expected[id] else { continue }
            let now: UInt64
            do { now = try storedFingerprint(of: id) } catch let error as CairnError { return error } catch {
                return CairnError(.io, "\(error)")
            }
            guard now != expected else { continue }
            let entity = coordinator.entity(number: id.entity)?.name ?? "record"
            let action = (undoing ? "undo" : "redo") + (name.map { " '\($0)'" } ?? "")
            return CairnError(.conflict, "cannot \(action): \(entity) \(id) was changed by another writer since this context saved it")
        }
        return nil
    }
}
