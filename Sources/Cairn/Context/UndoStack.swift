/// A context's undo and redo stacks.
///
/// Every change — attribute, relationship (with its inverses), insert, delete (with its
/// cascades) — is undoable. Each change made outside an explicit group is its own
/// group; ``beginGrouping(named:)`` / ``endGrouping()`` or ``group(named:_:)`` gather
/// several. A new change clears the redo stack. Undo after a save works: the undone
/// change becomes an unsaved change, as in Core Data.
///
/// A group remembers, for each object it touched, the object's state before the group
/// (values and whether it existed) — or, when the group only set some of its values (the
/// usual change: one property), what those values were — and undo puts them back; redo
/// puts back what undo replaced. Setting one value records that value alone: recording
/// the whole state made every property set copy all of the object's values (its next
/// write then copied them again), ten times the cost of the set itself.
public final class UndoStack {
    /// An object's whole state before a group changed it.
    struct ObjectState {
        let object: ManagedObject
        let values: [Value]
        let exists: Bool
        let isRegistered: Bool
    }

    /// A value of an object before a group changed it.
    struct SlotValue {
        let slot: Int
        let value: Value
    }

    /// What a group remembers of one object: its whole state, or the values of the slots
    /// the group set (`whole` nil).
    struct Entry {
        let object: ManagedObject
        var whole: ObjectState?
        var slots: [SlotValue]
    }

    struct Group {
        var name: String?
        private(set) var entries: [Entry] = []
        /// Each object's place in `entries`, kept once there are more than a few (a
        /// group of one change is searched instead, and allocates no table).
        private var positions: [ObjectIdentifier: Int] = [:]
        private static let searchedEntries = 8

        init(name: String?) { self.name = name }

        func position(of object: ManagedObject) -> Int? {
            entries.count <= Self.searchedEntries ? entries.firstIndex { $0.object === object } : positions[ObjectIdentifier(object)]
        }

        mutating func append(_ entry: Entry) {
            entries.append(entry)
            guard entries.count > Self.searchedEntries else { return }
            if positions.isEmpty {
                for (place, entry) in entries.enumerated() { positions[ObjectIdentifier(entry.object)] = place }
            } else {
                positions[ObjectIdentifier(entry.object)] = entries.count - 1
            }
        }

        mutating func update(at position: Int, _ change: (inout Entry) -> Void) { change(&entries[position]) }
    }

    /// Most groups kept (0: no limit). The oldest are dropped first.
    public var levelsLimit = 0 { didSet { trim() } }
    /// When false, changes are not recorded.
    @exclusivity(unchecked) public var isEnabled = true

    // Used only on the owning context's isolation: no dynamic exclusivity checks.
    @exclusivity(unchecked) private(set) var undoStack: [Group] = []
    @exclusivity(unchecked) private(set) var redoStack: [Group] = []
    @exclusivity(unchecked) private var open: Group?
    @exclusivity(unchecked) private var depth = 0
    @exclusivity(unchecked) private var isReplaying = false

    public init() {}

    public var canUndo: Bool { !undoStack.isEmpty }
    public var canRedo: Bool { !redoStack.isEmpty }
    public var undoActionName: String? { undoStack.last?.name }
    public var redoActionName: String? { redoStack.last?.name }
    public var groupingLevel: Int { depth }

    /// Opens a group; changes until the matching ``endGrouping()`` undo together.
    public func beginGrouping(named name: String? = nil) {
        if depth == 0 { open = Group(name: name) } else if let name, open?.name == nil { open?.name = name }
        depth += 1
    }

    /// Closes the innermost group; closing the outermost pushes it on the undo stack.
    public func endGrouping() {
        guard depth > 0 else { return }
        depth -= 1
        guard depth == 0, let group = open else { return }
        open = nil
        if !group.entries.isEmpty {
            undoStack.append(group)
            redoStack.removeAll()
            trim()
        }
    }

    /// Runs `body` as one undo group named `name`.
    public func group<T>(named name: String? = nil, _ body: () throws -> T) rethrows -> T {
        beginGrouping(named: name)
        defer { endGrouping() }
        return try body()
    }

    /// Names the group being recorded (or the last one, if none is open).
    public func setActionName(_ name: String) {
        if open != nil { open?.name = name } else if !undoStack.isEmpty { undoStack[undoStack.count - 1].name = name }
    }

    public func removeAllActions() {
        undoStack.removeAll()
        redoStack.removeAll()
        open = nil
        depth = 0
    }

