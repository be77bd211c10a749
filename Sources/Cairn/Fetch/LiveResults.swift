import CairnCollections
import CairnStorage
import Observation
import Foundation

/// A position in sectioned results (section, item).
public struct ResultIndex: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The section's position among ``LiveResults/sections``.
    public var section: Int
    /// The result's position in its section.
    public var item: Int
    /// The position of item `item` of section `section`.
    public init(section: Int, item: Int) { self.section = section; self.item = item }
    public static func < (a: ResultIndex, b: ResultIndex) -> Bool { (a.section, a.item) < (b.section, b.item) }
    public var description: String { "[\(section), \(item)]" }
}

/// One change to live results, enough to drive a table view without reloading it.
///
/// Apply it as a batch: remove `deleted` and the `from` side of `moved` (old positions)
/// and the `deletedSections`; insert the `insertedSections`, then `inserted` and the
/// `to` side of `moved` (new positions, ascending). `updated` names objects (at their
/// new positions) whose values changed.
public struct ResultsChange: Sendable, Equatable {
    /// Sections removed, at their old positions.
    public var deletedSections: [Int] = []
    /// Sections added, at their new positions.
    public var insertedSections: [Int] = []
    /// Results removed, at their old positions.
    public var deleted: [ResultIndex] = []
    /// Results added, at their new positions.
    public var inserted: [ResultIndex] = []
    /// Results that moved, with their old and new positions.
    public var moved: [Move] = []
    /// Results whose values changed, at their new positions.
    public var updated: [ResultIndex] = []

    /// A result that moved from one position to another.
    public struct Move: Sendable, Equatable {
        /// Its old position.
        public var from: ResultIndex
        /// Its new position.
        public var to: ResultIndex
        /// The object that moved.
        public var objectID: ObjectID
    }

    /// Whether nothing changed.
    public var isEmpty: Bool {
        deletedSections.isEmpty && insertedSections.isEmpty && deleted.isEmpty && inserted.isEmpty && moved.isEmpty && updated.isEmpty
    }
}

/// A fetch that stays current — the NSFetchedResultsController of Cairn.
///
/// After the context saves, merges another context's save, undoes or redoes, or is
/// told ``Context/processPendingChanges()``, the results are brought up to date, if what
/// they were fetched from may have changed, and the difference is delivered to
/// ``onChange`` and to the ``changes`` sequence. A change to a few of the entity's
/// records, or to records their key paths reach through relationships (`owner.name`),
/// places the records it touched again without a fetch, under a
/// fetch limit too unless rows from past it must come in; a larger one, a reset, or
/// results with a fetch offset fetch again. What they were fetched from: the stored
/// records of the request's entity and of the entities its key paths reach, and the
/// unsaved changes to them in the context and its ancestors; every entity's when the
/// request's `#Predicate` is evaluated on objects (``FetchQuery/inMemoryReason``), sections
/// are named by a closure, or a key path follows a relationship without an inverse. So a
/// save of other entities costs the results nothing.
///
/// ```swift
/// let byOwner = try LiveResults(request: FetchQuery(DVD.self, sortBy: [SortDescriptor(\DVD.title)]),
///                               context: context, sectionKeyPath: "owner.name")
/// byOwner.onChange = { change in print(change.inserted, change.deleted) }
/// ```
/// Sections group results by the value of ``sectionKeyPath``, in ascending order, or by
/// a name a closure gives each (``init(request:context:sectionName:)``).
public final class LiveResults<T: ManagedObject> {
    /// One section of the results: its name and its objects.
    public struct Section {
        /// The section's value of ``LiveResults/sectionKeyPath`` as text (`""` for nil, and for
        /// the one section of results without a key path), or the name the closure gave it.
        public var name: String
        /// The section's results, in the request's order.
        public var objects: [T]
    }

