import CairnCollections
import CairnStorage
import Foundation

/// The whole stack in one line: store, coordinator, model, a main context on the main
/// actor, background contexts on demand, and persistent queues.
///
/// ```swift
/// let container = try Container(name: "Collection", entities: [Person.self, DVD.self],
///                               storage: .onDisk(URL(fileURLWithPath: "/path/Collection.cairn")))
/// let people = try container.mainContext.fetch(FetchQuery(Person.self))
/// ```
/// `.inMemory` runs the same engine over an in-memory file system: identical semantics,
/// nothing on disk.
public final class Container: Sendable {
    /// Where the store keeps its files.
    public enum Storage: Sendable {
        /// In the directory at the URL, created if missing.
        case onDisk(URL)
        /// On an in-memory file system: the same engine, nothing on disk, gone when the
        /// container is.
        case inMemory
    }

    /// The name the container was opened with (`"Cairn"` unless given); for `.inMemory`,
    /// it names the in-memory store.
    public let name: String
    /// The model the container was opened with: the entity classes, those they reach,
    /// and the run-time entities.
    public let model: Model
    package let coordinator: Coordinator
    /// The store directory (a path in memory for `.inMemory`).
    public let path: String
    private let queues = Protected<[String: ObjectQueueStorage]>([:])
    @MainActor private var main: Context?

    /// The entity that holds the elements of every ``ObjectQueue`` of the store.
    static let queueEntity = EntityDescription(
        name: "CairnQueueElement", number: 0,  // (in Schema.internalEntityNames)
        attributes: [AttributeDescription(name: "queue", type: .string, isIndexed: true),
                     AttributeDescription(name: "position", type: .int64),
                     AttributeDescription(name: "payload", type: .archived)])

    /// Opens (or creates) the store and sets up the stack.
    ///
    /// - Parameters:
    ///   - name: names the container, and for `.inMemory` the in-memory store's path (two
    ///     `.inMemory` containers of one name in a process are two stores all the same).
    ///     It does not choose a file: `storage` does.
    ///   - entities: the model's classes. Classes they reach through relationships join
    ///     the model without being listed.
    ///   - dynamicEntities: entities built at run time, read and written by key.
    ///   - storage: `.onDisk(url)`, a directory the store keeps its files in (created if
    ///     missing), or `.inMemory`: the same engine on an in-memory file system,
    ///     gone when the container is.
    ///   - durability: `.durable` (the default) syncs every save to disk.
    ///   - compaction: when the store folds its log into a new snapshot by itself.
    ///   - history: whether the store keeps history, and how long (``HistoryRetention``;
    ///     nil, the default: none past the log, see ``history(after:)``).
    ///   - modelVersion: the model's version, stored with the store: a model older than
    ///     the store's, with another layout, is refused rather than migrated back.
    ///   - migration: what to do when the model differs from the store's (lightweight
    ///     migration by default; see ``MigrationPolicy``).
    ///   - readOnly: open the store as a reader (``StoreOptions/readOnly``): for an app
    ///     extension, a widget or a tool that reads a store another process writes. The
    ///     open succeeds while that process holds the store, takes no lock, changes no
    ///     file, and sees the store's committed state as of the open; every save throws.
    ///     The model must be the store's (a reader does not migrate).
    public init(name: String = "Cairn", entities: [ManagedObject.Type], dynamicEntities: [EntityDescription] = [],
                storage: Storage, durability: Durability = .durable, compaction: CompactionPolicy = .default,
                history: HistoryRetention? = nil, modelVersion: UInt32 = 1, migration: MigrationPolicy = .lightweight,
                readOnly: Bool = false) throws {
        self.name = name
        model = try Model(types: entities, entities: dynamicEntities + [Container.queueEntity], version: modelVersion)
        var options: StoreOptions
        switch storage {
        case .onDisk(let url):
            path = url.path
            options = StoreOptions(fileSystem: POSIXFileSystem(), durability: durability, compaction: compaction)
        case .inMemory:
            path = "/memory/\(name)"
            options = StoreOptions(fileSystem: MemoryFileSystem(), durability: durability, compaction: compaction,
                                   preallocationBytes: 64 << 10)
        }
        options.history = history
        if readOnly {
            options.readOnly = true
            options.createIfMissing = false
        }
        coordinator = try Coordinator(path: path, schema: model.schema, options: options, migration: migration)
    }

    /// The main context, confined to the main actor: the single source of truth for UI.
    /// Every save of another context on the container (a background context, a batch, the
    /// object queue) reaches it on the main actor as it happens, with no call: its objects
    /// take the new values, its ``LiveResults`` deliver their changes, and observers hear
    /// of the properties that changed.
    @MainActor public var mainContext: Context {
        if let main { return main }
        let context = Context(coordinator: coordinator, model: model)
        context.name = "main"
        context.undoManager.endEventsEachMainActorTurn()  // one undo step per main-actor turn
        context.observesObjects = true  // its objects drive views
        context.mergeAutomatically(on: MainActor.shared)
        main = context
        return context
    }

    /// A new context with its own serial executor.
    public func newBackgroundContext(mergePolicy: MergePolicy = .error) -> BackgroundContext {
        BackgroundContext(coordinator: coordinator, model: model, mergePolicy: mergePolicy)
    }

    /// The persistent FIFO queue named `name` (the same storage for every call with that name).
    public func queue<Element: Codable & Sendable>(named name: String, of type: Element.Type = Element.self) throws -> ObjectQueue<Element> {
        let elementType = String(reflecting: Element.self)
        guard !name.hasPrefix("\u{0}") else {
            throw CairnError(.invalidArgument, "queue names starting with a NUL character are Cairn's own (kept undo)")
        }
        let storage = try queues.withLock { queues -> ObjectQueueStorage in
            if let known = queues[name] {
                guard known.elementType == elementType else {
                    throw CairnError(.schemaMismatch,
                                     "queue '\(name)' was opened for \(known.elementType) elements; it cannot also be opened for \(elementType)")
                }
                return known
            }
            let created = try ObjectQueueStorage(name: name, coordinator: coordinator, elementType: elementType)
            queues[name] = created
            return created
        }
        return ObjectQueue(storage: storage)
    }

