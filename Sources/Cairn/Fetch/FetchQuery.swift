@_spi(Storage) import CairnStorage
import Foundation

/// What to fetch: an entity, a predicate, an order, and a window.
///
/// ```swift
/// var request = FetchQuery(Person.self, format: "age >= %@ AND name BEGINSWITH[c] %@", .int64(18), .string("a"))
/// request.sortDescriptors = [SortKey("name"), SortKey("age", ascending: false)]
/// request.fetchLimit = 20
/// let people = try context.fetch(request)
/// ```
/// For a run-time entity use `FetchQuery<ManagedObject>(entityName:)`.
public struct FetchQuery<Result: ManagedObject> {
    public var entityName: String
    public var predicate: FetchPredicate?
    /// A typed predicate, evaluated on objects when it cannot be turned into a
    /// ``FetchPredicate`` (see ``FetchQuery/init(_:where:)``).
    var objectFilter: ((Result) throws -> Bool)?
    /// Why the typed predicate is evaluated on objects rather than on stored records (nil
    /// if it is not: no typed predicate, or one that converted).
    public internal(set) var inMemoryReason: String?
    public var sortDescriptors: [SortKey] = []
    public var fetchLimit: Int?
    public var fetchOffset: Int = 0
    /// Results load their values this many at a time, when the first of each batch is touched.
    public var fetchBatchSize: Int?
    /// Whether the context's unsaved inserts, updates and deletes count (default true).
    public var includesPendingChanges = true

    public init(_ type: Result.Type = Result.self, predicate: FetchPredicate? = nil, sortDescriptors: [SortKey] = []) {
        entityName = type.entityName
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
    }

    /// A request for an entity by name (the dynamic API).
    public init(entityName: String, predicate: FetchPredicate? = nil, sortDescriptors: [SortKey] = []) {
        self.entityName = entityName
        self.predicate = predicate
        self.sortDescriptors = sortDescriptors
    }

    /// A request with a string predicate in NSPredicate format syntax.
    public init(_ type: Result.Type = Result.self, format: String, _ arguments: Value...) throws {
        self.init(type, predicate: try FetchPredicate(format: format, arguments: arguments))
    }
}

/// How a fetch found its candidates (``Context/explain(_:)``).
public struct QueryPlan: Sendable, Equatable, CustomStringConvertible {
    public enum Access: Sendable, Equatable {
        /// Every record of the entity was read.
        case fullScan
        /// Records came from the index on `attribute`.
        case index(attribute: String, condition: IndexCondition)
    }

    public var entity: String
    public var access: Access
    /// Whether the rest of the predicate is checked on each candidate.
    public var residualPredicate: FetchPredicate?
    /// Set when a typed predicate is evaluated on each object (every object of the entity
    /// made and tested), with the reason (``FetchQuery/inMemoryReason``).
    public var inMemoryFilter: String?

    public var description: String {
        let memory = inMemoryFilter.map { " FILTER IN MEMORY (\($0))" } ?? ""
        switch access {
        case .fullScan: return "SCAN \(entity)" + (residualPredicate.map { " FILTER \($0)" } ?? "") + memory
        case .index(let attribute, let condition):
            return "INDEX \(entity).\(attribute) \(condition)" + (residualPredicate.map { " FILTER \($0)" } ?? "") + memory
        }
    }
}

/// An aggregate over one numeric attribute.
public enum Aggregate: Sendable, Hashable {
    case count
    case min(String)
    case max(String)
    case sum(String)
    case average(String)
}