    /// The query the results run, its `sortBy` resolved into ``FetchQuery/sortKeys``.
    public let request: FetchQuery<T>
    /// The key path whose value groups the results into sections (`"owner.name"`), or nil:
    /// one section, or sections named by a closure.
    public let sectionKeyPath: String?
    /// Names each result's section when the results were made with a closure (see
    /// ``init(request:context:sectionName:)``).
    private let sectionName: ((T) -> String)?
    /// The results in their sections. Observable: a view (or `withObservationTracking`)
    /// that reads them is told of each change, as ``onChange`` and ``changes`` are.
    public private(set) var sections: [Section] {
        get {
            registrar.access(self, keyPath: \.sections)
            return storedSections
        }
        set {
            registrar.withMutation(of: self, keyPath: \.sections) {
                storedSections = newValue
                flattened = nil
            }
        }
    }
    private var storedSections: [Section] = []
    private let registrar = ObservationRegistrar()
    /// ``sections``' objects, not as `T`s: what an update walks (see ``ResultsUpdate``).
    /// Made from `sections` after a fetch; an update makes both.
    private var untyped: [[ManagedObject]] = []
    /// The record ID each result was placed under (an upsert may rename an object since).
    private var placed: [[RecordID]] = []
    /// With a fetch limit: what the results know of the matches past them.
    private var windowEnd: ResultsUpdate.WindowEnd?
    /// ``objects``, made once per change of ``sections``: a table view reading
    /// `objects[row]` for each cell would otherwise flatten every section per cell.
    private var flattened: [T]?
    /// Called with each change, on the context's isolation.
    public var onChange: ((ResultsChange) -> Void)?
    /// Every change, as an asynchronous sequence.
    public let changes: AsyncStream<ResultsChange>
    private let continuation: AsyncStream<ResultsChange>.Continuation
    private weak var context: Context?
    /// The values each result had when last fetched (to tell updates).
    private var snapshot = IDMap<RecordID, [Value]>()
    private var observation: UUID?
    /// The entities whose records and changes the results depend on, and how a change of
    /// a related record reaches the results' records; nil: every entity's, and a fetch.
    private let dependencies: ResultsDependencies?
    /// For related records the results reach, a hash of what the key paths read of them
    /// when the results last placed the records reaching them
    /// (``ResultsDependencies/rowsTouched(by:pending:seen:limit:context:)``): taken
    /// after each fetch (which forgets the earlier ones) and each update.
    private var relatedSeen = IDMap<RecordID, Int>()
    /// What the results were last fetched from (see ``ResultsInputs``).
    private var inputs: ResultsInputs?
    /// How many times the results were fetched (for tests).
    private(set) var fetchCount = 0
    /// How many times they were brought up to date without a fetch (for tests).
    private(set) var updateCount = 0
    /// How many records the last of those placed again (for tests).
    private(set) var lastTouchedCount = 0
    /// A refresh is under way; another was asked for meanwhile.
    private var isRefreshing = false
    private var refreshAgain = false

    /// Fetches `request` in `context` and keeps the results current, in sections by the value
    /// of `sectionKeyPath` (sorted by it first, ascending), or in one section if it is nil. Use
    /// them on the context's isolation. Throws what the fetch throws.
    public convenience init(request: FetchQuery<T>, context: Context, sectionKeyPath: String? = nil) throws {
        try self.init(request: request, context: context, sectionKeyPath: sectionKeyPath, sectionName: nil)
    }

    /// Results in sections named by `sectionName`, such as a first letter:
    /// `LiveResults(request: byName, context: context) { String($0.name.prefix(1)) }`.
    /// Sections come in the order their first result has in the request's sort, and each
    /// holds its results in that order; no stored attribute is needed. The closure may
    /// read anything, so a change of any entity fetches the results again.
    public convenience init(request: FetchQuery<T>, context: Context, sectionName: @escaping (T) -> String) throws {
        try self.init(request: request, context: context, sectionKeyPath: nil, sectionName: sectionName)
    }

    private init(request: FetchQuery<T>, context: Context, sectionKeyPath: String?, sectionName: ((T) -> String)?) throws {
        let request = try request.resolved()
        self.request = request
        self.context = context
        self.sectionKeyPath = sectionKeyPath
        self.sectionName = sectionName
        (changes, continuation) = AsyncStream.makeStream(of: ResultsChange.self)
        var keyPaths = request.sortKeys.map(\.keyPath) + (request.storedPredicate?.keyPaths ?? [])
        if let sectionKeyPath { keyPaths.append(sectionKeyPath.split(separator: ".").map(String.init)) }
        dependencies = request.objectFilter != nil || sectionName != nil ? nil
            : ResultsDependencies(keyPaths: keyPaths, entity: try context.entityDescription(request.entityName),
                                  schema: context.coordinator.schema)
        let fetched = try compute()
        hold(fetched, snapshot: values(of: fetched))
        observation = context.addChangeObserver { [weak self] in
            do { try self?.refreshIfInputsChanged() } catch { context.recordError(error as? CairnError ?? CairnError(.io, "\(error)")) }
        }
    }

