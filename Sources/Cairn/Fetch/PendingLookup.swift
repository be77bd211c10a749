import CairnCollections
import CairnStorage
/// The changed objects of one entity by their value of one attribute, for the fetches by
/// an indexed value that a context makes before a save, so that a find-or-create loop
/// (fetch by key, insert if missing) does not test every changed object at every fetch,
/// a time in n².
///
/// Built from the changed objects (``Context/dirty``) at a fetch, then kept current by a
/// journal: the IDs written, inserted or deleted since, which every such change appends
/// (``Context/noteForLookup(_:since:)``) and every fetch tests one by one. Any other
/// change to the changed objects (undo, rollback, a refresh, a save, a merge, a merge
/// policy's values) is seen through ``Context/changeGeneration``, which every change
/// advances: when it is not where the journal left it, or the journal has grown long,
/// the lookup is built again.
/// So what it gives is a superset of the changed objects that can match; each is still
/// tested with the whole predicate.
final class PendingLookup {
    let entity: UInt16
    let slot: Int
    /// ``Context/changeGeneration`` as of the last change the lookup took in.
    var generation: Int
    /// IDs by the key of their value when built (``ValueKey``,
    /// equal exactly when the values are).
    private var byKey: [ValueKey: [RecordID]] = [:]
    /// IDs tested at every lookup: faults, and values without a key (a real may equal an
    /// integer).
    private var unkeyed: [RecordID] = []
    /// IDs changed since the build, in order, repeats of the last one left out.
    private var journal: [RecordID] = []
    private let built: Int

    init(entity: UInt16, slot: Int, dirty: IDMap<RecordID, ManagedObject>, generation: Int) {
        self.entity = entity
        self.slot = slot
        self.generation = generation
        var count = 0
        for (id, object) in dirty where id.entity == entity {
            count += 1
            if !object.isFault, slot < object.values.count, let key = ValueKey(object.values[slot], []) {
                byKey[key, default: []].append(id)
            } else {
                unkeyed.append(id)
            }
        }
        built = count
    }

    /// Whether the lookup answers for `entity` and `slot` as of `generation`, with a journal
    /// short enough to test at each fetch: up to the square root of the objects it was
    /// built from (so each fetch tests about that many, and building it again costs each
    /// journal entry about that many too).
    func serves(entity: UInt16, slot: Int, generation: Int) -> Bool {
        self.entity == entity && self.slot == slot && self.generation == generation
            && journal.count <= max(32, Int(Double(built).squareRoot()))
    }

    /// Takes in a change to `id` that advanced the generation from `before` to `after`;
    /// a change the lookup missed in between is left showing (the generations disagree).
    @inline(__always)
    func note(_ id: RecordID, from before: Int, to after: Int) {
        guard generation == before else { return }
        generation = after
        if id.entity == entity, journal.last != id { journal.append(id) }
    }

    /// The IDs whose objects may hold one of `wanted` (with repeats), or nil if a wanted
    /// value has no key.
    func candidates(for wanted: [Value]) -> [RecordID]? {
        var result = unkeyed + journal
        for value in wanted {
            guard let key = ValueKey(value, []) else { return nil }
            result += byKey[key] ?? []
        }
        return result
    }
}

@available(*, unavailable, message: "a pending lookup belongs to its context's isolation")
extension PendingLookup: Sendable {}

extension Context {
    /// Tells the pending lookup, if any, of a change to `object` that advanced
    /// ``changeGeneration`` from `before`.
    @inline(__always)
    func noteForLookup(_ object: ManagedObject, since before: Int) {
        if let pendingLookup { pendingLookup.note(object.recordID, from: before, to: changeGeneration) }
    }

    /// The changed objects of `entity` that may hold one of `wanted` in `slot`, each once
    /// (nil: test every changed object). Only this context's own changes: a child's fetch
    /// finds its ancestors' apart.
    func pendingCandidates(entity: UInt16, slot: Int, wanted: [Value]) -> [ManagedObject]? {
        guard dirty.count > 64 else { return nil }
        let lookup: PendingLookup
        if let current = pendingLookup, current.serves(entity: entity, slot: slot, generation: changeGeneration) {
            lookup = current
        } else {
            lookup = PendingLookup(entity: entity, slot: slot, dirty: dirty, generation: changeGeneration)
            pendingLookup = lookup
        }
        guard var ids = lookup.candidates(for: wanted) else { return nil }
        lookupAnswers += 1
        // Each once (a journaled ID may also be where the build put it): sorted, a few
        // hundred at most, rather than hashed into a set made for each fetch.
        ids.sort()
        var objects: [ManagedObject] = []
        var last: RecordID?
        for id in ids where id != last {
            last = id
            if let object = dirty[id] { objects.append(object) }
        }
        return objects
    }
}
