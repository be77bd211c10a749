import CairnStorage
import Foundation
import Synchronization

/// A context's undo and redo stacks.
///
/// Every change — attribute, relationship (with its inverses), insert, delete (with its
/// cascades) — is undoable. Changes made outside an explicit group gather into one group
/// per event (``groupsByEvent``, as `NSUndoManager` does): what the app did in one turn
/// of the main thread, one `BackgroundContext.perform`, or one `DataService` write, up to
/// a save. ``beginGrouping(named:)`` / ``endGrouping()`` or ``group(named:_:)`` make
/// explicit groups, each its own undo step. A new change clears the redo stack. Undo
/// after a save works: the undone change becomes an unsaved change, as in Core Data.
///
/// An event ends when the main actor's current job ends, for a main-actor context
/// (`Container.mainContext`, or one whose undo manager was told
/// ``endEventsEachMainActorTurn()``): in an app, at the next run-loop turn; in an async
/// `main` or a server on Linux, once the job awaits. It also ends at the end of a
/// `BackgroundContext.perform`, at a save, at ``Context/undo()`` and ``Context/redo()``
/// (which close it first, then undo it whole), at an explicit group, and at
/// ``endEvent()``. Elsewhere (a context on a thread of its own, a synchronous
/// command-line tool), an event runs from one of those to the next.
///
/// Each change records what it is about to replace: a property set, the value it
/// overwrites; any other change (insert, delete, relationship), the object's whole state
/// (values and whether it existed). Undo puts a group's records back in reverse order,
/// which leaves every object as it was before the group; redo puts back what undo
/// replaced. Once an object's whole state is recorded in a group, later changes to it
/// there record nothing (putting that state back covers them). The records of all groups
/// lie in one array, each group a run of it: a property set outside a group costs one
/// record, not a group of its own with a copy of every value of the object.
public final class UndoStack {
    /// What one record puts back.
    enum Recorded {
        /// One value, of slot `slot`.
        case value(slot: Int, Value)
        /// The whole object: its values, whether it existed, whether it was registered.
        case whole(values: [Value], exists: Bool, isRegistered: Bool)
        /// The reference `raw` inserted at `index` of the list in `slot` (undo removes it).
        case inserted(slot: Int, raw: UInt64, index: Int)
        /// The reference `raw` removed from `index` of the list in `slot` (undo puts it back).
        case removed(slot: Int, raw: UInt64, index: Int)
        /// The value a ``Transient`` property held (boxed: the record stays 40 bytes).
        case transient(TransientChange)
    }

    struct Record {
        let object: ManagedObject
        let recorded: Recorded
        /// Whether this record is its group's first (where the group starts).
        var opensGroup = false
    }

    /// Groups of records, oldest first: the records in one array, each group the run from
    /// a record that opens a group to the next such record. A group's start is a flag in
    /// its first record (in the padding of the record's 40 bytes), not an entry of its own:
    /// a property set outside a group is a group of one record, and an entry for each would
    /// add a start and a name to every such set. Names, which few groups have,
    /// are kept apart by start. Dropping the oldest groups (``levelsLimit``) moves a start
    /// offset and compacts now and then, so that it costs no copy each time.
    struct GroupLog {
        private var records = RecordChunks()
        /// The names of the groups that have one, by the index of their first record.
        private var names: [Int: String] = [:]
        /// The first live record; those before it are dropped.
        private var firstRecord = 0
        /// How many live groups have records.
        private var recordedGroups = 0
        /// The first records of the last two of those (while there are that many).
        private var lastStart = 0
        private var previousStart = 0
        /// A group opened with no record yet (the last group), and its name: its first
        /// record, once appended, opens it.
        private var emptyOpen = false
        private var emptyName: String?

        var count: Int { recordedGroups + (emptyOpen ? 1 : 0) }
        var isEmpty: Bool { count == 0 }
        var lastName: String? {
            get { name(fromEnd: 0) }
            set {
                if emptyOpen {
                    emptyName = newValue
                } else if recordedGroups > 0 {
                    names[lastStart] = newValue
                }
            }
        }