    deinit {
        if let observation { context?.removeChangeObserver(observation) }
        continuation.finish()
    }

    /// All results, section after section.
    public var objects: [T] {
        if let flattened { return flattened }
        let all = sections.count == 1 ? sections[0].objects : sections.flatMap(\.objects)
        flattened = all
        return all
    }

    /// The result at `indexPath`.
    public func object(at indexPath: ResultIndex) -> T { sections[indexPath.section].objects[indexPath.item] }

    /// Fetches again and delivers the difference, if any.
    public func refresh() throws {
        try refresh(seen: nil, fetching: true)
    }

    /// ``refresh()``, the first fetch's inputs already taken (`seen`) when known; brought
    /// up to date without a fetch where it can be, unless `fetching`.
    private func refresh(seen: ResultsInputs?, fetching: Bool = false) throws {
        // A fetch takes in other contexts' saves, which tells observers (these results
        // too) of the change: a refresh started meanwhile runs after this one, not inside
        // it, where it delivered a change this one then delivered again, from old sections.
        guard !isRefreshing else {
            refreshAgain = true
            return
        }
        isRefreshing = true
        defer { isRefreshing = false }
        // Two passes at most: saves that keep landing during each pass (other threads')
        // would otherwise keep it going for as long as they come. What the last pass did
        // not take in is left for the next change or call (the inputs it noted are older
        // than the context's, so the next notification refreshes).
        var seen = seen, fetching = fetching, passes = 0
        repeat {
            refreshAgain = false
            try refreshOnce(seen: seen, fetching: fetching)
            seen = nil
            fetching = false
            passes += 1
        } while refreshAgain && passes < 2
    }

    private func refreshOnce(seen: ResultsInputs?, fetching: Bool) throws {
        let change: ResultsChange
        switch fetching ? nil : try update() {
        case .unchanged:
            return
        case .updated(let updated):
            change = updated.change
            sections = updated.sections
            untyped = updated.untyped
            placed = updated.placed
            windowEnd = updated.windowEnd
            for (id, values) in updated.snapshotChanges {
                if let values { snapshot[id] = values } else { _ = snapshot.removeValue(forKey: id) }
            }
        case nil:
            let old = sections
            let new = try compute(seen: seen)
            let newSnapshot = values(of: new)
            // By record ID (a table keyed by ObjectID would hash each entity name).
            // An object is updated if its values changed, or if another instance holds the record
            // now (after a reset: the rows must show the new ones).
            change = Self.diff(old: zip(old, placed).map { ($0.name, $1) },
                               new: new.map { ($0.name, $0.objects.map { $0.recordID }) },
                               changed: { id, from, to in
                                   old[from.section].objects[from.item] !== new[to.section].objects[to.item]
                                       || !ResultsUpdate.sameValues(self.snapshot[id], newSnapshot[id])
                               },
                               objectID: { new[$0.section].objects[$0.item].objectID })
            hold(new, snapshot: newSnapshot)
        }
        guard !change.isEmpty else { return }
        onChange?(change)
        continuation.yield(change)
    }

    private enum Update {
        case unchanged
        case updated(Updated)
    }

