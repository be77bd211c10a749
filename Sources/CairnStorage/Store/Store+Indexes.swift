import CairnCollections
import Foundation

/// What an index lookup asks for.
package enum IndexCondition: Sendable, Hashable {
    /// Values equal to any of these (`==`, `IN`).
    case equal([Value])
    /// Values in a range; a nil bound is open.
    case range(lower: Value?, lowerInclusive: Bool, upper: Value?, upperInclusive: Bool)
}

/// A secondary index over one attribute of one entity, in ``IndexOrder``, in up to
/// four tiers: the index stored in the snapshot (format version 2, FORMAT.md §6.6), read
/// in place; a sorted run in memory; a smaller sorted run of the changes since; and an
/// unsorted delta of the latest few thousand changes, hashed by value for equality
/// lookups. The delta is folded into the smaller run when it reaches ``deltaLimit``, that
/// run into the large one when it outgrows a multiple of the square root of it. So a lookup
/// searches two runs and, for equality, one hashed table (a range tests the delta's
/// changes one by one), not every change of one large unsorted delta. Without a stored
/// index the large run is built on first use (one scan of the entity). A commit only
/// notes the IDs it changed; the next lookup reads their current values from the
/// store's overlay (so commits to an entity nobody looks up by value pay one append per
/// record).
// Mutated and read only under the store's state lock.
package final class SecondaryIndex: @unchecked Sendable {
    package let slot: Int
    /// The stored index: every record of the snapshot, in value order.
    private let stored: (snapshot: SnapshotReader, block: SnapshotIndex.AttributeIndex)?
    /// Whether the stored block's checksum has been checked.
    private var storedChecked = false
    private(set) var sorted = SortedRun.values([])
    /// The first bytes of `sorted`'s strings, when it holds only strings and nils.
    private var sortedPrefixes: StringPrefixes?
    /// IDs whose entry in `sorted` is out of date (changed since it was built).
    private var stale = Set<UInt64>()
    /// The changes since `sorted` was built, in index order, as of the last fold of
    /// `delta`; the entries of IDs in `delta` are out of date.
    private var recent: [(value: Value, id: UInt64)] = []
    /// The first bytes of `recent`'s strings, when it holds only strings and nils.
    private var recentPrefixes: StringPrefixes?
    /// Current values of IDs changed since `recent` was made (nil: deleted).
    private var delta: [UInt64: Value?] = [:]
    /// The IDs of `delta`'s values by their key (``ValueKey``,
    /// equal exactly when the values are), for equality lookups; values of kinds without a
    /// key are in `unkeyedDelta`. (Tested one by one, the delta would cost each uniqueness
    /// check of a save a pass over it.)
    private var deltaByKey: [ValueKey: KeyedIDs] = [:]
    private var unkeyedDelta = Set<UInt64>()
    /// Most changes kept in `delta` before it is folded into `recent`.
    package static let deltaLimit = 4096
    /// IDs committed since the last lookup, not yet in `delta` (see ``catchUp(with:)``).
    private var pending: [UInt64] = []

    /// An index built from `entries`, one per record in ascending ID order.
    package init(slot: Int, entries: [(Value, UInt64)]) {
        self.slot = slot
        stored = nil
        let (run, prefixes) = Self.sortedRunAndPrefixes(entries)
        (sorted, sortedPrefixes) = (.values(run), prefixes)
    }

    /// `entries`, in ascending ID order, as a run in index order.
    package static func sortedRun(_ entries: [(Value, UInt64)]) -> [(value: Value, id: UInt64)] {
        sortedRunAndPrefixes(entries).run
    }

    /// ``sortedRun(_:)`` with the run's ``StringPrefixes`` when it holds strings (the
    /// prefixes the sort compared).
    static func sortedRunAndPrefixes(_ entries: [(Value, UInt64)]) -> (run: [(value: Value, id: UInt64)], prefixes: StringPrefixes?) {
        let (positions, strings) = IndexOrder.sortedPositionsAndPrefixes(entries.map(\.0))
        return (positions.map { (entries[$0].0, entries[$0].1) }, strings.map { StringPrefixes(nulls: $0.nulls, prefixes: $0.prefixes) })
    }

    /// The index `snapshot` stores in `block`, brought up to date with the log's changes
    /// to the entity (`changes`, raw ID → body, nil for a delete) in one sorted run.
    /// Throws if a frame a checkpoint covered fails its check (every body is read).
    init(snapshot: SnapshotReader, block: SnapshotIndex.AttributeIndex, changes: EntityOverlay) throws {
        try changes.bodies.checkAll()
        slot = block.attribute
        stored = (snapshot, block)
        // (The stored entries out of date are those of the IDs the overlay holds: see
        // ``lookup(_:changes:first:)``.)
        let slot = self.slot
        // Integers go straight from the bodies into (integer, ID) pairs, with no array of
        // every value first; a long tail's are read and sorted in parts on several threads
        // (reading the bodies is mostly waiting for memory). Once they are read, the log's
        // pages are let go of before the sort takes its memory.
        let parts = changes.count >= Self.partsMinimum ? Processors.count : 1
        let collected = PerRun<IntegerPairs>(count: parts, initial: IntegerPairs())
        // (Room for a part's share and a quarter more made once: grown by doubling, the old
        // and new arrays would both be resident. Room not written is not.)
        let share = changes.count / parts + changes.count / (4 * parts) + 1_024
        let read: @Sendable (Int) -> Void = { part in
            var pairs = IntegerPairs()
            pairs.keyed.reserveCapacity(share)
            changes.entries.forEach(part: part, of: parts) { id, entry in
                !entry.isLive || pairs.add(Self.value(at: slot, in: changes.bodies.uncheckedBody(entry)), id)
            }
            collected[part] = pairs
        }
        if parts > 1 { DispatchQueue.concurrentPerform(iterations: parts, execute: read) } else { read(0) }
        if let run = Self.integerRun(collected, whenRead: { changes.bodies.log?.dropResidentPages() }) {
            (sorted, sortedPrefixes) = (.integers(run), nil)
        } else {
            var entries: [(Value, UInt64)] = []
            for (id, entry) in changes.entries where entry.isLive {
                entries.append((Self.value(at: slot, in: changes.bodies.uncheckedBody(entry)), id))
            }
            let (run, prefixes) = Self.sortedRunAndPrefixes(unordered: entries)
            (sorted, sortedPrefixes) = (.values(run), prefixes)
        }
    }

    /// The index `snapshot` stores in `block`, with `run` (a checkpoint's) as the run of
    /// the log's changes to the entity.
    init(snapshot: SnapshotReader, block: SnapshotIndex.AttributeIndex, run: IntegerRun) {
        slot = block.attribute
        stored = (snapshot, block)
        sorted = .integers(run)
    }

    /// The run of the log's changes when it is the whole of them, as a checkpoint keeps it:
    /// caught up with `changes`, nothing changed since it was made, integers.
    func wholeIntegerRun(changes: EntityOverlay) -> IntegerRun? {
        catchUp(with: changes)
        guard stale.isEmpty, recent.isEmpty, delta.isEmpty, case .integers(let run) = sorted else { return nil }
        return run
    }

    /// Overlays with at least this many entries have their index values read in parts.
    static let partsMinimum = 1 << 16

    /// `entries`, in any order, as a run in index order (equal values in ID order).
    package static func sortedRun(unordered entries: [(Value, UInt64)]) -> [(value: Value, id: UInt64)] {
        sortedRunAndPrefixes(unordered: entries).run
    }

    /// ``sortedRun(unordered:)`` with the run's ``StringPrefixes`` when it holds strings.
    static func sortedRunAndPrefixes(unordered entries: [(Value, UInt64)]) -> (run: [(value: Value, id: UInt64)], prefixes: StringPrefixes?) {
        let run = integerRun(count: entries.count) { add in
            for (value, id) in entries where !add(value, id) { return }
        }
        if let run { return (run.values, nil) }
        var byID = entries
        RadixSort.sort(&byID) { $0.1 }
        return sortedRunAndPrefixes(byID)
    }

    /// The value a committed body holds at `slot` (bodies are checked before they are
    /// committed; one that does not decode indexes as nil).
    package static func value(at slot: Int, in body: UnsafeRawBufferPointer) -> Value {
        let value = try? ValueCoding.value(at: slot, in: body)
        return value.flatMap { $0 } ?? .null
    }

    /// Whether this index reads a snapshot's stored index.
    package var isStored: Bool { stored != nil }

    package static func less(_ a: (value: Value, id: UInt64), _ b: (value: Value, id: UInt64)) -> Bool {
        switch IndexOrder.compare(a.value, b.value) {
        case .orderedAscending: return true
        case .orderedDescending: return false
        case .orderedSame: return a.id < b.id
        }
    }

    /// How many IDs may change after `sorted` (of `sortedCount` entries) was made before
    /// `recent` is folded into it: T = √(2 · deltaLimit · n). A fold of the delta moves
    /// `recent`'s entries, on average T / 2 for each ``deltaLimit`` changes; a fold into
    /// `sorted` moves its n entries for each T changes; this T makes the two shares
    /// equal, about √(2n / deltaLimit) entries moved a change in all (7 at 100,000).
    static func foldLimit(sortedCount n: Int) -> Int {
        max(deltaLimit, Int((2 * Double(deltaLimit) * Double(n)).squareRoot()))
    }

    /// Notes that a commit put or deleted `id`.
    package func noteChange(_ id: UInt64) { pending.append(id) }

    /// Brings the index up to date with the IDs noted since the last call: their current
    /// values are in `changes`, the overlay of the entity (a put's body; a delete is
    /// `.deleted`, or absent for a record the snapshot never held).
    func catchUp(with changes: EntityOverlay) {
        guard !pending.isEmpty else { return }
        for id in pending {
            // (A noted change is a commit's or a replayed frame's, whose body was checked.)
            if let body = changes.uncheckedLiveBody(id) {
                update(id, to: Self.value(at: slot, in: body))
            } else {
                update(id, to: nil)
            }
        }
        pending = []
    }

    private func update(_ id: UInt64, to value: Value?) {
        stale.insert(id)
        if case let old?? = delta.updateValue(value, forKey: id) { forgetKey(of: old, id) }
        if let value {
            if let key = ValueKey(value, []) {
                // (One hash of the key when it is new, as a unique attribute's keys are.)
                if let ids = deltaByKey.updateValue(.one(id), forKey: key) { deltaByKey[key] = ids.inserting(id) }
            } else {
                unkeyedDelta.insert(id)
            }
        }
        if delta.count >= Self.deltaLimit { foldDelta() }
    }

    private func forgetKey(of value: Value, _ id: UInt64) {
        guard let key = ValueKey(value, []) else {
            unkeyedDelta.remove(id)
            return
        }
        if let ids = deltaByKey[key] { deltaByKey[key] = ids.removing(id) }
    }

    /// Folds `delta` into `recent` (whose entries of the IDs in it are dropped), and
    /// `recent` into `sorted` once the IDs changed since `sorted` was made are more than
    /// ``foldLimit(sortedCount:)``.
    private func foldDelta() {
        var changed: [(Value, UInt64)] = []
        changed.reserveCapacity(delta.count)
        for (id, value) in delta { if let value { changed.append((value, id)) } }
        RadixSort.sort(&changed) { $0.1 }
        let delta = self.delta
        let (run, prefixes) = Self.sortedRunAndPrefixes(changed)
        (recent, recentPrefixes) = Self.merge(recent, recentPrefixes, keeping: { delta[$0] == nil }, run, prefixes)
        // (Emptied keeping their room, which the next delta fills again: emptied to nothing,
        // each would grow anew, every key hashed again at each doubling.)
        self.delta.removeAll(keepingCapacity: true)
        deltaByKey.removeAll(keepingCapacity: true)
        unkeyedDelta.removeAll(keepingCapacity: true)
        // (Every ID with an entry in `recent`, and every one deleted, is in `stale`.)
        if stale.count > Self.foldLimit(sortedCount: sorted.count) {
            let dropped = stale
            let (run, prefixes) = Self.merge(sorted.values, sortedPrefixes, keeping: { !dropped.contains($0) }, recent, recentPrefixes)
            (sorted, sortedPrefixes) = (.values(run), prefixes)
            (recent, recentPrefixes) = ([], StringPrefixes(nulls: 0, prefixes: []))
            stale = []
        }
    }

    /// The records whose value meets `condition`, in no particular order, given the
    /// entity's current overlay (`changes`): each one's ID and, for a match from the
    /// stored tier, where its frame is in the snapshot (-1 otherwise). Reading the stored
    /// tier checks its block and the records it reads, and may throw on damage.
    /// The index's tiers as they are now, caught up with `changes` (the entity's overlay)
    /// and its stored block checked: copies, which later commits leave as they are, for a
    /// walk in index order outside the state's lock (``IndexTiers/walk(ascending:_:)``).
    func tiers(changes: EntityOverlay) throws -> IndexTiers {
        catchUp(with: changes)
        if let (snapshot, block) = stored, !storedChecked {
            try snapshot.checkAttributeIndex(block)
            storedChecked = true
        }
        return IndexTiers(stored: stored, sorted: sorted, stale: stale, recent: recent, delta: delta, changes: changes)
    }

    /// The records whose values meet `condition`. With `first`, a lookup of equal values
    /// may stop, for each value, after the first `first` of the snapshot's stored entries
    /// in ID order that the log has not changed: `completeThrough` is then the highest ID
    /// through which the matches are all there (the first `first` matches in ID order are
    /// among them); nil when none were left out.
    func lookup(_ condition: IndexCondition, changes: EntityOverlay, first: Int? = nil) throws
        -> (matches: [IndexMatch], completeThrough: UInt64?) {
        catchUp(with: changes)
        var result: [IndexMatch] = []
        var completeThrough: UInt64?
        if let (snapshot, block) = stored {
            if !storedChecked {
                try snapshot.checkAttributeIndex(block)
                storedChecked = true
            }
            // A stored entry is out of date when the overlay holds its ID: every change to a
            // snapshot record since the snapshot stays in the overlay (a put, or a delete
            // as `.deleted`) until a compaction makes a new snapshot and new indexes.
            completeThrough = try Self.collect(condition, count: block.count, first: first, skipping: { changes.contains($0) }, into: &result, value: { i in
                let (id, place) = try snapshot.record(in: block, at: i)
                let body = try snapshot.body(at: place, id: id)
                do {
                    return try ValueCoding.value(at: block.attribute, in: body) ?? .null
                } catch let error as CairnError {
                    throw error.located(in: snapshot.path, base: Int64(snapshot.fileOffset(of: body)))
                }
            }, match: { i in
                let (id, place) = try snapshot.record(in: block, at: i)
                return IndexMatch(id: id.rawValue, snapshotPlace: place)
            })
        }
        let sorted = self.sorted, recent = self.recent
        let stale = self.stale, delta = self.delta
        try Self.collect(condition, count: sorted.count, prefixes: sortedPrefixes, skipping: { stale.contains($0) }, into: &result,
                         value: { sorted[$0].value }, match: { IndexMatch(id: sorted[$0].id, snapshotPlace: nil) })
        try Self.collect(condition, count: recent.count, prefixes: recentPrefixes, skipping: { delta[$0] != nil }, into: &result,
                         value: { recent[$0].value }, match: { IndexMatch(id: recent[$0].id, snapshotPlace: nil) })
        if case .equal(let wanted) = condition {
            // A wanted value with a key: the delta's values with that key, and those without
            // one that equal it (a real may equal an integer); one without a key: every value.
            var found = Set<UInt64>()
            for target in wanted {
                if let key = ValueKey(target, []) {
                    deltaByKey[key]?.forEach { found.insert($0) }
                    for id in unkeyedDelta {
                        if case let value?? = delta[id], ValueOrder.equal(value, target, []) { found.insert(id) }
                    }
                } else {
                    for (id, value) in delta {
                        if let value, ValueOrder.equal(value, target, []) { found.insert(id) }
                    }
                }
            }
            for id in found { result.append(IndexMatch(id: id, snapshotPlace: nil)) }
        } else {
            for (id, value) in delta {
                if let value, Self.matches(value, condition) { result.append(IndexMatch(id: id, snapshotPlace: nil)) }
            }
        }
        if case .equal(let wanted) = condition, wanted.count > 1 { return (Array(Set(result)), completeThrough) }
        return (result, completeThrough)
    }

    package static func matches(_ value: Value, _ condition: IndexCondition) -> Bool {
        switch condition {
        case .equal(let wanted): return wanted.contains { ValueOrder.equal(value, $0, []) }
        case .range(let lower, let lowerInclusive, let upper, let upperInclusive):
            if value.isNull { return false }
            if let lower {
                guard let order = ValueOrder.order(value, lower, []) else { return false }
                if order == .orderedAscending || (order == .orderedSame && !lowerInclusive) { return false }
            }
            if let upper {
                guard let order = ValueOrder.order(value, upper, []) else { return false }
                if order == .orderedDescending || (order == .orderedSame && !upperInclusive) { return false }
            }
            return true
        }
    }

    /// Appends the matches of a run in index order (`count` entries, read by `value` and `match`)
    /// that meet `condition`, leaving out `skipping`. Binary search finds where the
    /// matches start and end. If the first and last entries in between match and their
    /// values have no unordered members (floating point and decimal have NaN), so does
    /// everything between, and only IDs are read (for a stored index: no record is read);
    /// otherwise each entry is tested.
    ///
    /// With `first` (for a run whose equal values lie in ID order, as a stored index's do),
    /// the matches of each wanted value of an `equal` condition stop after the first
    /// `first` not skipped, so long as their IDs are found to ascend; returns the highest ID
    /// through which the run's matches are all there if any stopped so (the lowest of the
    /// last IDs taken), else nil. (Internal, not private: tests give it runs no writer makes.)
    @discardableResult
    static func collect(_ condition: IndexCondition, count: Int, first: Int? = nil, prefixes: StringPrefixes? = nil,
                                skipping: (UInt64) -> Bool, into result: inout [IndexMatch],
                                value: (Int) throws -> Value, match: (Int) throws -> IndexMatch) throws -> UInt64? {
        // The first position whose value is not `before` (every value before it is).
        func partition(_ before: (Value) -> Bool, within bounds: Range<Int>? = nil) throws -> Int {
            try (bounds ?? 0..<count).partitionPoint { !before(try value($0)) }
        }
        // The same from `start`, where `before` is known not to hold from it on when it
        // does not hold at `start`: probes at start, start + 2, start + 5, … (gaps that
        // double), then a binary search of the last gap.
        func gallop(from start: Int, to limit: Int, _ before: (Value) -> Bool) throws -> Int {
            var low = start, probe = start, step = 1
            while probe < limit, before(try value(probe)) {
                low = probe + 1
                probe = low + step
                step *= 2
            }
            return try (low..<min(probe, limit)).partitionPoint { !before(try value($0)) }
        }
        func emit(_ range: Range<Int>) throws {
            guard !range.isEmpty else { return }
            let first = try value(range.lowerBound), last = try value(range.upperBound - 1)
            if matches(first, condition), matches(last, condition), isTotallyOrdered(first), isTotallyOrdered(last) {
                for index in range {
                    let found = try match(index)
                    if !skipping(found.id) { result.append(found) }
                }
            } else {
                for index in range {
                    let found = try match(index)
                    if !skipping(found.id), matches(try value(index), condition) { result.append(found) }
                }
            }
        }
        // The matches not skipped of the run of values equal to `target` from `start`, up to
        // the first `first` of them in ID order: `complete` if the run ended before (or
        // just as) they were found. A skipped entry's value is not read: an entry taken
        // after it is in the run, so it was too. Nil if the run's IDs are found not to
        // ascend (the caller then takes the whole run as it would without `first`).
        func firstOfRun(from start: Int, limit: Int, target: Value, first: Int) throws -> (taken: [IndexMatch], complete: Bool)? {
            var taken: [IndexMatch] = []
            var previous: UInt64?
            var index = start
            while index < limit, taken.count < first {
                let found = try match(index)
                let ascends = previous.map { found.id > $0 } ?? true
                previous = found.id
                index += 1
                if ascends && skipping(found.id) { continue }
                guard IndexOrder.compare(try value(index - 1), target) == .orderedSame else { return (taken, true) }  // the run ended
                guard ascends else { return nil }
                taken.append(found)
            }
            if index == limit { return (taken, true) }
            // (The next entry may still be in the run: the matches are complete through the last taken.)
            return (taken, false)
        }
        var completeThrough: UInt64?
        switch condition {
        case .equal(let wanted):
            for target in wanted {
                // In a run of strings, the wanted string's equals are among the strings
                // with its first eight bytes, found by comparing numbers, not strings.
                let bounds = prefixes.flatMap { prefixes in StringPrefixes.prefix(of: target).map { prefixes.range(of: $0) } }
                let start = try partition({ IndexOrder.compare($0, target) == .orderedAscending }, within: bounds)
                if let first, first > 0,
                   let (taken, complete) = try firstOfRun(from: start, limit: bounds?.upperBound ?? count, target: target, first: first) {
                    result += taken
                    if !complete, let last = taken.last { completeThrough = min(completeThrough ?? .max, last.id) }
                    continue
                }
                // The end searched for from the start, in steps that double: a unique
                // value's lookup takes three comparisons rather than a second search of the
                // whole run, and m equal values about 2 log m (a stored run reads a record
                // for each). (The order is total, NaN last: equal values lie together.)
                let end = try gallop(from: start, to: bounds?.upperBound ?? count) { IndexOrder.compare($0, target) != .orderedDescending }
                try emit(start..<max(start, end))
            }
        case .range(let lower, let lowerInclusive, let upper, let upperInclusive):
            // Numbers of other types sort by value, so one run covers the range; nil sorts first.
            let start = try partition { value in
                guard let lower else { return value.isNull }
                let order = IndexOrder.compare(value, lower)
                return order == .orderedAscending || (order == .orderedSame && !lowerInclusive)
            }
            let end = try upper.map { upper in
                try partition { value in
                    let order = IndexOrder.compare(value, upper)
                    return order == .orderedAscending || (order == .orderedSame && upperInclusive)
                }
            } ?? count
            try emit(start..<max(start, end))
        }
        return completeThrough
    }

    /// Whether values of this one's type are all ordered (no NaN), so that a run between
    /// two matching values holds only matches.
    private static func isTotallyOrdered(_ value: Value) -> Bool {
        switch value {
        case .float, .double, .decimal: return false
        default: return true
        }
    }
}

