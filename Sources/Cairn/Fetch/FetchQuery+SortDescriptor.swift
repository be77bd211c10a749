@_spi(Storage) import CairnStorage
import Foundation

/// Foundation's typed `SortDescriptor` for fetches: `SortDescriptor(\Person.name)`.
extension SortKey {
    /// Foundation's `SortDescriptor` of a managed object class as Cairn sorts by it: the
    /// attribute its key path reads, its order, and a string comparator that is localized
    /// or case-insensitive as ``localizedCaseInsensitive``. Throws `.invalidArgument` for a
    /// key path that reads no attribute of the class (a computed property, a path through
    /// a relationship: name those with the string form).
    public init<T: ManagedObject>(_ descriptor: Foundation.SortDescriptor<T>) throws {
        guard let keyPath = descriptor.keyPath, let name = KeyPathNames.name(of: keyPath, in: T.self, target: nil) else {
            throw CairnError(.invalidArgument, "a sort descriptor of \(T.self) reads no attribute of it (\(descriptor))")
        }
        // Any string comparator but the plain lexical one (localized, localized standard,
        // case-insensitive) folds case and follows the locale, as Cairn's folded sort does.
        let folded = descriptor.stringComparator.map { comparator in
            var lexical = String.StandardComparator.lexical
            lexical.order = comparator.order
            return comparator != lexical
        } ?? false
        self.init(name, ascending: descriptor.order == .forward, localizedCaseInsensitive: folded)
    }
}

extension FetchQuery {
    /// A request sorted by Foundation's typed sort descriptors.
    public init(_ type: Result.Type = Result.self, predicate: FetchPredicate? = nil,
                sortBy descriptors: [Foundation.SortDescriptor<Result>]) throws {
        self.init(type, predicate: predicate, sortDescriptors: try descriptors.map(SortKey.init))
    }

    /// A request with a typed predicate, sorted by Foundation's typed sort descriptors.
    public init(_ type: Result.Type = Result.self, where predicate: Foundation.Predicate<Result>,
                sortBy descriptors: [Foundation.SortDescriptor<Result>]) throws {
        self.init(type, where: predicate, sortDescriptors: try descriptors.map(SortKey.init))
    }
}