    /// The results brought up to date without a fetch, when they can be: results with
    /// known dependencies and no offset, changed in fewer records than an eighth of them
    /// (or 256), all known (``ResultsInputs/touched(until:entities:store:)``,
    /// ``ResultsDependencies/rowsTouched(by:pending:seen:limit:context:)``), and with a limit, no row
    /// from past them coming in. Nil: fetch again.
    private func update() throws -> Update? {
        guard let context, let dependencies, let before = inputs, request.fetchOffset <= 0,
              request.includesPendingChanges else { return nil }
        var window: (limit: Int, end: ResultsUpdate.WindowEnd)?
        if let limit = request.fetchLimit {
            guard limit > 0, let end = windowEnd else { return nil }
            window = (limit, end)
        }
        // Other contexts' saves first, as a fetch takes them in; in the ancestors too, so
        // that reading through them during the update runs no observer.
        var level: Context? = context
        while let current = level {
            current.mergeExternalChangesIfAutomatic()
            level = current.parent
        }
        try context.throwDeferredError()
        let store = context.coordinator, entities = dependencies.entities
        let now = ResultsInputs(of: context, entities: entities)
        if now == before { return .unchanged }
        guard let changed = before.touched(until: now, entities: entities, store: store) else { return nil }
        // (Hashes taken now hold once the update stands; a fetch forgets them.)
        var seen = relatedSeen
        guard let touched = try dependencies.rowsTouched(by: changed, pending: now.pending.map(\.id), seen: &seen,
                                                         limit: max(256, snapshot.count / 8), context: context)
        else { return nil }
        guard let updated = try Self.updated(sections, untyped: untyped, placed: placed, snapshot: snapshot, touched: touched,
                                             request: request, sectionKeyPath: sectionKeyPath, window: window, context: context),
              // Read in one state: a save by another thread meanwhile may have changed rows
              // compared along the way (a fetch reads one state).
              store.lastChange(entities: entities, at: context.readGeneration) == now.storeChange else { return nil }
        inputs = now
        relatedSeen = seen
        updateCount += 1
        lastTouchedCount = touched.count
        return .updated(updated)
    }

    /// Holds fetched sections, with what an update needs of them.
    private func hold(_ fetched: [Section], snapshot fetchedSnapshot: IDMap<RecordID, [Value]>) {
        sections = fetched
        // (Sharing the storage: `as [ManagedObject]` copies each element on Linux. Every `T`
        // is a `ManagedObject`, and arrays of class references are laid out alike.)
        untyped = fetched.map { unsafeBitCast($0.objects, to: [ManagedObject].self) }
        placed = fetched.map { $0.objects.map(\.recordID) }
        snapshot = fetchedSnapshot
        if let dependencies, !dependencies.chains.isEmpty, let context {
            relatedSeen = dependencies.reachedDigests(fetchedSnapshot, context: context)
        }
        windowEnd = try? fetchedWindowEnd()
    }

    /// With a fetch limit, what fetched results know of the matches past them.
    private func fetchedWindowEnd() throws -> ResultsUpdate.WindowEnd? {
        guard let limit = request.fetchLimit, let context, let entities = dependencies?.entities else { return nil }
        let entity = try context.entityDescription(request.entityName)
        let order = try ResultsUpdate.order(request.sortKeys, sectionKeyPath: sectionKeyPath, entity: entity,
                                            schema: context.coordinator.schema)
        let count = sections.reduce(0) { $0 + $1.objects.count }
        let end = try ResultsUpdate.windowEnd(limit: limit, count: count, last: sections.last?.objects.last?.recordID, order: order,
                                          context: context)
        // Read after the fetch: only if no save changed the entity since the fetch's inputs
        // were taken (else the last row's key may not be the one it was sorted by, and the
        // next change fetches again).
        guard context.coordinator.lastChange(entities: entities, at: context.readGeneration) == inputs?.storeChange else { return nil }
        return end
    }

    /// Fetches again if what the results were fetched from may have changed since.
    func refreshIfInputsChanged() throws {
        guard let context else { return }
        let current = ResultsInputs(of: context, entities: dependencies?.entities)
        guard current != inputs else { return }
        // A context that keeps a stable snapshot (see ``Context/automaticallyMergesChangesFromParent``)
        // shows other contexts' saves once it takes them in, not when the store has them.
        if var unmoved = inputs, context.holdsUnmergedChanges {
            unmoved.storeChange = current.storeChange
            if unmoved == current { return }
        }
        try refresh(seen: current)  // (not taken again for the fetch)
    }

    /// Fetches the sections, and notes what they were fetched from once they are (a fetch
    /// that throws leaves the inputs as they were, so the next change fetches again).
    private func compute(seen known: ResultsInputs? = nil) throws -> [Section] {
        guard let context else { return [] }
        let seen = known ?? ResultsInputs(of: context, entities: dependencies?.entities)
        relatedSeen = IDMap()
        let sections = try fetchSections(in: context)
        inputs = seen
        fetchCount += 1
        return sections
    }

