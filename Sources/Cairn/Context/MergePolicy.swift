import CairnStorage
/// How a save resolves objects changed here that were also changed (and saved)
/// elsewhere since this context read them.
///
/// Whatever a policy decides, the saved graph is whole: after the objects are merged,
/// references to records deleted here or in the store are dropped, every related record
/// points back, a record an object no longer names lets go of it, and a delete that
/// stands applies its delete rules to the relationships the store now holds (a cascade
/// reaches what another context added). What that makes impossible, such as a `deny`
/// rule now blocked or a required relationship now empty, fails the save with
/// `.validation`. To-many lists changed on both sides take both sides' edits (the
/// trumping side's where they clash) under every policy but `.rollback`.
public enum MergePolicy: Sendable, Hashable {
    /// Refuse the save with `.conflict`, listing the conflicts (the default).
    case error
    /// Per property: values changed in the store win; other local changes are kept
    /// (`NSMergeByPropertyStoreTrumpMergePolicy`). An object deleted here but changed in
    /// the store comes back with the store's values; what its delete cascaded to stays
    /// deleted. One deleted in the store stays deleted.
    case storeTrumps
    /// Per property: values changed here win; properties not changed here take the
    /// store's values (`NSMergeByPropertyObjectTrumpMergePolicy`). A delete made here
    /// stands. An object changed here but deleted in the store is saved again under
    /// its ID (unless another context brought it back first: then it merges with that).
    case objectTrumps
    /// This context's version of each conflicting object replaces the store's: every
    /// attribute takes this context's value (`NSOverwriteMergePolicy`). Relationships
    /// are merged as under `.objectTrumps`, so a link this context never touched (another
    /// context's new child) is not undone. Deletes as under `.objectTrumps`.
    case overwrite
    /// Conflicting objects take the store's state whole, dropping local changes, deletes
    /// included (`NSRollbackMergePolicy`); their related records follow.
    case rollback
}
