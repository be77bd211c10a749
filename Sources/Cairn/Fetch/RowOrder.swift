import Foundation

/// The order of a fetch's results: by each sort descriptor's key path in turn, and by
/// record ID where they all tie. One piece of code for the fetch's sort and for live
/// results placing a changed object among the ones they hold, so both agree.
struct RowOrder {
    private let descriptors: [SortDescriptor]
    private let paths: [CompiledPredicate.ResolvedPath]
    /// The locale read once, not at each comparison.
    private let localized: LocalizedOrder?

    init(_ descriptors: [SortDescriptor], entity: EntityDescription, schema: Schema) throws {
        self.descriptors = descriptors
        paths = try descriptors.map { try CompiledPredicate.resolve($0.keyPath, entity: entity, schema: schema) }
        localized = descriptors.contains { $0.localizedCaseInsensitive } ? LocalizedOrder() : nil
    }

    var isEmpty: Bool { descriptors.isEmpty }

    /// The values a row is sorted by (the first value each key path reaches, or null).
    func key(_ values: [Value], _ resolve: CompiledPredicate.Resolver) -> [Value] {
        paths.map { CompiledPredicate.follow($0, values, resolve).first ?? .null }
    }

    /// Whether the row with sort key `a` and ID `idA` comes before the one with `b`, `idB`.
    func precedes(_ a: [Value], _ idA: RecordID, _ b: [Value], _ idB: RecordID) -> Bool {
        for (index, descriptor) in descriptors.enumerated() {
            let order = ValueOrder.sortOrder(a[index], b[index], localized: descriptor.localizedCaseInsensitive ? localized : nil)
            if order == .orderedSame { continue }
            return (order == .orderedAscending) == descriptor.ascending
        }
        return idA < idB
    }
}