        /// The name of the group `back` places before the last (nil past the first); only
        /// the last two are asked for.
        func name(fromEnd back: Int) -> String? {
            let recordedBack = emptyOpen ? back - 1 : back
            switch recordedBack {
            case -1: return emptyName
            case 0: return recordedGroups > 0 ? names[lastStart] : nil
            case 1: return recordedGroups > 1 ? names[previousStart] : nil
            default: return nil
            }
        }

        /// Opens a group at the end; records appended from now on belong to it. (An empty
        /// group is never left behind one: the stack drops it when it is closed.)
        mutating func open(named name: String?) {
            emptyOpen = true
            emptyName = name
        }

        /// (The record is consumed: moved into the log, not copied through the runtime's
        /// value witnesses at each step to the chunk's storage.)
        mutating func append(_ record: consuming Record) {
            guard emptyOpen else {
                records.append(record)
                return
            }
            record.opensGroup = true
            emptyOpen = false
            if let name = emptyName {
                names[records.count] = name
                emptyName = nil
            }
            previousStart = lastStart
            lastStart = records.count
            recordedGroups += 1
            records.append(record)
        }

        /// How many records are live (for tests).
        var recordCount: Int { records.count - firstRecord }

        /// How many references the live records keep in lists (what undo costs in memory
        /// for relationships; for tests).
        var heldReferences: Int {
            (firstRecord..<records.count).reduce(0) { sum, index in
                switch records[index].recorded {
                case .value(_, let value): return sum + value.referencedIDs.count
                case .whole(let values, _, _): return sum + values.reduce(0) { $0 + $1.referencedIDs.count }
                case .transient: return sum
                default: return sum + 1
                }
            }
        }

        /// The groups with records, oldest first, and their names (for keeping them in the
        /// store, ``Context/keepUndo(named:)``).
        var groups: [(name: String?, records: [Record])] {
            var result: [(name: String?, records: [Record])] = []
            for index in firstRecord..<records.count {
                let record = records[index]
                if record.opensGroup || result.isEmpty { result.append((names[index], [])) }
                result[result.count - 1].records.append(record)
            }
            return result
        }

        /// Appends a closed group of `records` named `name` (none if `records` is empty).
        mutating func appendGroup(named name: String?, _ records: [Record]) {
            guard !records.isEmpty else { return }
            open(named: name)
            for record in records { append(record) }
        }

        /// Whether the last group holds no record (asked at the end of every change outside
        /// a group).
        var lastIsEmpty: Bool { emptyOpen || recordedGroups == 0 }

        /// Removes the last group, handing back its name and records.
        mutating func popLast() -> (name: String?, records: [Record])? {
            if emptyOpen {
                emptyOpen = false
                defer { emptyName = nil }
                return (emptyName, [])
            }
            guard recordedGroups > 0 else { return nil }
            let start = lastStart
            let taken = records.removeSuffix(from: start)
            let name = names.removeValue(forKey: start)
            recordedGroups -= 1
            lastStart = previousStart
            if recordedGroups > 1 {
                // The group before the new last one starts at the nearest opening record
                // before it (each pop walks one group: in all, each record once).
                var index = lastStart - 1
                while index > firstRecord, !records[index].opensGroup { index -= 1 }
                previousStart = index
            }
            return (name, taken)
        }

        /// Drops the oldest groups until at most `limit` remain.
        mutating func keep(atMost limit: Int) {
            guard count > limit else { return }
            let drop = min(count - limit, recordedGroups)
            var index = firstRecord
            for _ in 0..<drop {
                index += 1
                while index < records.count, !records[index].opensGroup { index += 1 }
            }
            if !names.isEmpty { names = names.filter { $0.key >= index } }
            firstRecord = index
            recordedGroups -= drop
            // Let the chunks wholly dropped go once they are the larger part: amortized, each
            // chunk header moves once.
            guard firstRecord > records.count / 2 else { return }
            let shift = records.removeChunks(before: firstRecord)
            guard shift > 0 else { return }
            if !names.isEmpty { names = Dictionary(uniqueKeysWithValues: names.map { ($0.key - shift, $0.value) }) }
            lastStart = max(lastStart - shift, 0)
            previousStart = max(previousStart - shift, 0)
            firstRecord -= shift
        }