/// One record an index lookup found: its raw ID and, when the snapshot's stored index
/// found it, where its frame is in that snapshot (else nil), so the read that follows
/// need not search the snapshot's index for it again.
struct IndexMatch: Hashable, Sendable {
    let id: UInt64
    let snapshotPlace: SnapshotReader.Place?
}

/// The IDs of an index's delta whose values have one key: most often one (an attribute
/// whose values are unique), kept without a set of its own, so that a unique value costs
/// no set allocation.
enum KeyedIDs {
    case one(UInt64)
    case many(Set<UInt64>)

    func inserting(_ id: UInt64) -> KeyedIDs {
        switch self {
        case .one(let only): return only == id ? self : .many([only, id])
        case .many(var ids): ids.insert(id); return .many(ids)
        }
    }

    /// Nil when none is left.
    func removing(_ id: UInt64) -> KeyedIDs? {
        switch self {
        case .one(let only): return only == id ? nil : self
        case .many(var ids):
            ids.remove(id)
            if ids.count == 1, let only = ids.first { return .one(only) }
            return ids.isEmpty ? nil : .many(ids)
        }
    }

    func forEach(_ body: (UInt64) -> Void) {
        switch self {
        case .one(let only): body(only)
        case .many(let ids): for id in ids { body(id) }
        }
    }
}

