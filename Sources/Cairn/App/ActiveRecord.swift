@_spi(Storage) import CairnStorage
import Foundation

/// Active-record helpers, always explicit about the context.
///
/// ```swift
/// let ann = Person.create(in: context)
/// let adults = try Person.all(where: #Predicate { $0.age >= 18 }, sortedBy: [SortDescriptor(\Person.name)], in: context)
/// let first = try Person.first(where: try FetchPredicate(format: "username == %@", "ann"), in: context)
/// let kids = try Person.count(where: #Predicate { $0.age < 18 }, in: context)
/// try Person.deleteAll(in: context)
/// ```
public protocol ActiveRecord: ManagedObject {}

extension ManagedObject: ActiveRecord {}

extension ActiveRecord {
    /// A new object inserted into `context`.
    public static func create(in context: Context) -> Self {
        let object = self.init()
        context.insert(object)
        return object
    }

    /// Every object of this class in `context`, in ID order.
    public static func all(in context: Context) throws -> [Self] {
        try context.fetch(FetchQuery(Self.self))
    }

    /// The objects matching a string predicate, sorted.
    public static func all(where predicate: FetchPredicate?, sortedBy sort: [SortKey] = [], in context: Context) throws -> [Self] {
        try context.fetch(FetchQuery(Self.self, predicate: predicate, sortDescriptors: sort))
    }

    /// The objects matching a typed predicate, sorted.
    public static func all(where predicate: Foundation.Predicate<Self>, sortedBy sort: [SortKey] = [], in context: Context) throws -> [Self] {
        try context.fetch(FetchQuery(Self.self, where: predicate, sortDescriptors: sort))
    }

    /// The first object matching a string predicate (in `sort` order, else ID order).
    public static func first(where predicate: FetchPredicate?, sortedBy sort: [SortKey] = [], in context: Context) throws -> Self? {
        var request = FetchQuery(Self.self, predicate: predicate, sortDescriptors: sort)
        request.fetchLimit = 1
        return try context.fetch(request).first
    }

    /// The first object matching a typed predicate.
    public static func first(where predicate: Foundation.Predicate<Self>, sortedBy sort: [SortKey] = [], in context: Context) throws -> Self? {
        // (With a limit of one, a predicate Cairn understands stops at the first match, as
        // the string form does; without one, every match would be made an object.)
        var request = FetchQuery(Self.self, where: predicate, sortDescriptors: sort)
        request.fetchLimit = 1
        return try context.fetch(request).first
    }

    /// The objects matching a typed predicate, sorted by Foundation's typed descriptors.
    public static func all(where predicate: Foundation.Predicate<Self>, sortedBy sort: [Foundation.SortDescriptor<Self>],
                           in context: Context) throws -> [Self] {
        try all(where: predicate, sortedBy: try sort.map(SortKey.init), in: context)
    }

    /// The first object matching a typed predicate in the order of Foundation's typed descriptors.
    public static func first(where predicate: Foundation.Predicate<Self>, sortedBy sort: [Foundation.SortDescriptor<Self>],
                             in context: Context) throws -> Self? {
        try first(where: predicate, sortedBy: try sort.map(SortKey.init), in: context)
    }

    /// How many objects of this class `context` holds (optionally matching a predicate).
    public static func count(where predicate: FetchPredicate? = nil, in context: Context) throws -> Int {
        try context.count(for: FetchQuery(Self.self, predicate: predicate))
    }

    /// How many objects of this class matching a typed predicate `context` holds.
    public static func count(where predicate: Foundation.Predicate<Self>, in context: Context) throws -> Int {
        try context.count(for: FetchQuery(Self.self, where: predicate))
    }

    /// Deletes every object of this class (matching `predicate`, if given) in `context`.
    public static func deleteAll(where predicate: FetchPredicate? = nil, in context: Context) throws {
        for object in try all(where: predicate, in: context) { context.delete(object) }
    }

    /// Deletes every object of this class matching a typed predicate in `context`.
    public static func deleteAll(where predicate: Foundation.Predicate<Self>, in context: Context) throws {
        for object in try all(where: predicate, in: context) { context.delete(object) }
    }

    /// Deletes this object from `context` (it must belong to it).
    public func delete(in context: Context) {
        context.delete(self)
    }

    /// This object as seen by another context, by its ID; nil if it does not exist there.
    public func inContext(_ other: Context) throws -> Self? {
        try other.existingObject(Self.self, with: objectID)
    }
}
