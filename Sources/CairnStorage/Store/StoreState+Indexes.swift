// The store state's secondary indexes: which note an entity's changes, which the
// snapshot stores and how they are attached, and what a new snapshot does to them.
extension StoreState {
    /// The secondary indexes of `entity`, which note every change to its records.
    func indexes(of entity: UInt16) -> [SecondaryIndex] {
        indexes.compactMap { $0.key.entity == entity ? $0.value : nil }
    }

    /// Attaches the indexes the snapshot stores over entities with at most `tailLimit`
    /// records in the log's overlay; the others are attached on first use, as is one
    /// whose log bodies fail their check (the first use reports it).
    mutating func attachStoredIndexes(tailLimit: Int) {
        for block in snapshot.index.attributeIndexes where snapshot.storedOrderHolds(block) {
            guard indexes[IndexKey(entity: block.entity, slot: block.attribute)] == nil else { continue }
            let changes = overlay(of: block.entity)
            guard changes.count <= tailLimit, let index = try? SecondaryIndex(snapshot: snapshot, block: block, changes: changes) else { continue }
            indexes[IndexKey(entity: block.entity, slot: block.attribute)] = index
        }
    }

    /// The index the snapshot stores for `key`, in an order this build relies on.
    func storedBlock(_ key: IndexKey) -> SnapshotIndex.AttributeIndex? {
        snapshot.index.attributeIndexes.first {
            $0.entity == key.entity && $0.attribute == key.slot && snapshot.storedOrderHolds($0)
        }
    }

    /// Switches to a new snapshot holding every record (after a compaction or migration):
    /// indexes read from the old snapshot go, and the new one's are attached on first use
    /// (attached now, each would note every commit's IDs until a lookup reads them);
    /// indexes built in memory stay, as they are keyed by record ID and current, unless
    /// the new snapshot stores them.
    mutating func replaceSnapshot(with reader: SnapshotReader, log: FileMapping, history: FileMapping?) {
        keptHistory = history
        // Indexes built in memory stay: bring them up to date while the overlay still
        // says what changed.
        let kept = indexes.filter { !$0.value.isStored }
        for (key, index) in kept { index.catchUp(with: overlay(of: key.entity)) }
        snapshot = reader
        overlay = [:]
        logPuts = 0
        shadowed = 0
        (checkpointOffset, checkpointRecords) = (nil, 0)
        frameGroups = FrameGroups()
        bodies = LogBodies(log: log)
        indexes = kept.filter { storedBlock($0.key) == nil }
    }
}
