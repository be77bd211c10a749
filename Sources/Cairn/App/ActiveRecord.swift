import CairnStorage
import Foundation

/// Active-record helpers, always explicit about the context, with the labels of every
/// fetch: `where:` a `#Predicate`, `format:` a format string with plain Swift arguments,
/// `sortBy:` Foundation's sort descriptors.
///
/// ```swift
/// let ann = Person.create(in: context)
/// let adults = try Person.all(where: #Predicate { $0.age >= 18 }, sortBy: [SortDescriptor(\Person.name)], in: context)
/// let named = try Person.first(format: "username == %@", "ann", in: context)
/// let everyone = try Person.all(sortBy: [SortDescriptor(\Person.name)], in: context)
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

    /// The objects of this class in `context` matching `predicate` (all, if nil), in the
    /// order of `sortBy` (ID order, if empty).
    public static func all(where predicate: Foundation.Predicate<Self>? = nil, sortBy: [Foundation.SortDescriptor<Self>] = [],
                           in context: Context) throws -> [Self] {
        try context.fetch(FetchQuery(Self.self, predicate: predicate, sortBy: sortBy))
    }

    /// The objects of this class in `context` matching a format predicate, whose `%@` take
    /// plain Swift values (see ``FetchPredicate/init(format:_:_:)``), in the order of
    /// `sortBy` (ID order, if empty). Throws for a format that does not parse.
    public static func all(format: String, _ arguments: any PredicateArgument..., sortBy: [Foundation.SortDescriptor<Self>] = [],
                           in context: Context) throws -> [Self] {
        try context.fetch(FetchQuery(Self.self, fetchPredicate: try FetchPredicate(format: format, plain: arguments))
            .sorted(by: sortBy))
    }

    /// The objects `query` finds in `context`.
    public static func all(_ query: FetchQuery<Self>, in context: Context) throws -> [Self] {
        try context.fetch(query)
    }

    /// The first object matching `predicate` (any, if nil) in the order of `sortBy` (ID
    /// order, if empty); nil if there is none. With a predicate Cairn understands, the
    /// fetch stops at the first match.
    public static func first(where predicate: Foundation.Predicate<Self>? = nil, sortBy: [Foundation.SortDescriptor<Self>] = [],
                             in context: Context) throws -> Self? {
        try context.fetch(FetchQuery(Self.self, predicate: predicate, sortBy: sortBy, fetchLimit: 1)).first
    }

    /// The first object matching a format predicate in the order of `sortBy` (ID order, if
    /// empty); nil if there is none. Throws for a format that does not parse.
    public static func first(format: String, _ arguments: any PredicateArgument..., sortBy: [Foundation.SortDescriptor<Self>] = [],
                             in context: Context) throws -> Self? {
        var query = FetchQuery(Self.self, fetchPredicate: try FetchPredicate(format: format, plain: arguments)).sorted(by: sortBy)
        query.fetchLimit = 1
        return try context.fetch(query).first
    }

    /// How many objects of this class `context` holds matching `predicate` (all, if nil).
    public static func count(where predicate: Foundation.Predicate<Self>? = nil, in context: Context) throws -> Int {
        try context.count(for: FetchQuery(Self.self, predicate: predicate))
    }

    /// How many objects of this class `context` holds matching a format predicate.
    public static func count(format: String, _ arguments: any PredicateArgument..., in context: Context) throws -> Int {
        try context.count(for: FetchQuery(Self.self, fetchPredicate: try FetchPredicate(format: format, plain: arguments)))
    }

    /// Deletes every object of this class matching `predicate` (all, if nil) in `context`.
    public static func deleteAll(where predicate: Foundation.Predicate<Self>? = nil, in context: Context) throws {
        for object in try all(where: predicate, in: context) { context.delete(object) }
    }

    /// Deletes every object of this class matching a format predicate in `context`.
    public static func deleteAll(format: String, _ arguments: any PredicateArgument..., in context: Context) throws {
        let query = FetchQuery(Self.self, fetchPredicate: try FetchPredicate(format: format, plain: arguments))
        for object in try context.fetch(query) { context.delete(object) }
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