struct IndexKey: Hashable, Sendable {
    let entity: UInt16
    let slot: Int
}

extension Store {
    /// The IDs of an entity's records whose attribute at `slot` meets `condition`, from
    /// a secondary index (the snapshot's stored one, or one built on first use).
    package func indexedIDs(entity: UInt16, slot: Int, matching condition: IndexCondition) throws -> [RecordID] {
        // (The lookup alone: a uniqueness check makes one for each new key, and the state
        // the records would be read in, which ``indexedRecords(entity:slot:matching:)``
        // keeps, would cost it an allocation.)
        let key = try indexKey(entity: entity, slot: slot)
        let matches = try state.withLock { state -> [IndexMatch] in
            guard let index = state.indexes[key] else { return [] }
            return try index.lookup(condition, changes: state.overlay(of: entity)).matches
        }
        return matches.map { RecordID(rawValue: $0.id) }
    }

    /// The index of `slot` of `entity`, built first if it is not yet (a scan).
    private func indexKey(entity: UInt16, slot: Int) throws -> IndexKey {
        guard let description = schema.entity(number: entity), slot >= 0, slot < description.attributes.count else {
            throw CairnError(.invalidArgument, "no attribute \(slot) in entity \(entity) to index")
        }
        let key = IndexKey(entity: entity, slot: slot)
        if state.withLock({ $0.indexes[key] }) == nil { try buildIndex(key) }
        return key
    }

