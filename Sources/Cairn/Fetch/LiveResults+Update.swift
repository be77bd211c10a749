import CairnCollections
import CairnStorage
import Foundation

/// Live results brought up to date by placing again only the records a change touched,
/// so that a save of one object does not cost a fetch of all of them (a scan and a sort),
/// tables of every result's values and positions, and a diff of them.
extension LiveResults {
    /// `sections` (and `untyped`, their objects as ``ManagedObject``s, and `placed`, the IDs
    /// they were placed under) with each record of `touched` taken out and, if it is a
    /// result now, put back where a fetch would put it; the changes to `snapshot` (the
    /// values shown); and the change (see ``ResultsUpdate``). Nil: fetch again.
    static func updated(_ sections: [Section], untyped: [[ManagedObject]], placed: [[RecordID]], snapshot: IDMap<RecordID, [Value]>,
                        touched: IDMap<RecordID, Bool>, request: FetchQuery<T>, sectionKeyPath: String?,
                        window: (limit: Int, end: ResultsUpdate.WindowEnd)?, context: Context) throws -> Updated? {
        guard let outcome = try ResultsUpdate(names: sections.map(\.name), objects: untyped, ids: placed, snapshot: snapshot,
                                              touched: touched,
                                              entityName: request.entityName, predicate: request.storedPredicate,
                                              sortDescriptors: request.sortKeys, sectionKeyPath: sectionKeyPath,
                                              window: window, context: context, isResult: { $0 is T }) else { return nil }
        // Runs of results copied from the old sections in bulk.
        var result: [Section] = [], resultUntyped: [[ManagedObject]] = [], resultPlaced: [[RecordID]] = []
        result.reserveCapacity(outcome.names.count)
        resultUntyped.reserveCapacity(outcome.names.count)
        resultPlaced.reserveCapacity(outcome.names.count)
        for (index, pieces) in outcome.pieces.enumerated() {
            // A section kept whole, under its name, is the old one (its arrays shared, not
            // copied, so a change to one section of many copies no other section).
            if pieces.count == 1, case .kept(let section, let range) = pieces[0], range == untyped[section].indices,
               outcome.names[index] == sections[section].name {
                result.append(sections[section])
                resultUntyped.append(untyped[section])
                resultPlaced.append(placed[section])
                continue
            }
            var untypedObjects: [ManagedObject] = [], ids: [RecordID] = []
            for piece in pieces {
                switch piece {
                case .kept(let section, let range):
                    untypedObjects.append(contentsOf: untyped[section][range])
                    ids.append(contentsOf: placed[section][range])
                case .added(let added):
                    let object = outcome.added[added]
                    untypedObjects.append(object)
                    ids.append(object.recordID)
                }
            }
            // The same array as `[T]`, sharing its storage: every element is a `T` (the kept
            // ones were, the added ones passed `isResult`), and an array of class references
            // is laid out alike whatever the class. (Appending the `T`s to a `[T]` here, in
            // generic code, would copy each through the runtime's value witnesses.)
            // (The standard library's own `as! [T]` reinterprets the buffer the same way, on
            // platforms where it does not copy.)
            assert(untypedObjects.allSatisfy { $0 is T })
            let objects = unsafeBitCast(untypedObjects, to: [T].self)
            result.append(Section(name: outcome.names[index], objects: objects))
            resultUntyped.append(untypedObjects)
            resultPlaced.append(ids)
        }
        return Updated(sections: result, untyped: resultUntyped, placed: resultPlaced, snapshotChanges: outcome.snapshotChanges,
                       change: outcome.change, windowEnd: outcome.windowEnd)
    }

    /// Results brought up to date, and the change from the results before.
    struct Updated {
        var sections: [Section]
        var untyped: [[ManagedObject]]
        var placed: [[RecordID]]
        /// The results' values to forget (nil) or set, in order.
        var snapshotChanges: [(RecordID, [Value]?)]
        var change: ResultsChange
        var windowEnd: ResultsUpdate.WindowEnd?
    }
}

/// Live results of one entity brought up to date after a change that touched a few of
/// its records: each touched record is taken out and, if it is a result now, put back
/// where a fetch would put it (tested and compared on the values a fetch reads,
/// ``Context/fetchedValues(_:)``). The other results stay as they are, in order: their
/// records are unchanged. So the change names touched records only, found without the
/// tables of every result's position ``LiveResults/diff(old:new:changed:objectID:)``
/// builds. Not generic: unspecialized where live results are used, a generic walk over
/// the results would pay metadata lookups for each one.
struct ResultsUpdate {
    /// A run of new results: untouched ones of an old section, or one added result.
    enum Piece {
        case kept(section: Int, range: Range<Int>)
        case added(Int)
    }