        mutating func removeAll() {
            records.removeAll()
            names.removeAll()
            firstRecord = 0
            recordedGroups = 0
            lastStart = 0
            previousStart = 0
            emptyOpen = false
            emptyName = nil
        }
    }

    /// Undo's records in chunks of 4,096. Appending never moves the records before: an
    /// array grown by doubling would copy them all at each growth, and hold both copies at
    /// once.
    struct RecordChunks {
        private static let shift = 12
        private static let size = 1 << shift
        private var chunks: [[Record]] = []
        private(set) var count = 0

        subscript(index: Int) -> Record {
            chunks[index >> Self.shift][index & (Self.size - 1)]
        }

        mutating func append(_ record: consuming Record) {
            if count & (Self.size - 1) == 0 {
                var chunk: [Record] = []
                chunk.reserveCapacity(Self.size)
                chunks.append(chunk)
            }
            chunks[chunks.count - 1].append(record)
            count += 1
        }

        /// Removes the records from `start` on, handing them back in order.
        mutating func removeSuffix(from start: Int) -> [Record] {
            guard start < count else { return [] }
            var taken: [Record] = []
            taken.reserveCapacity(count - start)
            let first = start >> Self.shift
            for chunk in first..<chunks.count {
                let from = chunk == first ? start & (Self.size - 1) : 0
                taken.append(contentsOf: chunks[chunk][from...])
            }
            chunks.removeSubrange((first + 1)...)
            chunks[first].removeSubrange((start & (Self.size - 1))...)
            if chunks[first].isEmpty { chunks.removeLast() }
            count = start
            return taken
        }

        /// Removes the whole chunks before `index`, returning how many records went (the
        /// indices of the rest are that much lower).
        mutating func removeChunks(before index: Int) -> Int {
            let whole = min(index >> Self.shift, chunks.count)
            guard whole > 0 else { return 0 }
            chunks.removeSubrange(..<whole)
            count -= whole << Self.shift
            return whole << Self.shift
        }

        mutating func removeAll() {
            chunks.removeAll()
            count = 0
        }
    }

    /// Most groups kept, the oldest dropped first: ``defaultLevelsLimit`` (100) unless set;
    /// 0 keeps every group. A limit keeps a long-running program's undo history bounded.
    @exclusivity(unchecked) public var levelsLimit = UndoStack.defaultLevelsLimit { didSet { trim() } }
    /// The levels an undo manager keeps unless told otherwise.
    public static let defaultLevelsLimit = 100
    /// When false, changes are not recorded.
    @exclusivity(unchecked) public var isEnabled = true
    /// Whether changes outside an explicit group gather into one group per event (true, as
    /// `NSUndoManager`'s default); false makes each change its own group.
    @exclusivity(unchecked) public var groupsByEvent = true {
        didSet { if !groupsByEvent { endEvent() } }
    }
    /// Whether events end with the main actor's turn (``endEventsEachMainActorTurn()``).
    @exclusivity(unchecked) private var endsEventsWithMainActorTurns = false
    /// Whether the open group (depth 1) is the current event's.
    @exclusivity(unchecked) private var eventOpen = false
    /// Counts events, so that a scheduled end closes only the event it was scheduled for.
    @exclusivity(unchecked) private var eventSerial: UInt64 = 0