    /// ``indexedIDs(entity:slot:matching:)`` with where the stored index found each
    /// record, in the state the lookup read: its snapshot, the entity's overlay and the
    /// log's record versions.
    private func indexedRecords(entity: UInt16, slot: Int, matching condition: IndexCondition, first: Int? = nil) throws
        -> (matches: [IndexMatch], completeThrough: UInt64?, snapshot: SnapshotReader, overlay: EntityOverlay, versions: VersionTable) {
        let key = try indexKey(entity: entity, slot: slot)
        return try state.withLock { state in
            let overlay = state.overlay(of: entity)
            let (matches, complete) = try state.indexes[key]?.lookup(condition, changes: overlay, first: first) ?? ([], nil)
            return (matches, complete, state.snapshot, overlay, state.versionTable)
        }
    }

    /// Calls `body` with each record of an entity whose attribute at `slot` meets
    /// `condition`, in ID order — its ID, version and encoded values — all read in the
    /// state the index lookup read. (Read record by record, each in the store's state of
    /// the moment, a record a commit changed after the lookup would have to be tested
    /// against the condition again, and each read would take the state's lock and search
    /// the overlay.)
    ///
    /// With `first`, the lookup may stop after the first `first` matches in ID order
    /// (see ``SecondaryIndex/lookup(_:changes:first:)``): only the matches up to where it
    /// stopped are read, and it returns true, so that a caller that wants more of them
    /// after all (the rest of its predicate turned some away) can ask again without.
    @discardableResult
    package func scanIndexed(entity: UInt16, slot: Int, matching condition: IndexCondition, first: Int? = nil,
                     _ read: (RecordID, UInt64, borrowing StoredRecord) throws -> Void) throws -> Bool {
        var (matches, completeThrough, snapshot, overlay, versions) = try indexedRecords(entity: entity, slot: slot,
                                                                                         matching: condition, first: first)
        RadixSort.sort(&matches) { $0.id }
        if let completeThrough { matches = Array(matches.prefix { $0.id <= completeThrough }) }
        func body(_ id: RecordID, _ version: UInt64, _ bytes: UnsafeRawBufferPointer) throws {
            try reading(id, bytes) { try read(id, version, StoredRecord($0)) }
        }
        try withExtendedLifetime((snapshot, versions, overlay)) {
            for match in matches {
                let id = RecordID(rawValue: match.id)
                let version = versions.version(of: id)
                // (A match the snapshot's stored index found is not in the overlay: the
                // lookup passes over those. One an index built here found may be in either.)
                if let place = match.snapshotPlace {
                    try body(id, version, try snapshot.body(at: place, id: id))
                    continue
                }
                switch overlay[match.id] {
                case let entry? where entry.isLive: try body(id, version, overlay.bodies.body(entry))
                case .some: continue
                case nil:
                    if let place = snapshot.place(of: id) { try body(id, version, try snapshot.body(at: place, id: id)) }
                }
            }
        }
        return completeThrough != nil
    }