    /// Makes every save durable and releases the store (its lock too). Unsaved changes in
    /// contexts are not saved; ``DataService/close()`` saves the main context first.
    /// A failed sync is thrown (the store is closed all the same; see ``Coordinator/close()``).
    public func close() throws {
        try coordinator.close()
    }
}

// MARK: - Reading a store another process writes

extension Container {
    /// For a read-only container (`readOnly: true`): takes in what the writing process
    /// committed since this container opened or last advanced, and returns the change
    /// sets, oldest first (none: nothing new). They reach the contexts as another
    /// context's saves do: the main context merges them on the main actor, objects take
    /// the new values, ``LiveResults`` deliver their changes and observers hear of the
    /// keys that changed. Each transaction the writer appended is one change set; across
    /// a compaction of the writer's, one change set covers the whole step (the two states
    /// compared record by record).
    ///
    /// Until it advances, the container reads the committed state of its open or its last
    /// advance: every fetch and fault reads that state, however far the writer goes.
    /// Throws `.invalidArgument` for a container that writes (it is always at its newest).
    @discardableResult
    public func advance() throws -> [ChangeSet] { try coordinator.advance() }

    /// For a read-only container: the writing process's commits as this container takes
    /// them in, checking for new ones every `interval`, as change sets (see ``advance()``).
    /// The sequence ends when the task iterating it is cancelled, or with the error an
    /// advance throws (the store closed, or damage in a new frame).
    public func changes(every interval: Duration = .milliseconds(50)) -> AsyncThrowingStream<ChangeSet, any Error> {
        Coordinator.polling(every: interval) { [coordinator] in try coordinator.advance() }
    }
}

// MARK: - Maintenance

extension Container {
    /// What opening the store found and did: see ``Coordinator/recoveryReport``.
    public var recoveryReport: RecoveryReport { coordinator.recoveryReport }

    /// Record counts, file sizes and the last commit: see ``Coordinator/statistics``.
    public var statistics: StoreStatistics { coordinator.statistics }

    /// The token of the newest committed state (see ``history(after:)``).
    public var historyToken: HistoryToken { coordinator.historyToken }

    /// The transactions after `token` (nil: every one the store holds), oldest first: see
    /// ``Coordinator/history(after:)``.
    public func history(after token: HistoryToken?) throws -> [HistoryTransaction] { try coordinator.history(after: token) }

    /// What changed since `token`, with the current values of the objects it touched: see
    /// ``Coordinator/changes(since:)``.
    public func changes(since token: HistoryToken) throws -> HistoryChanges { try coordinator.changes(since: token) }

    /// The transactions after `token` as they commit: see ``Coordinator/transactions(after:every:)``.
    public func transactions(after token: HistoryToken? = nil,
                             every interval: Duration = .milliseconds(50)) -> AsyncThrowingStream<HistoryTransaction, any Error> {
        coordinator.transactions(after: token, every: interval)
    }

    /// The query generations contexts hold, with what each costs
    /// (see ``Context/setQueryGenerationFrom(_:)``).
    public var pinnedGenerations: [PinnedGeneration] { coordinator.pinnedGenerations }

    /// A new context that reads the committed state just after `token`'s transaction, and
    /// cannot save: see ``Coordinator/queryGeneration(asOf:)``. Its objects, fetches,
    /// counts and relationships are those of that state while the store goes on.
    public func context(asOf token: HistoryToken) throws -> Context {
        let context = Context(coordinator: coordinator, model: model)
        context.name = "as of \(token.sequence)"
        context.undoManager.isEnabled = false
        try context.setQueryGenerationFrom(coordinator.queryGeneration(asOf: token))
        return context
    }

    /// Checks every byte and record of the store, changing nothing: see ``Coordinator/verify()``.
    public func verify() -> [StoreProblem] { coordinator.verify() }

    /// Makes every save so far durable: see ``Coordinator/sync()``.
    public func sync() throws { try coordinator.sync() }

    /// Folds the log into a new snapshot now: see ``Coordinator/compact()``.
    @discardableResult
    public func compact() throws -> CompactionResult { try coordinator.compact() }

    /// The transactions since the last compaction: see ``Coordinator/history()``.
    public func history() throws -> [CommittedTransaction] { try coordinator.history() }

    /// What opening the store at `url` with this model would migrate, and the data each
    /// step would drop, without changing the store: the same steps
    /// ``init(name:entities:dynamicEntities:storage:durability:compaction:history:modelVersion:migration:readOnly:)``
    /// would take with `migration` (`.stages` forecasts the stages given; any other policy,
    /// a lightweight migration). A store already at the model forecasts no steps.
    public static func migrationForecast(at url: URL, entities: [ManagedObject.Type], dynamicEntities: [EntityDescription] = [],
                                         modelVersion: UInt32 = 1, migration: MigrationPolicy = .lightweight) throws -> MigrationForecast {
        let model = try Model(types: entities, entities: dynamicEntities + [Container.queueEntity], version: modelVersion)
        let stages: [MigrationStage]
        switch migration {
        case .stages(let given): stages = given
        case .lightweightAllowingDataLoss: stages = [MigrationStage(model.schema, allowingDataLoss: true)]
        default: stages = [MigrationStage(model.schema)]
        }
        return try Store.forecast(at: url.path, to: stages)
    }
}