    // Used only on the owning context's isolation: no dynamic exclusivity checks.
    @exclusivity(unchecked) private var undoStack = GroupLog()
    @exclusivity(unchecked) private var redoStack = GroupLog()
    @exclusivity(unchecked) private var depth = 0
    @exclusivity(unchecked) private var isReplaying = false
    /// The serial of the open group: an object whose whole state it has recorded is marked
    /// with it (``ManagedObject/undoWholeGroup``), and its later changes in the group
    /// record nothing. A new serial when the group closes leaves every mark behind.
    @exclusivity(unchecked) private var wholeSerial = UndoStack.nextSerial()
    /// Group serials, unique among every stack of the process: an object marked by one
    /// stack's group is never taken for marked by another's (a context given a new stack).
    private static let groupSerials = Atomic<UInt64>(0)
    private static func nextSerial() -> UInt64 { groupSerials.add(1, ordering: .relaxed).newValue }
    /// How many of the oldest undo groups, and of the oldest redo groups, an earlier launch
    /// kept in the store (``Context/keepUndo(named:)``): undoing or redoing one checks
    /// first that no other writer changed its objects since.
    @exclusivity(unchecked) var keptUndoGroups = 0
    @exclusivity(unchecked) var keptRedoGroups = 0
    /// Why the last ``Context/undo()`` or ``Context/redo()`` did nothing: a group an
    /// earlier launch kept whose objects another writer changed since (a `.conflict`
    /// error naming them); nil after one that ran.
    @exclusivity(unchecked) public private(set) var refusal: CairnError?

    /// An empty undo manager, enabled, that keeps ``defaultLevelsLimit`` groups. Each context
    /// has its own (``Context/undoManager``).
    public init() {}

    // (While a group is open, it is the undo stack's last; these answer for the closed ones,
    // and for an open event's, which undo closes first.)
    /// Whether ``Context/undo()`` has a group to undo: a closed one, or the current event's
    /// if it holds changes.
    public var canUndo: Bool { undoStack.count > hiddenGroups }
    /// Whether ``Context/redo()`` has an undone group to redo (none once a change follows the
    /// undo).
    public var canRedo: Bool { !redoStack.isEmpty && !eventHasRecords }
    /// The name of the group ``Context/undo()`` would undo, if it has one.
    public var undoActionName: String? { undoStack.name(fromEnd: hiddenGroups) }
    /// The name of the group ``Context/redo()`` would redo, if it has one.
    public var redoActionName: String? { eventHasRecords ? nil : redoStack.lastName }
    /// How many groups are open, one inside the other: 0 outside any (an event's group counts
    /// as one).
    public var groupingLevel: Int { depth }
    /// The number of groups undo can undo (tests compare it around a change).
    var undoCount: Int { undoStack.count - hiddenGroups }
    /// Whether an event's group is open and holds changes (undo closes and undoes it).
    private var eventHasRecords: Bool { eventOpen && !undoStack.lastIsEmpty }
    /// The open group, unless it is an event's with changes: not undoable as it stands.
    private var hiddenGroups: Int { depth > 0 && !eventHasRecords ? 1 : 0 }
    /// References kept by undo's records (see ``GroupLog/heldReferences``).
    var heldReferences: Int { undoStack.heldReferences }
    /// Records undo keeps (see ``GroupLog/recordCount``).
    var recordCount: Int { undoStack.recordCount }

    /// Opens a group; changes until the matching ``endGrouping()`` undo together. It
    /// ends the current event first: an explicit group is an undo step of its own.
    public func beginGrouping(named name: String? = nil) {
        endEvent()
        if depth == 0 {
            undoStack.open(named: name)
        } else if let name, undoStack.lastName == nil {
            undoStack.lastName = name
        }
        depth += 1
    }

    /// Closes the innermost group; closing the outermost keeps it on the undo stack if it
    /// recorded anything.
    public func endGrouping() {
        guard depth > 0 else { return }
        depth -= 1
        guard depth == 0 else { return }
        wholeSerial = Self.nextSerial()
        if undoStack.lastIsEmpty {
            _ = undoStack.popLast()
        } else {
            if !redoStack.isEmpty { removeRedoActions() }
            trim()
        }
    }

    /// Makes events end when the main actor's current job ends (see ``groupsByEvent``): for
    /// the undo manager of a context used on the main actor only.
    @MainActor public func endEventsEachMainActorTurn() {
        endsEventsWithMainActorTurns = true
    }

    /// Ends the current event's group (see ``groupsByEvent``), if one is open: the next
    /// change starts another undo step.
    public func endEvent() {
        guard eventOpen else { return }
        eventOpen = false
        endGrouping()
    }

