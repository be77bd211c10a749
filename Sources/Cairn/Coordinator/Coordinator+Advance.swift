import CairnCollections
import CairnStorage

/// A reader's coordinator moving to the writing process's newest state: what the store
/// takes in is announced to the contexts and observers as the saves of another context
/// are, so objects refresh, live results update and observers hear of the keys changed.
extension Coordinator {
    /// For a coordinator opened with ``StoreOptions/readOnly``: takes in what the writing
    /// process committed since the store opened or last advanced, announcing each step to
    /// the contexts and observers as a save; returns the change sets, oldest first. See
    /// ``Container/advance()``.
    ///
    /// When no context or observer hears of the changes, the sets of each change set are
    /// built when first read: a caller that only moves on pays for none.
    public func advance() throws -> [ChangeSet] {
        // (The closures hold the model's entities, not the coordinator: a change set kept
        // by the caller does not keep it open.)
        let entities = entitiesByNumber
        return try store.advance().map { step in
            let change: @Sendable (Int) -> (id: RecordID, kind: SaveItem.Kind, keys: ChangedKeys) = { index in
                let change = step.changes[index]
                let kind: SaveItem.Kind = switch change.kind {
                case .insert: .insert
                case .update: .update
                case .delete: .delete
                }
                return (change.id, kind, .names(Self.keyNames(change.changedSlots, entity: change.id.entity, in: entities)))
            }
            let listening = listeners(except: nil)
            guard listening.isEmpty else { return announce(step.sequence, to: listening, count: step.changes.count, filled: true, change) }
            // (Empty as the built sets would be: a change to an entity this model lacks is left out.)
            let isEmpty = !step.changes.contains { entities[$0.id.entity] != nil }
            return ChangeSet(sequence: step.sequence, pending: PendingChangeSets(isEmpty: isEmpty) {
                Self.changeSets(count: step.changes.count, entities: entities, change)
            })
        }
    }

    /// The names of slots (attributes, then relationships) of entity `number`.
    private static func keyNames(_ slots: [Int], entity number: UInt16, in entities: EntityMap<EntityDescription>) -> Set<String> {
        guard !slots.isEmpty, let entity = entities[number] else { return [] }
        return Set(slots.compactMap(entity.propertyName(slot:)))
    }
}
