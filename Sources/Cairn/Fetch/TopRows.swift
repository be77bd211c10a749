import CairnStorage
/// The first rows of a fetch in its sort's order, kept while a scan offers the matches
/// one by one: a fetch with a limit (`fetchLimit` 20 of records sorted by date) whose sort
/// keys are attributes of the records themselves. A stored match's keys are read from its
/// body in place; only a match that is among the first so far is decoded, not every
/// match to sort them all.
///
/// A heap of the rows kept, whose root is the last of them in order: a row offered must
/// precede it to take its place.
final class TopRows {
    private let order: RowOrder
    private let slots: [Int]
    private let wanted: Int
    // Touched only by the fetch that made it: no dynamic exclusivity checks (a runtime
    // call at every access).
    @exclusivity(unchecked) private var rows: [Context.FetchRow] = []
    /// The kept rows' keys, `slots.count` per row, by position in `rows`.
    @exclusivity(unchecked) private var keys: [Value] = []
    /// The kept rows' IDs, by position in `rows` (read apart from the rows: `rows[i].id`
    /// would copy the row, retaining its values, at every comparison).
    @exclusivity(unchecked) private var ids: [RecordID] = []
    /// Positions in `rows`.
    @exclusivity(unchecked) private var kept = KeptFirst()
    /// The keys of the row being offered.
    @exclusivity(unchecked) private var offered: [Value]

    /// The entity whose stored records are offered (decoded and checked against it).
    private let entity: EntityDescription

    /// Nil when a key path follows a relationship (the keys are not in the record).
    init?(order: RowOrder, wanted: Int, entity: EntityDescription) {
        guard let slots = order.ownSlots else { return nil }
        (self.order, self.slots, self.wanted, self.entity) = (order, slots, max(0, wanted), entity)
        offered = Array(repeating: .null, count: slots.count)
    }

    /// Offers a stored match: its keys read from `record`, the rest decoded (and checked
    /// against the entity) only if it is kept.
    func offer(id: RecordID, version: UInt64, record: borrowing StoredRecord) throws {
        for (index, slot) in slots.enumerated() { offered[index] = try record.value(at: slot) ?? .null }
        if admits(id) { keep(Context.FetchRow(id: id, values: try Store.decodeRecord(record, id: id, entity: entity), version: version)) }
    }

    /// Offers a match with its values.
    func offer(_ row: Context.FetchRow) {
        for (index, slot) in slots.enumerated() { offered[index] = slot < row.values.count ? row.values[slot] : .null }
        if admits(row.id) { keep(row) }
    }

    /// The rows kept, in order.
    func sorted() -> [Context.FetchRow] {
        kept.positions.sorted(by: precedes).map { rows[$0] }
    }

    /// Whether the offered row is among the first so far.
    private func admits(_ id: RecordID) -> Bool {
        if kept.count < wanted { return true }
        guard let root = kept.last else { return false }
        let width = slots.count
        return order.precedes({ offered[$0] }, id, { keys[root * width + $0] }, ids[root])
    }

    private func precedes(_ a: Int, _ b: Int) -> Bool {
        let width = slots.count
        return order.precedes({ keys[a * width + $0] }, ids[a], { keys[b * width + $0] }, ids[b])
    }

    /// Keeps the offered row (with `offered` its keys): in a free place, or in the last one's.
    private func keep(_ row: Context.FetchRow) {
        let width = slots.count
        if kept.count < wanted {
            rows.append(row)
            ids.append(row.id)
            keys.append(contentsOf: offered)
            kept.insert(rows.count - 1, by: precedes)
        } else if let last = kept.last {
            rows[last] = row
            ids[last] = row.id
            for index in 0..<width { keys[last * width + index] = offered[index] }
            kept.replaceLast(with: last, by: precedes)
        }
    }
}