    /// Runs `body` as one undo group named `name`.
    public func group<T>(named name: String? = nil, _ body: () throws -> T) rethrows -> T {
        beginGrouping(named: name)
        defer { endGrouping() }
        return try body()
    }

    /// Names the group being recorded (or the last one, if none is open).
    public func setActionName(_ name: String) { undoStack.lastName = name }

    /// Forgets what could be redone (a change undone because it failed to save).
    func removeRedoActions() {
        redoStack.removeAll()
        keptRedoGroups = 0
    }

    /// Forgets every undo and redo group, and closes any open group.
    public func removeAllActions() {
        undoStack.removeAll()
        redoStack.removeAll()
        wholeSerial = Self.nextSerial()
        depth = 0
        eventOpen = false
        keptUndoGroups = 0
        keptRedoGroups = 0
    }

    private func trim() {
        guard levelsLimit > 0 else { return }
        let before = undoStack.count
        undoStack.keep(atMost: levelsLimit + (depth > 0 ? 1 : 0))
        keptUndoGroups = max(0, keptUndoGroups - (before - undoStack.count))
    }

    /// The closed undo and redo groups, oldest first (for ``Context/keepUndo(named:)``).
    var closedGroups: (undo: [(name: String?, records: [Record])], redo: [(name: String?, records: [Record])]) {
        (undoStack.groups, redoStack.groups)
    }

    /// Replaces both stacks with groups an earlier launch kept, each undone or redone only
    /// if its objects are as it left them (``Context/keepUndo(named:)``).
    func restoreKept(undo: [(name: String?, records: [Record])], redo: [(name: String?, records: [Record])]) {
        removeAllActions()
        for group in undo { undoStack.appendGroup(named: group.name, group.records) }
        for group in redo { redoStack.appendGroup(named: group.name, group.records) }
        keptUndoGroups = undoStack.count
        keptRedoGroups = redoStack.count
        trim()
    }

    // MARK: Recording (called by the context)

    /// Runs `body` inside the open group, else in the current event's (opened for it), or
    /// with ``groupsByEvent`` off in a group of its own.
    @inline(__always)
    func withGroup(in context: Context, _ body: () -> Void) {
        if isReplaying || !isEnabled || depth > 0 { body(); return }
        guard groupsByEvent else {
            beginGrouping()
            body()
            endGrouping()
            return
        }
        beginEvent()
        body()
    }

    /// Opens the group of a new event; on the main actor, has the event end with the job.
    private func beginEvent() {
        undoStack.open(named: nil)
        depth = 1
        eventOpen = true
        eventSerial &+= 1
        if endsEventsWithMainActorTurns { EventEnd(stack: self, serial: eventSerial).schedule() }
    }

    /// Ends an event's group on the main actor once its current job is done, if the event
    /// is still open.
    private struct EventEnd: @unchecked Sendable {
        // (Unchecked: only a stack used on the main actor schedules one, see
        // `endEventsEachMainActorTurn()`, and the task runs on the main actor too.)
        weak var stack: UndoStack?
        let serial: UInt64

        func schedule() {
            Task { @MainActor in
                guard let stack = self.stack, stack.eventOpen, stack.eventSerial == self.serial else { return }
                stack.endEvent()
            }
        }
    }

    /// Records `object`'s whole state before a change to it.
    @inline(__always)
    func record(_ object: ManagedObject, in context: Context) {
        guard isEnabled, !isReplaying, depth > 0 else { return }
        recordState(object, in: context)
    }

    /// Records the value in `slot` of `object` (loaded) before a change to it.
    @inline(__always)
    func record(_ object: ManagedObject, slot: Int) {
        // (An object the open group recorded whole, as each one inserted in it, is passed
        // over here, inline: most writes after an insert are to the new object.)
        guard isEnabled, !isReplaying, depth > 0, !isWholeInOpenGroup(object) else { return }
        recordValue(object, slot: slot)
    }

