import CairnCollections
import CairnStorage
import Foundation

// Long to-many lists, kept as objects between in-place edits.
//
// Reading `person.dvds` looks up the object of every ID in the list; setting it back
// compares every target. `person.dvds.append(dvd)` does both, so n appends to one list
// would take time in n² with a large constant. The context keeps the
// objects of a long list as last read, and an edit handed the kept list (the property's
// `_modify`) changes it in place: an append then costs a comparison of the list's
// references with the ones handed out (memcmp), a set lookup for whether the list holds
// the target, and the ID list's own append (``ListShadow``).
//
// A kept list stands while
// - its owner's values have not changed (``ManagedObject/valuesStamp``): a list changed
//   by any path (a set, an edit, an inverse, undo, a merge, a refresh, a load) is read anew;
// - nothing has changed which objects a read would find for the IDs, or leave out: every
//   change to an object's existence, and every rollback, reset, refresh, upsert rename,
//   whole-state undo and object turned back into a fault by another context's save, lets
//   go of all kept lists (``relatedListsChanged()``).
// A list is kept only as a read would find it: every object loaded, existing, and the one
// registered for its ID.
// Only lists of ``relatedListMinimum`` targets or more are kept, and only by an edit in
// place (and the set that ends it): a shorter list costs little to read, and keeping every
// list read would cost a table entry and memory for each.

/// Which list a kept list is: its owner and the relationship's slot.
struct RelatedListKey: Hashable {
    let owner: ObjectIdentifier
    let slot: Int
}

/// A to-many list's objects as last read (see ``Context/keptList(_:slot:)``).
struct RelatedList {
    /// Held, so that the key's identifier names this object as long as the list is kept.
    let owner: ManagedObject
    /// The owner's ``ManagedObject/valuesStamp`` when the list was read.
    let stamp: UInt32
    var objects: [ManagedObject]
    /// Whether `objects` holds an object for every ID of the list, in its order (none was
    /// left out as deleted or of an unknown entity).
    let complete: Bool
    /// The class every object was found to be an instance of, by a typed read.
    var checkedClass: ObjectIdentifier?
    /// What edits keep besides the objects, once one was handed the list.
    var shadow: ListShadow?
}

/// A kept list's objects as edits use them, kept up to date by each append (so that no
/// append makes them anew):
/// - their identifiers as a set: an object of this context is in the list exactly when its
///   ID is (one object per ID), so an append need not scan the IDs;
/// - their addresses in order (nothing retained): what an edit was handed, to compare with
///   the list it ends with.
struct ListShadow {
    var members: Set<ObjectIdentifier>
    var addresses: [UInt]

    init(_ objects: ArraySlice<ManagedObject>) {
        members = Set(objects.lazy.map { ObjectIdentifier($0) })
        addresses = []
        append(objects)
    }

    /// Adds `objects`' addresses at the end (their identifiers are inserted by the caller).
    mutating func append(_ objects: ArraySlice<ManagedObject>) { ReferenceAddresses.append(objects, to: &addresses) }
}

/// What an in-place edit of a to-many property (`person.dvds.append(dvd)`) was handed: the
/// kept list's shadow (the addresses of its objects, among others), and what it stood on.
/// If both still hold when the edit ends, the edited list's first objects, where they are
/// the ones handed out, need no check or lookup.
@usableFromInline
struct RelatedListEdit {
    let epoch: UInt64
    let stamp: UInt32
    /// The shadow, in a box the set that ends the edit takes it out of: held by this value
    /// too, it would be copied by the next change to it.
    let box: ShadowBox
}

/// Holds a kept list's shadow while an edit has it (see ``RelatedListEdit``).
@usableFromInline
final class ShadowBox {
    var shadow: ListShadow?
    init(_ shadow: ListShadow) { self.shadow = shadow }

    /// The shadow, left to the caller alone.
    func take() -> ListShadow? {
        defer { shadow = nil }
        return shadow
    }
}

/// The first objects of a list being set that are, in order, the whole list as it stands
/// (see ``Context/knownPrefix(of:in:slot:edit:)``), with their identifiers if known.
struct KnownPrefix {
    let count: Int
    var shadow: ListShadow?
}

extension Context {
    /// The length from which a to-many list read is kept.
    static let relatedListMinimum = 16
    /// How many lists are kept at most (all are let go of when one more would pass it).
    static let relatedListLimit = 4096

    /// Lets go of every kept list: which objects a read finds for an ID, or leaves out, may
    /// have changed.
    func relatedListsChanged() {
        relatedListsEpoch &+= 1
        if !relatedLists.isEmpty { relatedLists.removeAll() }
    }

    /// The kept list of the relationship in `slot` of `object`, if it stands.
    func keptList(_ object: ManagedObject, slot: Int) -> RelatedList? {
        guard !relatedLists.isEmpty else { return nil }
        let key = RelatedListKey(owner: ObjectIdentifier(object), slot: slot)
        guard let kept = relatedLists[key] else { return nil }
        guard kept.owner === object, kept.stamp == object.valuesStamp else {
            relatedLists[key] = nil  // stale: its objects are let go of now
            return nil
        }
        return kept
    }