    /// Whether an index over this attribute exists already, in memory or stored in the
    /// snapshot (for `explain`).
    package func hasIndex(entity: UInt16, slot: Int) -> Bool {
        let key = IndexKey(entity: entity, slot: slot)
        return state.withLock { $0.indexes[key] != nil || $0.storedBlock(key) != nil }
    }

    func buildIndex(_ key: IndexKey) throws {
        // Build under the log lock so no commit lands between the scan and the publish.
        try log.withLock { _ in try buildIndexHoldingLog(key) }
    }

    /// ``buildIndex(_:)`` for a caller that holds the log lock (a commit), unless built.
    func buildIndexHoldingLog(_ key: IndexKey) throws {
        guard state.withLock({ $0.indexes[key] }) == nil else { return }
        // A stored index is read in place; only the log's changes to its entity are sorted
        // into a run, outside the state's lock (readers go on; the log lock keeps commits out).
        if let (snapshot, block, overlay) = state.withLock({ state in
            state.storedBlock(key).map { (state.snapshot, $0, state.overlay(of: key.entity)) }
        }) {
            let index = try SecondaryIndex(snapshot: snapshot, block: block, changes: overlay)
            state.withLock { $0.indexes[key] = index }
            return
        }
        var entries: [(Value, UInt64)] = []
        try scan(entity: key.entity) { id, record in
            if let value = try record.value(at: key.slot) { entries.append((value, id.rawValue)) }
        }
        let index = SecondaryIndex(slot: key.slot, entries: entries)
        state.withLock { $0.indexes[key] = index }
    }

    /// ``indexedIDs(entity:slot:matching:)`` for a caller that holds the log lock (a
    /// commit deciding uniqueness), which the first lookup's build would take again.
    package func indexedIDsHoldingLog(entity: UInt16, slot: Int, matching condition: IndexCondition) throws -> [RecordID] {
        let key = IndexKey(entity: entity, slot: slot)
        try buildIndexHoldingLog(key)
        let matches = try state.withLock { state -> [IndexMatch] in
            try state.indexes[key]?.lookup(condition, changes: state.overlay(of: entity)).matches ?? []
        }
        return matches.map { RecordID(rawValue: $0.id) }
    }
}