    /// Records the reference `raw` about to be inserted at `index` of the list in `slot`,
    /// or removed from there: a relationship's inverse list gaining or losing one target
    /// records that, not the list it replaces (which would keep a copy of the list per
    /// target added: memory in n² for n targets).
    @inline(__always)
    func record(_ object: ManagedObject, slot: Int, inserting raw: UInt64, at index: Int) {
        guard isEnabled, !isReplaying, depth > 0 else { return }
        recordEdit(object, .inserted(slot: slot, raw: raw, index: index))
    }

    @inline(__always)
    func record(_ object: ManagedObject, slot: Int, removing raw: UInt64, at index: Int) {
        guard isEnabled, !isReplaying, depth > 0 else { return }
        recordEdit(object, .removed(slot: slot, raw: raw, index: index))
    }

    /// Records the value a transient property held (nil: its initial value) before a set.
    /// (Even when the object's whole state is recorded in the group: that has no transients.)
    func record(_ object: ManagedObject, transient site: DeclarationSite, replacing value: Any?) {
        guard isEnabled, !isReplaying, depth > 0 else { return }
        undoStack.append(Record(object: object, recorded: .transient(TransientChange(site: site, value: value))))
    }

    private func recordEdit(_ object: ManagedObject, _ recorded: Recorded) {
        if isWholeInOpenGroup(object) { return }
        undoStack.append(Record(object: object, recorded: recorded))
    }

    private func recordState(_ object: ManagedObject, in context: Context) {
        guard object.undoWholeGroup != wholeSerial else { return }
        object.undoWholeGroup = wholeSerial
        undoStack.append(Record(object: object, recorded: Self.state(of: object, in: context)))
    }

    private func recordValue(_ object: ManagedObject, slot: Int) {
        guard slot < object.valueCount else { return }
        undoStack.append(Record(object: object, recorded: .value(slot: slot, object.currentValue(at: slot))))
    }

    /// Whether the open group recorded `object`'s whole state.
    @inline(__always) private func isWholeInOpenGroup(_ object: ManagedObject) -> Bool {
        object.undoWholeGroup == wholeSerial
    }

    static func state(of object: ManagedObject, in context: Context) -> Recorded {
        if object.isFault { context.willRead(object) }
        return .whole(values: object.values, exists: object.exists, isRegistered: object.belongs(to: context))
    }

    // MARK: Undo and redo

    /// Undoes the last group (closing an open one first). The context must be the one
    /// that owns this stack.
    func undo(in context: Context) {
        refusal = nil
        if depth > 0 { depth = 1; endGrouping() }
        guard let (name, records) = undoStack.popLast(),
              takeKept(name, records, from: &undoStack, kept: &keptUndoGroups, undoing: true, in: context) else { return }
        redoStack.open(named: name)
        replay(records, in: context, reversingInto: &redoStack)
        // An undo that changed nothing (its list edits were undone elsewhere) leaves nothing to redo.
        if redoStack.lastIsEmpty { _ = redoStack.popLast() }
    }

    func redo(in context: Context) {
        refusal = nil
        endEvent()  // (a change made since clears what could be redone)
        guard depth == 0, let (name, records) = redoStack.popLast(),
              takeKept(name, records, from: &redoStack, kept: &keptRedoGroups, undoing: false, in: context) else { return }
        undoStack.open(named: name)
        replay(records, in: context, reversingInto: &undoStack)
        if undoStack.lastIsEmpty { _ = undoStack.popLast() }
        trim()
    }

    /// Whether the group just taken from `stack` may run: one an earlier launch kept (one
    /// of the `kept` oldest) only if its objects are as this context left them; if not, it
    /// goes back on the stack and ``refusal`` says why.
    private func takeKept(_ name: String?, _ records: [Record], from stack: inout GroupLog, kept: inout Int,
                          undoing: Bool, in context: Context) -> Bool {
        guard stack.count < kept else { return true }
        if let conflict = context.keptGroupConflict(records, named: name, undoing: undoing) {
            stack.appendGroup(named: name, records)
            refusal = conflict
            return false
        }
        kept = stack.count
        return true
    }