    /// Keeps `objects`, just read (or just set) as the list in `slot` of `object`, if long enough.
    func keep(_ objects: [ManagedObject], of object: ManagedObject, slot: Int, complete: Bool, checked: ManagedObject.Type? = nil,
              shadow: ListShadow? = nil) {
        guard objects.count >= Self.relatedListMinimum else { return }
        if relatedLists.count >= Self.relatedListLimit { relatedLists.removeAll() }
        relatedLists[RelatedListKey(owner: ObjectIdentifier(object), slot: slot)] =
            RelatedList(owner: object, stamp: object.valuesStamp, objects: objects, complete: complete,
                        checkedClass: checked.map { ObjectIdentifier($0) }, shadow: shadow)
    }

    /// The kept list of `object`'s `slot`, if it stands and a typed read found every object
    /// to be a `type`.
    func keptList(_ object: ManagedObject, slot: Int, checked type: ManagedObject.Type) -> [ManagedObject]? {
        guard let kept = keptList(object, slot: slot), kept.checkedClass == ObjectIdentifier(type) else { return nil }
        return kept.objects
    }

    /// Notes that a typed read found every object of the kept list in `slot` (`count` of
    /// them) to be a `type`.
    func noteChecked(_ object: ManagedObject, slot: Int, as type: ManagedObject.Type, count: Int) {
        let key = RelatedListKey(owner: ObjectIdentifier(object), slot: slot)
        guard let kept = keptList(object, slot: slot), kept.objects.count == count else { return }
        relatedLists[key]?.checkedClass = ObjectIdentifier(type)
    }

    /// Takes the kept list of `object`'s `slot` out, into `list` (then its only holder, so
    /// an edit changes it in place), if it stands, is complete and was found to be all
    /// `type`s; nil, and `list` untouched, if not.
    func takeList(_ object: ManagedObject, slot: Int, checked type: ManagedObject.Type, into list: inout [ManagedObject]) -> RelatedListEdit? {
        guard let kept = keptList(object, slot: slot), kept.complete, kept.checkedClass == ObjectIdentifier(type),
              var taken = relatedLists.removeValue(forKey: RelatedListKey(owner: ObjectIdentifier(object), slot: slot)) else { return nil }
        let box = ShadowBox(taken.shadow ?? ListShadow(taken.objects[...]))
        taken.shadow = nil
        list = taken.objects
        taken.objects = []
        return RelatedListEdit(epoch: relatedListsEpoch, stamp: object.valuesStamp, box: box)
    }

    /// How many of `targets`' first objects are, in order, the whole list in `slot` of
    /// `object` as it stands: the objects an edit was handed, if nothing changed since, or
    /// the kept list. Nil if that is not known, or `targets` does not begin with them. (Kept
    /// lists are never empty, so both buffers have an address to compare.)
    func knownPrefix(of targets: [ManagedObject], in object: ManagedObject, slot: Int, edit: RelatedListEdit?) -> KnownPrefix? {
        let count: Int
        let matches: Bool
        var shadow: ListShadow?
        if let edit {
            guard edit.epoch == relatedListsEpoch, edit.stamp == object.valuesStamp, let handedOut = edit.box.take() else { return nil }
            count = handedOut.addresses.count
            guard count > 0, targets.count >= count else { return nil }
            matches = ReferenceAddresses.starts(targets, with: handedOut.addresses)
            shadow = handedOut
        } else {
            guard let kept = keptList(object, slot: slot), kept.complete else { return nil }
            count = kept.objects.count
            guard count > 0, targets.count >= count else { return nil }
            matches = ReferenceAddresses.starts(targets, with: kept.objects)
            if matches, kept.shadow != nil {
                // Taken out, so that its one holder changes it in place.
                let key = RelatedListKey(owner: ObjectIdentifier(object), slot: slot)
                shadow = relatedLists[key]?.shadow
                relatedLists[key]?.shadow = nil
            }
        }
        return matches ? KnownPrefix(count: count, shadow: shadow) : nil
    }
}

extension ManagedObject {
    /// The kept list of the to-many relationship in `slot`, if it stands and every object
    /// was found to be a `type` (``ToMany``'s read; the caller reinterprets it as `[type]`).
    @usableFromInline
    func keptRelated(_ slot: Int, checked type: ManagedObject.Type) -> [ManagedObject]? {
        guard !isFault, let context else { return nil }
        return context.keptList(self, slot: slot, checked: type)
    }

    /// Notes that a typed read found every one of the `count` objects of the list in `slot`
    /// to be a `type`.
    @usableFromInline
    func noteRelatedChecked(_ slot: Int, as type: ManagedObject.Type, count: Int) {
        guard count >= Context.relatedListMinimum, let context else { return }
        context.noteChecked(self, slot: slot, as: type, count: count)
    }

    /// Takes the kept list of `slot` out for an in-place edit (see ``Context/takeList(_:slot:checked:into:)``).
    @usableFromInline
    func takeRelated(_ slot: Int, checked type: ManagedObject.Type, into list: inout [ManagedObject]) -> RelatedListEdit? {
        guard !isFault, let context else { return nil }
        return context.takeList(self, slot: slot, checked: type, into: &list)
    }

    /// Ends an in-place edit of the to-many relationship in `slot`: sets it to `targets`,
    /// whose first objects need no check where they are the ones `edit` handed out.
    @usableFromInline
    func endRelatedEdit(_ slot: Int, _ targets: [ManagedObject], _ edit: RelatedListEdit?, checked type: ManagedObject.Type) {
        guard let context else { return setRelated(slot, targets) }
        context.setRelationship(of: self, slot: slot, to: targets, edit: edit, checked: type)
    }
}
