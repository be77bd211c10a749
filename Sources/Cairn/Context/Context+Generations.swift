import CairnStorage

/// A committed state of the store a context reads at (Core Data's
/// `NSQueryGenerationToken`): see ``Context/setQueryGenerationFrom(_:)``. A token keeps
/// its state readable while it is alive; tokens of one state are equal.
public final class QueryGenerationToken: Sendable, Hashable, CustomStringConvertible {
    /// Pins a context to the newest committed state when it is given to
    /// ``Context/setQueryGenerationFrom(_:)``.
    public static let current = QueryGenerationToken(nil)

    let generation: StoreGeneration?

    init(_ generation: StoreGeneration?) { self.generation = generation }

    /// The last transaction the state includes (see ``ChangeSet/sequence``); nil for ``current``.
    public var sequence: UInt64? { generation?.sequence }

    public static func == (lhs: QueryGenerationToken, rhs: QueryGenerationToken) -> Bool {
        lhs.generation === rhs.generation
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(generation.map(ObjectIdentifier.init))
    }

    public var description: String { sequence.map { "generation \($0)" } ?? "current generation" }
}

/// A generation some context holds, as ``Coordinator/pinnedGenerations`` reports it.
public struct PinnedGeneration: Sendable, Equatable {
    /// The last transaction the state includes.
    public var sequence: UInt64
    /// The name of the context that pinned it (``Context/name``), or "context".
    public var pinnedBy: String
    /// How many records commits after the generation changed: the versions it keeps
    /// apart from the store's newest ones.
    public var changedRecords: Int
    /// The memory and mapped file bytes the generation alone keeps alive, estimated: the
    /// copy of the store's tables its pin made the next commit take, and after a
    /// compaction the retired snapshot and log.
    public var retainedBytes: Int
}

extension Coordinator {
    /// The generations that contexts (or tokens an app keeps) hold now, oldest first,
    /// with what each costs. A generation goes when its last token does: when its context
    /// moves on or unpins, and no other context or token holds it.
    public var pinnedGenerations: [PinnedGeneration] {
        store.pinnedGenerations.map {
            PinnedGeneration(sequence: $0.sequence, pinnedBy: $0.pinnedBy, changedRecords: $0.changedRecords,
                             retainedBytes: $0.retainedBytes)
        }
    }

    /// A token for the newest committed state, pinned by `label`.
    func pinGeneration(by label: String) -> QueryGenerationToken {
        QueryGenerationToken(store.pinGeneration(by: label))
    }

    /// A token for the committed state just after `token`'s transaction, a past state the
    /// store rebuilds from its history: a context given it with
    /// ``Context/setQueryGenerationFrom(_:)`` (or made by ``Container/context(asOf:)``)
    /// sees exactly the objects that state had, with fetches, predicates and
    /// relationships, and cannot save. The store goes on meanwhile.
    ///
    /// A state since the last compaction is rebuilt from the log. One before it needs the
    /// history the store keeps (``StoreOptions/history``): throws `.historyExpired` when
    /// the retention let it go, `.invalidArgument` for a token of another store or past
    /// the newest state. Rebuilding reads the log, and the kept history back to the token;
    /// the token then holds in memory the values of the records changed since.
    public func queryGeneration(asOf token: HistoryToken) throws -> QueryGenerationToken {
        guard token.storeID == storeID else {
            throw CairnError(.invalidArgument, "the history token is of store \(token.storeID), not of this one (\(storeID))")
        }
        return QueryGenerationToken(try store.pastGeneration(at: token.sequence, by: "as of \(token.sequence)"))
    }
}

extension Context {
    /// The generation this context reads at, or nil when it reads the newest state (the
    /// default). See ``setQueryGenerationFrom(_:)``.
    public var queryGenerationToken: QueryGenerationToken? { pinnedGeneration }