    private func fetchSections(in context: Context) throws -> [Section] {
        if let sectionName {
            // Grouped by name in the order of each section's first result (a name met again
            // later joins its section, so no name is twice).
            var result: [Section] = [], positions: [String: Int] = [:]
            for object in try context.fetch(request) {
                let name = sectionName(object)
                if let at = positions[name] {
                    result[at].objects.append(object)
                } else {
                    positions[name] = result.count
                    result.append(Section(name: name, objects: [object]))
                }
            }
            return result
        }
        var request = self.request
        if let sectionKeyPath { request.sortKeys.insert(SortKey(sectionKeyPath), at: 0) }
        guard let sectionKeyPath else {
            let objects = try context.fetch(request)
            return objects.isEmpty ? [] : [Section(name: "", objects: objects)]
        }
        let entity = try context.entityDescription(request.entityName)
        let path = try CompiledPredicate.resolve(sectionKeyPath.split(separator: ".").map(String.init), entity: entity,
                                                 schema: context.coordinator.schema)
        // Each row is named by the values the fetch sorted it by, and the related records it
        // reached then (every one kept), not by the store's read again after it: a save by
        // another thread in between named a row by a key it was not sorted by, or "" once
        // deleted. An object filter's fetch reads them again.
        let resolver = context.memoizedViewValues(limit: .max)
        let fetched: [(object: T, values: [Value])]
        if request.objectFilter == nil {
            fetched = try context.fetchWithValues(request, resolver: resolver)
        } else {
            fetched = try context.fetch(request).map { ($0, try context.fetchedValues($0.recordID) ?? []) }
        }
        var result: [Section] = []
        for (object, values) in fetched {
            let name = ResultsUpdate.sectionName(CompiledPredicate.follow(path, values, resolver).first ?? .null)
            if result.last?.name == name { result[result.count - 1].objects.append(object) } else { result.append(Section(name: name, objects: [object])) }
        }
        return result
    }

    private func values(of sections: [Section]) -> IDMap<RecordID, [Value]> {
        var result = IDMap<RecordID, [Value]>()
        guard let context else { return result }
        result.reserveCapacity(sections.reduce(0) { $0 + $1.objects.count })
        for section in sections {
            for object in section.objects { result[object.recordID] = context.viewValues(object.recordID) }
        }
        return result
    }

    /// The change from `old` to `new` sections (name, IDs): kept objects are the longest
    /// run that stays in order within a section; the rest of the common ones are moves
    /// (`objectID` names the object at a new position; `changed` is asked of each common
    /// one, with its old and new positions).
    static func diff(old: [(String, [RecordID])], new: [(String, [RecordID])],
                     changed: (RecordID, _ from: ResultIndex, _ to: ResultIndex) -> Bool,
                     objectID: (ResultIndex) -> ObjectID) -> ResultsChange {
        var change = ResultsChange()
        let oldNames = old.map(\.0), newNames = new.map(\.0)
        let oldNameSet = Set(oldNames), newNameSet = Set(newNames)
        change.deletedSections = oldNames.indices.filter { !newNameSet.contains(oldNames[$0]) }
        change.insertedSections = newNames.indices.filter { !oldNameSet.contains(newNames[$0]) }
        var oldPositions = IDMap<RecordID, ResultIndex>(), newPositions = IDMap<RecordID, ResultIndex>()
        oldPositions.reserveCapacity(old.reduce(0) { $0 + $1.1.count })
        newPositions.reserveCapacity(new.reduce(0) { $0 + $1.1.count })
        for (s, section) in old.enumerated() { for (i, id) in section.1.enumerated() { oldPositions[id] = ResultIndex(section: s, item: i) } }
        for (s, section) in new.enumerated() { for (i, id) in section.1.enumerated() { newPositions[id] = ResultIndex(section: s, item: i) } }
        for section in old { for id in section.1 where !newPositions.contains(id) { if let at = oldPositions[id] { change.deleted.append(at) } } }
        for section in new { for id in section.1 where !oldPositions.contains(id) { if let at = newPositions[id] { change.inserted.append(at) } } }
        for (s, section) in new.enumerated() {
            // Objects that stayed in a section of the same name: keep the longest in-order run.
            var staying: [RecordID] = [], stayingFrom: [Int] = []
            for id in section.1 {
                guard let from = oldPositions[id], oldNames[from.section] == section.0 else { continue }
                staying.append(id)
                stayingFrom.append(from.item)
            }
            var kept = IDMap<RecordID, Bool>()
            for index in longestIncreasing(stayingFrom) { kept[staying[index]] = true }
            for (i, id) in section.1.enumerated() {
                guard let from = oldPositions[id] else { continue }
                let to = ResultIndex(section: s, item: i)
                if !kept.contains(id) { change.moved.append(.init(from: from, to: to, objectID: objectID(to))) }
                if changed(id, from, to) { change.updated.append(to) }
            }
        }
        change.deleted.sort()
        change.inserted.sort()
        change.moved.sort { $0.to < $1.to }
        change.updated.sort()
        return change
    }