    /// What results with a fetch limit know of the matches past their last row: none
    /// (the results hold every match), or that none comes before a key (the last row's,
    /// when last brought up to date: a record past it that no change touched is still past
    /// it).
    enum WindowEnd {
        case complete
        case after(key: [Value], id: RecordID)
    }

    /// The new sections' names and contents.
    private(set) var names: [String] = []
    private(set) var pieces: [[Piece]] = []
    /// The touched records that are results now, in order.
    private(set) var added: [ManagedObject] = []
    private(set) var change = ResultsChange()
    /// The values shown to forget (nil) or set, in order: applied by the caller once the
    /// update stands (it may yet fall back to a fetch).
    private(set) var snapshotChanges: [(RecordID, [Value]?)] = []
    /// With a limit: what the new results know of the matches past them.
    private(set) var windowEnd: WindowEnd?

    /// The name of the section of a result whose section key path reaches `value`. Values
    /// that sort alike are named alike: -0.0 is 0.0 (named apart, they made sections of
    /// one name on either side of another).
    static func sectionName(_ value: Value) -> String {
        switch value {
        case .null: return ""
        case .string(let text): return text
        case .double(let number) where number == 0: return Value.double(0).description
        case .float(let number) where number == 0: return Value.float(0).description
        default: return value.description
        }
    }