    private func trim() {
        if levelsLimit > 0 && undoStack.count > levelsLimit { undoStack.removeFirst(undoStack.count - levelsLimit) }
    }

    // MARK: Recording (called by the context)

    /// Runs `body` inside the open group, or in a group of its own.
    @inline(__always)
    func withGroup(in context: Context, _ body: () -> Void) {
        if isReplaying || !isEnabled || depth > 0 { body(); return }
        beginGrouping()
        body()
        endGrouping()
    }

    /// Remembers `object`'s state before the group first changes it.
    @inline(__always)
    func record(_ object: ManagedObject, in context: Context) {
        guard isEnabled, !isReplaying, depth > 0 else { return }
        recordState(object, in: context)
    }

    /// Remembers the value in `slot` of `object` (loaded) before the group first changes it.
    @inline(__always)
    func record(_ object: ManagedObject, slot: Int) {
        guard isEnabled, !isReplaying, depth > 0 else { return }
        recordValue(object, slot: slot)
    }

    private func recordState(_ object: ManagedObject, in context: Context) {
        guard open != nil else { return }
        guard let position = open?.position(of: object) else {
            open?.append(Entry(object: object, whole: Self.state(of: object, in: context), slots: []))
            return
        }
        guard let earlier = open?.entries[position], earlier.whole == nil else { return }
        // Values set earlier in the group: its state before the group is its state now with
        // those values put back (setting a value changes nothing else).
        let now = Self.state(of: object, in: context)
        var values = now.values
        for original in earlier.slots where original.slot < values.count { values[original.slot] = original.value }
        let whole = ObjectState(object: object, values: values, exists: now.exists, isRegistered: now.isRegistered)
        open?.update(at: position) { entry in
            entry.whole = whole
            entry.slots = []
        }
    }

    private func recordValue(_ object: ManagedObject, slot: Int) {
        guard open != nil, slot < object.values.count else { return }
        let original = SlotValue(slot: slot, value: object.values[slot])
        guard let position = open?.position(of: object) else {
            open?.append(Entry(object: object, whole: nil, slots: [original]))
            return
        }
        open?.update(at: position) { entry in
            if entry.whole == nil, !entry.slots.contains(where: { $0.slot == slot }) { entry.slots.append(original) }
        }
    }

    static func state(of object: ManagedObject, in context: Context) -> ObjectState {
        if object.isFault { context.willRead(object) }
        return ObjectState(object: object, values: object.values, exists: object.exists,
                           isRegistered: object.context === context)
    }

    // MARK: Undo and redo

    /// Undoes the last group (closing an open one first). The context must be the one
    /// that owns this stack.
    func undo(in context: Context) {
        if depth > 0 { depth = 1; endGrouping() }
        guard let group = undoStack.popLast() else { return }
        redoStack.append(replay(group, in: context))
    }

    func redo(in context: Context) {
        guard depth == 0, let group = redoStack.popLast() else { return }
        undoStack.append(replay(group, in: context))
    }

    /// Restores the states in `group`; returns the group that reverses it.
    private func replay(_ group: Group, in context: Context) -> Group {
        isReplaying = true
        defer { isReplaying = false }
        var reverse = Group(name: group.name)
        for entry in group.entries {
            let object = entry.object
            if entry.whole != nil {
                reverse.append(Entry(object: object, whole: Self.state(of: object, in: context), slots: []))
            } else {
                if object.isFault { context.willRead(object) }
                let values = object.values
                reverse.append(Entry(object: object, whole: nil, slots: entry.slots.map { original in
                    SlotValue(slot: original.slot, value: original.slot < values.count ? values[original.slot] : .null)
                }))
            }
        }
        for entry in group.entries { context.restore(entry) }
        return reverse
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

    func restore(_ entry: UndoStack.Entry) {
        guard let state = entry.whole else {
            let object = entry.object
            if object.isFault { willRead(object) }
            for original in entry.slots where original.slot < object.values.count {
                object.setValue(original.value, at: original.slot)
            }
            dirty[object.recordID] = object
            return
        }
        let object = state.object
        let id = object.recordID
        // A deleted object whose record is in the store stays registered until the save
        // that deletes it, even if the state was captured while it was detached (a save
        // detaches deleted objects; redoing the delete after undo and save must delete again).
        if state.isRegistered || (!state.exists && object.inStore) {
            object.context = self
            registered[id] = object
        } else if object.context === self {
            registered[id] = nil
            object.context = nil
        }
        object.values = state.values
        object.isFault = false
        object.exists = state.exists
        dirty[id] = object
    }
}