    /// Indices of a longest strictly increasing subsequence of `values`.
    static func longestIncreasing(_ values: [Int]) -> [Int] {
        var tails: [Int] = [], previous = [Int](repeating: -1, count: values.count)
        for (index, value) in values.enumerated() {
            let low = tails.partitionPoint { values[$0] >= value }
            if low > 0 { previous[index] = tails[low - 1] }
            if low == tails.count { tails.append(index) } else { tails[low] = index }
        }
        var result: [Int] = []
        var cursor = tails.last ?? -1
        while cursor >= 0 { result.append(cursor); cursor = previous[cursor] }
        return result.reversed()
    }
}

@available(*, unavailable, message: "live results belong to their context's isolation")
extension LiveResults: Sendable {}

/// What a fetch that reads some entities' records (or every entity's, `entities` nil)
/// saw, in a form cheap to compare: the last store transaction that changed them, each
/// context's reset count from this one up to the root, and the unsaved state (object,
/// existence, a hash of the values) of every changed object of those entities in each of
/// those contexts.
/// Equal inputs give an equal fetch (but for two different values of 64-bit hash
/// alike); unequal ones may not (a value set and set back). A hash, not the values: held
/// here, the values array (and a to-many list in it) would be copied by the object's next
/// write, an append to a long list copying the whole list after each notification.
struct ResultsInputs: Equatable {
    struct Pending: Equatable {
        let id: RecordID
        let object: ObjectIdentifier
        let exists: Bool
        let digest: Int
    }

    var storeChange: UInt64
    var resets: [Int] = []
    /// Each context's changed objects of the entity in ID order, contexts separated by a
    /// count of their entries.
    var pending: [Pending] = []
    var counts: [Int] = []

    init(of context: Context, entities: [UInt16]?) {
        let store = context.coordinator, generation = context.readGeneration
        storeChange = entities.map { store.lastChange(entities: $0, at: generation) } ?? generation?.sequence ?? store.lastSequence
        var level: Context? = context
        while let current = level {
            resets.append(current.resetGeneration)
            let start = pending.count
            for (id, object) in current.dirty where entities?.contains(id.entity) ?? true {
                pending.append(Pending(id: id, object: ObjectIdentifier(object), exists: object.exists, digest: Self.digest(object.values)))
            }
            pending[start...].sort { $0.id.rawValue < $1.id.rawValue }
            counts.append(pending.count - start)
            level = current.parent
        }
    }
}

extension ResultsInputs {
    /// A hash of every byte of `values`: `Data`'s own hash reads its length and first 80
    /// bytes only, and a change past them (in a blob, or deep in an archived value) went
    /// unseen.
    static func digest(_ values: [Value]) -> Int {
        var hasher = Hasher()
        for value in values {
            switch value {
            case .bytes(let data), .archived(let data):
                hasher.combine(data.count)
                data.withUnsafeBytes { hasher.combine(bytes: $0) }
            default:
                hasher.combine(value)
            }
        }
        return hasher.finalize()
    }
}

extension Context {
    /// Tells live results (and other observers) that objects changed: call after a batch
    /// of unsaved edits that results should reflect. Saves, merges, undo and redo call it.
    public func processPendingChanges() {
        let observers = changeObservers.values
        for observer in observers { observer() }
    }

    func addChangeObserver(_ observer: @escaping () -> Void) -> UUID {
        let token = UUID()
        changeObservers[token] = observer
        return token
    }

    func removeChangeObserver(_ token: UUID) {
        changeObservers[token] = nil
    }
}

extension LiveResults: Observable {}
