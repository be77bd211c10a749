import CairnCollections

/// A committed state of the store, held for reading (Core Data's query generation): a
/// read at it sees every record as that state had them, whatever commits and
/// compactions come after, for as long as the generation is alive.
///
/// It costs what the state's tables share with the store's until a commit writes them:
/// the store's tables are copied on write, so the first commit after a pin that changes an
/// entity copies that entity's overlay (16 bytes a bucket, for the records changed since
/// the last compaction) and the table of record versions, once; later commits write the
/// store's own copy. After a compaction it keeps the retired snapshot and log mapped.
/// Nothing grows with the number of commits after the pin. ``Store/pinnedGenerations``
/// reports what each generation holds.
package final class StoreGeneration: @unchecked Sendable {
    // @unchecked: `held` is written once, in `deinit`, when no other reference to the
    // generation exists; everything else only reads it.

    /// The last transaction the state includes.
    package let sequence: UInt64
    /// Who pinned it (a context's name), for ``Store/pinnedGenerations``.
    package let pinnedBy: String
    /// Whether it is a past state rebuilt from history (``Store/pastGeneration(at:by:)``)
    /// rather than the newest state when it was pinned.
    package let isPast: Bool
    /// The bytes of the past values it holds in memory (records' bodies from the history
    /// file, for a past state before the snapshot).
    let pastValueBytes: Int
    let store: Store
    /// The state, one element; emptied under the store's lock (see ``Store/withState(_:_:)``).
    private var held: [Frozen]

    /// The state in a box of its own: a read borrows it, with one retain of the box rather
    /// than one of each of the state's tables.
    private final class Frozen: Sendable {
        let state: StoreState
        init(_ state: StoreState) { self.state = state }
    }

    init(store: Store, state: StoreState, pinnedBy: String, isPast: Bool = false, pastValueBytes: Int = 0) {
        self.store = store
        self.sequence = state.lastSequence
        self.pinnedBy = pinnedBy
        self.isPast = isPast
        self.pastValueBytes = pastValueBytes
        var state = state
        // What a read at the generation does not use: the indexes follow the store's
        // newest state (a read here scans), the rest serves commits and checkpoints.
        state.indexes = [:]
        state.recentChanges = EntityMap()
        state.frameGroups = FrameGroups()
        held = [Frozen(state)]
    }

    deinit {
        store.state.withLock { _ in held.removeAll() }
    }

    var state: StoreState { held[0].state }

    /// Runs `body` on the state, borrowed.
    func read<T>(_ body: (borrowing StoreState) throws -> T) rethrows -> T { try body(held[0].state) }

    /// Whether `other` is of the same store.
    package func isOf(_ other: Store) -> Bool { store === other }
}

/// What one pinned generation holds, for an app to see what pins cost it.
package struct StoreGenerationInfo: Sendable, Equatable {
    package var sequence: UInt64
    package var pinnedBy: String
    /// Records changed by commits after the generation: the versions it keeps apart.
    package var changedRecords: Int
    /// Memory and mapped file bytes it alone keeps alive, estimated: the tables it holds
    /// that the store's newest state no longer shares, the snapshot and log a compaction
    /// retired, and a past state's values.
    package var retainedBytes: Int
}

extension Store {
    /// Pins the newest committed state: reads given the generation see it until the
    /// generation is let go.
    package func pinGeneration(by label: String) -> StoreGeneration {
        register(state.withLock { StoreGeneration(store: self, state: $0, pinnedBy: label) })
    }

    /// Lists `generation` in ``pinnedGenerations`` for as long as it is alive.
    func register(_ generation: StoreGeneration) -> StoreGeneration {
        generations.withLock { list in
            list.removeAll { $0.generation == nil }
            list.append(WeakGeneration(generation: generation))
        }
        return generation
    }

    /// The generations alive now, oldest first, with what each holds.
    package var pinnedGenerations: [StoreGenerationInfo] {
        let alive = generations.withLock { list -> [StoreGeneration] in
            list.removeAll { $0.generation == nil }
            return list.compactMap(\.generation)
        }
        return alive.sorted { $0.sequence < $1.sequence }.map { generation in
            state.withLock { live in Self.info(of: generation, against: live) }
        }
    }

    private static func info(of generation: StoreGeneration, against live: StoreState) -> StoreGenerationInfo {
        let pinned = generation.state, sequence = generation.sequence
        var changed = 0
        for (_, version) in live.versions where version > sequence { changed += 1 }
        changed += live.versionRuns.count(after: sequence)
        var bytes = generation.pastValueBytes
        if pinned.snapshot !== live.snapshot {
            // A compaction since: the retired files, and every table.
            bytes += pinned.snapshot.fileSize + pinned.bodies.mappedCount
            for (_, entries) in pinned.overlay { bytes += entries.bucketCount * 16 }
            bytes += pinned.versions.bucketCount * 16
        } else if live.lastSequence > sequence {
            for (entity, entries) in pinned.overlay where (live.lastChanges[entity] ?? 0) > sequence {
                bytes += entries.bucketCount * 16
            }
            bytes += pinned.versions.bucketCount * 16
        }
        return StoreGenerationInfo(sequence: sequence, pinnedBy: generation.pinnedBy, changedRecords: changed, retainedBytes: bytes)
    }

    /// What `take` copies out of the state a read at `generation` sees (the newest one,
    /// under the lock, when nil), let go of as ``withState(_:_:)`` lets go.
    func withState<Taken, Result>(at generation: StoreGeneration?, _ take: (inout StoreState) throws -> Taken,
                                  _ body: (Taken) throws -> Result) rethrows -> Result {
        guard let generation else { return try withState(take, body) }
        var pinned = generation.state
        var held = [try take(&pinned)]
        defer { state.withLock { _ in held.removeAll() } }
        return try body(held[0])
    }

    /// A small read of the state at `generation` (the newest, under the lock, when nil).
    func read<T>(at generation: StoreGeneration?, _ read: (StoreState) throws -> T) rethrows -> T {
        guard let generation else { return try state.withLock { try read($0) } }
        return try generation.read { try read($0) }
    }
}

/// A generation the store lists without keeping it alive.
struct WeakGeneration: Sendable {
    weak var generation: StoreGeneration?
}
