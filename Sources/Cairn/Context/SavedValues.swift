import CairnStorage

/// An object's saved values as the difference from its current ones: what a write
/// replaced, slot by slot. Most objects change a few of their values, or none.
enum SavedValues {
    /// No saved values: a new object.
    case none
    /// The current values, except at the slots listed, which held the values listed.
    case except([SavedValue])
    /// Saved values that do not line up with the current ones (another count), kept whole.
    case whole([Value])

    /// `base` as the difference from `values`. A slot is left out only where the current
    /// value is the saved one exactly (not merely `==`: 0.0 and -0.0 are equal).
    init(base: [Value], values: [Value]) {
        guard base.count == values.count else {
            self = .whole(base)
            return
        }
        var originals: [SavedValue] = []
        for slot in base.indices where !Value.interchangeable(base[slot], values[slot]) {
            originals.append(SavedValue(slot: slot, value: base[slot]))
        }
        self = .except(originals)
    }
}

/// The saved value of one slot written since the object was read or saved.
struct SavedValue {
    let slot: Int
    let value: Value
}