    static func sameValues(_ a: [Value]?, _ b: [Value]?) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        return Value.sameValues(a, b)
    }

    /// Where a touched result was: its position, and its gap (how many untouched results
    /// came before it).
    private struct Place {
        let at: ResultIndex
        let gap: Int
    }

    /// The order of results sorted by `sortDescriptors` in sections of `sectionKeyPath`.
    static func order(_ sortDescriptors: [SortKey], sectionKeyPath: String?, entity: EntityDescription,
                      schema: Schema) throws -> RowOrder {
        var descriptors = sortDescriptors
        if let sectionKeyPath { descriptors.insert(SortKey(sectionKeyPath), at: 0) }
        return try RowOrder(descriptors, entity: entity, schema: schema)
    }

    /// What results of at most `limit` rows, the last one `last` (if any), know of the
    /// matches past them, in `order`.
    static func windowEnd(limit: Int, count: Int, last: RecordID?, order: RowOrder, context: Context) throws -> WindowEnd {
        guard count >= limit, let last else { return .complete }
        return .after(key: order.key(try context.fetchedValues(last) ?? [], context.memoizedViewValues()), id: last)
    }

    /// `objects` are the results' objects, `ids` the record IDs they were placed under
    /// (an upsert may have renamed an object since), `snapshot` the values each result
    /// showed (to tell updates; see ``snapshotChanges``). With a fetch limit, `window`
    /// gives it and what the results knew of the matches past them; nil (the results
    /// must be fetched again) when rows from past them would come in.
    init?(names oldNames: [String], objects: [[ManagedObject]], ids: [[RecordID]], snapshot: IDMap<RecordID, [Value]>,
          touched: IDMap<RecordID, Bool>, entityName: String, predicate: FetchPredicate?, sortDescriptors: [SortKey],
          sectionKeyPath: String?, window: (limit: Int, end: WindowEnd)?, context: Context,
          isResult: (ManagedObject) -> Bool) throws {
        let entity = try context.entityDescription(entityName)
        let schema = context.coordinator.schema
        let order = try Self.order(sortDescriptors, sectionKeyPath: sectionKeyPath, entity: entity, schema: schema)
        let compiled = try predicate.map { try CompiledPredicate($0, entity: entity, schema: schema) }
        let sectionPath = try sectionKeyPath.map {
            try CompiledPredicate.resolve($0.split(separator: ".").map(String.init), entity: entity, schema: schema)
        }
        let resolver = context.memoizedViewValues()
        let type = context.model.objectClass(for: entity.name)

        // Where each touched result was; the untouched ones as runs of their sections, each
        // with the number of untouched results before it.
        var before = IDMap<RecordID, Place>()
        var runs: [(section: Int, range: Range<Int>, start: Int)] = []
        var keptCount = 0
        for (s, section) in ids.enumerated() {
            var runStart = 0
            for item in section.indices where touched.contains(section[item]) {
                if runStart < item { runs.append((s, runStart..<item, keptCount)); keptCount += item - runStart }
                before[section[item]] = Place(at: ResultIndex(section: s, item: item), gap: keptCount)
                runStart = item + 1
            }
            if runStart < section.count { runs.append((s, runStart..<section.count, keptCount)); keptCount += section.count - runStart }
        }
        /// The old position of untouched result `index` (counting untouched ones only).
        func keptPlace(_ index: Int) -> ResultIndex {
            let run = runs[runs.partitionPoint { $0.start > index } - 1]
            return ResultIndex(section: run.section, item: run.range.lowerBound + index - run.start)
        }
        func keptID(_ index: Int) -> RecordID {
            let place = keptPlace(index)
            return ids[place.section][place.item]
        }

        // The touched records that are results now, in order; with the values they showed.
        var shown = IDMap<RecordID, [Value]>()
        var additions: [(object: ManagedObject, name: String, key: [Value])] = []
        for (id, _) in touched {
            if let values = snapshot[id] { shown[id] = values }
            snapshotChanges.append((id, nil))
            guard let (values, version) = try context.fetchedRecord(id), compiled?.evaluate(values, resolve: resolver) ?? true else { continue }
            let object = context.object(for: id, entity: entity, type: type)
            guard isResult(object) else { continue }
            // (It shows the values it is placed by: see ``Context/followsFetches``.)
            if let version { context.showFetched(object, values, version: version) }
            let name = sectionPath.map { Self.sectionName(CompiledPredicate.follow($0, values, resolver).first ?? .null) } ?? ""
            additions.append((object, name, order.key(values, resolver)))
        }
        // Sorted as positions, not as the entries themselves (each move of one would retain
        // and release its object, name and key).
        let keys = additions.map(\.key), recordIDs = additions.map(\.object.recordID)
        let sortedOrder = keys.withUnsafeBufferPointer { key in
            recordIDs.withUnsafeBufferPointer { id in additions.indices.sorted { order.precedes(key[$0], id[$0], key[$1], id[$1]) } }
        }
        additions = sortedOrder.map { additions[$0] }

        // Each addition goes before the first untouched result it precedes (read as a
        // fetch reads it: a few records for each addition, each read once).
        var keptKeys = IDMap<RecordID, [Value]>()
        func keptKey(_ rowID: RecordID) throws -> [Value] {
            if let known = keptKeys[rowID] { return known }
            let key = order.key(try context.fetchedValues(rowID) ?? [], resolver)
            keptKeys[rowID] = key
            return key
        }
        var gaps: [Int] = []
        gaps.reserveCapacity(additions.count)
        var next = 0
        for addition in additions {
            let id = addition.object.recordID
            next = try (next..<keptCount).partitionPoint { index in
                let rowID = keptID(index)
                return order.precedes(addition.key, id, try keptKey(rowID), rowID)
            }
            gaps.append(next)
        }

        // With a limit: the first `limit` rows of the untouched results and the additions
        // that come before any match past the window. (Fewer than `limit` of those, when
        // there are matches past the window: a fetch finds which come in.)
        var keptEnd = keptCount, addedEnd = additions.count
        if let window {
            if case .after(let key, let id) = window.end {
                // (Up to the end itself: the last row touched but not moved stays in.)
                addedEnd = additions.partitionPoint { order.precedes(key, id, $0.key, $0.object.recordID) }
                if keptCount + addedEnd < window.limit { return nil }
            }
            if keptCount + addedEnd > window.limit {
                // Addition k is row gaps[k] + k of the untouched rows and additions merged.
                var retained = 0
                while retained < addedEnd, gaps[retained] + retained < window.limit { retained += 1 }
                addedEnd = retained
                keptEnd = window.limit - retained
            }
        }
        additions.removeSubrange(addedEnd...)
        added = additions.map(\.object)
        var fresh = IDMap<RecordID, [Value]>()
        for object in added {
            let values = context.viewValues(object.recordID)
            fresh[object.recordID] = values
            snapshotChanges.append((object.recordID, values))
        }
        for index in keptEnd..<keptCount {
            let place = keptPlace(index)
            change.deleted.append(place)
            snapshotChanges.append((ids[place.section][place.item], nil))
        }
        if let window {
            let lastAdded = additions.last.flatMap { gaps[additions.count - 1] == keptEnd ? $0.object.recordID : nil }
            let last = lastAdded ?? (keptEnd > 0 ? keptID(keptEnd - 1) : nil)
            windowEnd = try Self.windowEnd(limit: window.limit, count: keptEnd + additions.count, last: last, order: order, context: context)
        }

        // The new sections: the untouched runs, cut where additions go in; a section for
        // each name in turn. And where each addition is now.
        var after: [ResultIndex] = []
        after.reserveCapacity(additions.count)
        var counts: [Int] = []
        func emit(_ piece: Piece, name: String, count: Int) {
            if names.last != name {
                names.append(name)
                pieces.append([])
                counts.append(0)
            }
            pieces[pieces.count - 1].append(piece)
            counts[counts.count - 1] += count
        }
        var run = 0, offset = 0
        func emitKept(upTo end: Int) {
            while run < runs.count {
                let current = runs[run]
                let from = current.start + offset
                guard from < end else { return }
                let to = min(current.start + current.range.count, end)
                let lower = current.range.lowerBound + offset
                emit(.kept(section: current.section, range: lower..<(lower + to - from)), name: oldNames[current.section], count: to - from)
                if to == current.start + current.range.count { run += 1; offset = 0 } else { offset = to - current.start }
            }
        }
        for (index, addition) in additions.enumerated() {
            emitKept(upTo: gaps[index])
            emit(.added(index), name: addition.name, count: 1)
            after.append(ResultIndex(section: names.count - 1, item: counts[counts.count - 1] - 1))
        }
        emitKept(upTo: keptEnd)

        // The change. A result before and after stays where it is (not a move) if it is
        // alone in the same gap, among such results, both times, in a section of the same
        // name: the untouched results and those keep their order.
        let oldNameSet = Set(oldNames), newNameSet = Set(names)
        change.deletedSections = oldNames.indices.filter { !newNameSet.contains(oldNames[$0]) }
        change.insertedSections = names.indices.filter { !oldNameSet.contains(names[$0]) }
        var inGap: [Int: Int] = [:]
        for (index, addition) in additions.enumerated() {
            guard let place = before[addition.object.recordID] else { continue }
            inGap[place.gap, default: 0] += 1
            if gaps[index] != place.gap { inGap[gaps[index], default: 0] += 1 }
        }
        var stillThere = IDMap<RecordID, Bool>()
        for (index, addition) in additions.enumerated() {
            let id = addition.object.recordID, to = after[index]
            stillThere[id] = true
            guard let place = before[id] else {
                change.inserted.append(to)
                continue
            }
            let from = place.at
            if place.gap != gaps[index] || inGap[place.gap] != 1 || oldNames[from.section] != names[to.section] {
                change.moved.append(.init(from: from, to: to, objectID: addition.object.objectID))
            }
            // Updated: its values changed, or another instance holds the record now.
            if objects[from.section][from.item] !== addition.object
                || !Self.sameValues(shown[id], fresh[id]) {
                change.updated.append(to)
            }
        }
        for (id, place) in before where !stillThere.contains(id) { change.deleted.append(place.at) }
        change.deleted.sort()
        change.inserted.sort()
        change.moved.sort { $0.to < $1.to }
        change.updated.sort()
    }
}