    /// Puts `records` back, last first; records into `reverse` (whose group is open), for
    /// each, what it replaces, so that putting those back, last first, redoes it.
    private func replay(_ records: [Record], in context: Context, reversingInto reverse: inout GroupLog) {
        isReplaying = true
        defer { isReplaying = false }
        for record in records.reversed() {
            let object = record.object
            switch record.recorded {
            case .whole:
                reverse.append(Record(object: object, recorded: Self.state(of: object, in: context)))
            case .value(let slot, _):
                if object.isFault { context.willRead(object) }
                reverse.append(Record(object: object, recorded: .value(slot: slot, object.currentValue(at: slot))))
            case .transient(let change):
                let current = object.transientValue(at: change.site)
                reverse.append(Record(object: object, recorded: .transient(TransientChange(site: change.site, value: current))))
            case .inserted, .removed:
                // The edit undone is the reverse's record (none if there was nothing to undo).
                if let undone = context.undoEdit(record) { reverse.append(Record(object: object, recorded: undone)) }
                continue
            }
            context.restore(record)
        }
    }
}

@available(*, unavailable, message: "an UndoStack belongs to its context's isolation")
extension UndoStack: Sendable {}

extension Context {
    /// Undoes the last group of changes.
    public func undo() {
        undoManager.undo(in: self)
        processPendingChanges()
    }

    /// Redoes the last undone group.
    public func redo() {
        undoManager.redo(in: self)
        processPendingChanges()
    }

    /// Runs `body` as one undo group named `name`.
    public func undoGroup<T>(named name: String? = nil, _ body: () throws -> T) rethrows -> T {
        try undoManager.group(named: name, body)
    }

    func restore(_ record: UndoStack.Record) {
        let object = record.object
        let id = object.recordID
        switch record.recorded {
        case .value(let slot, let value):
            if object.isFault { willRead(object) }
            if slot < object.valueCount { object.setValue(value, at: slot) }
        case .inserted, .removed:
            _ = undoEdit(record)
        case .transient(let change):
            restoreTransient(object, change)
        case .whole(let values, let exists, let isRegistered):
            relatedListsChanged()  // the object may join or leave the context
            // A deleted object whose record is in the store stays registered until the save
            // that deletes it, even if the state was captured while it was detached (a save
            // detaches deleted objects; redoing the delete after undo and save must delete again).
            if isRegistered || (!exists && object.inStore) {
                object.context = self
                registered[id] = object
            } else if object.belongs(to: self) {
                registered[id] = nil
                object.context = nil
            }
            object.values = values
            object.isFault = false
            object.exists = exists
        }
        dirty[id] = object
    }

    /// Undoes one edit of a reference list, returning the edit that redoes it (nil if there
    /// was nothing to undo). Last first, the list is as the edit left it, unless a merge or
    /// a refresh changed it since (they record no undo): an inserted reference is removed
    /// where it was put if it is still there, else where it is, and not at all if it is
    /// gone; a removed one is put back where it was unless it is back already. So a
    /// target another context added is never the one taken out.
    func undoEdit(_ record: UndoStack.Record) -> UndoStack.Recorded? {
        let object = record.object
        if object.isFault { willRead(object) }
        var redo: UndoStack.Recorded?
        switch record.recorded {
        case .inserted(let slot, let raw, let index):
            _ = object.editReferences(at: slot) { list in
                guard let at = index < list.count && list[index] == raw ? index : list.lastIndex(of: raw) else { return false }
                list.remove(at: at)
                redo = .removed(slot: slot, raw: raw, index: at)
                return true
            }
        case .removed(let slot, let raw, let index):
            _ = object.editReferences(at: slot) { list in
                guard !list.contains(raw) else { return false }
                let at = min(index, list.count)
                list.insert(raw, at: at)
                redo = .inserted(slot: slot, raw: raw, index: at)
                return true
            }
        case .value, .whole, .transient:
            return nil
        }
        if redo != nil { dirty[object.recordID] = object }
        return redo
    }
}
