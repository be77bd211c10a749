import CairnStorage
import Foundation

/// Foundation's typed `SortDescriptor` for fetches: `SortDescriptor(\Person.name)`.
extension SortKey {
    /// Foundation's `SortDescriptor` of a managed object class as Cairn sorts by it: the
    /// attribute its key path reads (of the class, or of one a to-one relationship reaches:
    /// `\DVD.owner?.username`), its order, and a string comparator that is localized or
    /// case-insensitive as ``localizedCaseInsensitive``. Throws `.invalidArgument` for a
    /// key path that reads no such attribute (a computed property, a to-many relationship),
    /// naming it.
    public init<T: ManagedObject>(_ descriptor: Foundation.SortDescriptor<T>) throws {
        try self.init(descriptor, index: nil)
    }

    /// ``init(_:)`` for the descriptor at `index` of a query's `sortBy`, which the error names.
    init<T: ManagedObject>(_ descriptor: Foundation.SortDescriptor<T>, index: Int?) throws {
        guard let keyPath = descriptor.keyPath, let path = KeyPathNames.path(of: keyPath, in: T.self) else {
            let which = index.map { "sortBy[\($0)]" } ?? "a sort descriptor"
            let read = descriptor.keyPath.map { KeyPathNames.spelled($0) } ?? "a comparator with no key path"
            throw CairnError(.invalidArgument, "\(which) of \(T.entityName) sorts by \(read), which is no attribute of \(T.entityName) "
                             + "nor of an entity a to-one relationship of it reaches; sort by a stored attribute, or by name with SortKey")
        }
        // Any string comparator but the plain lexical one (localized, localized standard,
        // case-insensitive) folds case and follows the locale, as Cairn's folded sort does.
        let folded = descriptor.stringComparator.map { comparator in
            var lexical = String.StandardComparator.lexical
            lexical.order = comparator.order
            return comparator != lexical
        } ?? false
        self.init(path.joined(separator: "."), ascending: descriptor.order == .forward, localizedCaseInsensitive: folded)
    }
}