extension ResultsInputs {
    /// The records whose state may differ between these inputs (the earlier) and `now`,
    /// both of `entities`' records: those the store changed since, and those whose
    /// unsaved state differs in any context of the chain. Nil when that is not known:
    /// another chain of contexts, a reset, or store changes no longer all remembered.
    func touched(until now: ResultsInputs, entities: [UInt16], store: Coordinator) -> IDMap<RecordID, Bool>? {
        guard resets == now.resets, counts.count == now.counts.count else { return nil }
        var touched = IDMap<RecordID, Bool>()
        if storeChange != now.storeChange {
            for entity in entities {
                // (`storeChange` is the last change of any of them: those of each after it are new.)
                guard let raws = store.changedRecords(entity: entity, after: storeChange) else { return nil }
                for raw in raws { touched[RecordID(rawValue: raw)] = true }
            }
        }
        // Each context's entries, both in ID order: a record is touched unless it has the
        // same entry in both, or none in either.
        var a = 0, b = 0
        for level in counts.indices {
            let endA = a + counts[level], endB = b + now.counts[level]
            while a < endA || b < endB {
                if a < endA, b < endB, pending[a].id == now.pending[b].id {
                    if pending[a] != now.pending[b] { touched[pending[a].id] = true }
                    a += 1
                    b += 1
                } else if b == endB || (a < endA && pending[a].id < now.pending[b].id) {
                    touched[pending[a].id] = true
                    a += 1
                } else {
                    touched[now.pending[b].id] = true
                    b += 1
                }
            }
        }
        return touched
    }
}