    /// Pins the state this context reads, as Core Data's query generations do:
    /// ``QueryGenerationToken/current`` pins the newest committed state, another context's
    /// ``queryGenerationToken`` pins that one, and nil unpins.
    ///
    /// While pinned, every fetch, count, fault, relationship read and live-results refresh
    /// of this context (and of its children) sees exactly that state, whatever other
    /// contexts save and even after the store compacts. The objects it has loaded agree
    /// with it: on pinning, those another save changed since they were read are read
    /// again. Other saves wait in the context, as they do for one that does not merge
    /// automatically, and are taken in when it moves on: at its own save (which then reads
    /// at the state just after it), at ``processExternalChanges()``, or when this is
    /// called again. A fetch by a pinned context scans the records rather than walking an
    /// index (the indexes follow the newest state). See ``Coordinator/pinnedGenerations``
    /// for what generations cost.
    ///
    /// A token of a past state (``Coordinator/queryGeneration(asOf:)``) makes the context
    /// read that state from now on, and only that: it reads again every object it has
    /// loaded, takes in no other saves, refuses to save, and stays there.
    ///
    /// Throws for a child context (it reads at its root's generation), for a token of
    /// another store, for a context that reads a past state, and for a past state's token
    /// given to a context with unsaved changes.
    public func setQueryGenerationFrom(_ token: QueryGenerationToken?) throws {
        guard parent == nil else {
            throw CairnError(.invalidArgument, "a child context reads at its root context's query generation; pin the root")
        }
        if readsThePast {
            throw CairnError(.invalidArgument, "this context reads the past state after transaction \(readGeneration?.sequence ?? 0) and stays there; make a new context to read another")
        }
        if let generation = token?.generation, generation.isPast, let token {
            guard generation.isOf(coordinator.store) else {
                throw CairnError(.invalidArgument, "the query generation token is of another store")
            }
            guard !hasChanges else {
                throw CairnError(.invalidArgument, "a context with unsaved changes cannot read a past state; save or roll back first")
            }
            return moveToThePast(token)
        }
        guard let token else {
            pinnedGeneration = nil
            processExternalChanges()
            return
        }
        if let generation = token.generation {
            guard generation.isOf(coordinator.store) else {
                throw CairnError(.invalidArgument, "the query generation token is of another store")
            }
            move(to: token)
        } else {
            move(to: coordinator.pinGeneration(by: generationLabel))
        }
    }

    /// The name a pin of this context reports.
    var generationLabel: String { name ?? "context" }

    /// The generation this context's store reads are at: its root's pin, or nil (newest).
    var readGeneration: StoreGeneration? {
        var root = self
        while let parent = root.parent { root = parent }
        return root.pinnedGeneration?.generation
    }

    /// Whether this context (or its root) reads a past state, and so cannot save.
    var readsThePast: Bool { readGeneration?.isPast ?? false }

    /// Throws if this context reads a past state: nothing is written from one.
    func refuseWritesToThePast() throws {
        guard let generation = readGeneration, generation.isPast else { return }
        throw CairnError(.invalidArgument, "this context reads the past state after transaction \(generation.sequence), and cannot save or change the store")
    }

    /// Reads the past state `token` from now on: every loaded object is read again there,
    /// and other saves are let go of as they come (nothing is merged into the past).
    private func moveToThePast(_ token: QueryGenerationToken) {
        pinnedGeneration = token
        inbox.ignore()
        for (_, object) in registered where object.inStore {
            // (A fault's row, read by a fetch at the newest state, is not the past's.)
            if object.isFault { object.dropPrefetched() } else { refresh(object, mergeChanges: false) }
        }
        processPendingChanges()
    }

    /// For a pinned context: moves to the newest committed state.
    func moveGenerationToNewest() {
        guard pinnedGeneration != nil, !readsThePast else { return }
        move(to: coordinator.pinGeneration(by: generationLabel))
    }

    /// Reads at `token`'s state from now on: takes in the other saves up to it and reads
    /// again the loaded objects that do not show it (saves whose change sets have not
    /// reached the context yet, or a token older than what the objects were read at).
    private func move(to token: QueryGenerationToken) {
        pinnedGeneration = token
        guard let generation = token.generation else { return }
        defer { processPendingChanges() }
        mergeExternal(inbox.drain(through: generation.sequence))
        var objects: [ManagedObject] = []
        for (_, object) in registered where object.inStore && (!object.isFault || object.prefetchedVersion != nil) { objects.append(object) }
        let states = coordinator.versionsAndPresence(objects.map(\.recordID), at: generation)
        var stale: [RecordID] = [], gone = Set<UInt64>()
        for (object, state) in zip(objects, states) {
            if object.isFault {
                if let version = object.prefetchedVersion, version != state.version { object.dropPrefetched() }
                continue
            }
            guard state.version != object.baseVersion else { continue }
            if state.exists {
                stale.append(object.recordID)
            } else if !object.hasUnsavedChanges, forgetDeleted(object.recordID) {
                gone.insert(object.recordID.rawValue)
            }
        }
        dropReferences(to: gone)
        for id in stale { refreshUpdated(id) }
    }
}
