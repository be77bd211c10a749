import CairnStorage
import Foundation

/// What to fetch: an entity, a predicate, an order, and a window, in SwiftData's
/// `FetchDescriptor` shape.
///
/// ```swift
/// var query = FetchQuery(Person.self, predicate: #Predicate { $0.age >= 18 },
///                        sortBy: [SortDescriptor(\Person.name), SortDescriptor(\Person.age, order: .reverse)])
/// query.fetchLimit = 20
/// let adults = try context.fetch(query)
/// let named = try context.fetch(FetchQuery(Person.self, format: "username IN %@", ["ann", "bo"]))
/// ```
/// The same labels serve everywhere a fetch is asked for: ``Context/fetch(_:where:sortBy:)``,
/// ``Context/count(_:where:)``, ``LiveResults``, the ``ActiveRecord`` helpers. For a
/// run-time entity use `FetchQuery<ManagedObject>(entityName:)`, with a
/// ``FetchPredicate`` and ``SortKey``s by name.
public struct FetchQuery<Result: ManagedObject> {
    /// The name of the entity whose objects the query finds.
    public var entityName: String
    /// The typed predicate. It runs on stored records, and can use indexes, when every
    /// part of it is understood (comparisons, `&&`, `||`, `!`, `contains`,
    /// `starts(with:)`, nil checks, to-one key paths); otherwise it is evaluated on each
    /// object, every object of the entity made to be tested: ``inMemoryReason`` names the
    /// part not understood, and ``Context/explain(_:)`` says `FILTER IN MEMORY`.
    public var predicate: Foundation.Predicate<Result>? {
        didSet { compile() }
    }
    /// A predicate in NSPredicate format syntax (``FetchPredicate``): what
    /// ``init(_:format:_:sortBy:fetchLimit:)`` parses, and the form for run-time entities. With
    /// ``predicate`` as well, a result matches both.
    public var fetchPredicate: FetchPredicate?
    /// The order, by Foundation's typed sort descriptors: each must read an attribute of
    /// the entity, or of one a to-one relationship reaches (`\DVD.owner?.name`); one that
    /// does not is refused by the fetch, naming it.
    public var sortBy: [Foundation.SortDescriptor<Result>]
    /// More of the order, by key path names (for run-time entities and the command
    /// line), after ``sortBy``.
    public var sortKeys: [SortKey] = []
    /// At most this many results, after ``fetchOffset`` (nil: no limit).
    public var fetchLimit: Int?
    /// How many results to skip, in the query's order, before the first one returned.
    public var fetchOffset: Int = 0
    /// Results load their values this many at a time, when the first of each batch is touched.
    public var fetchBatchSize: Int?
    /// Whether the context's unsaved inserts, updates and deletes count (default true).
    public var includesPendingChanges = true
    /// Relationships whose objects the fetch loads with its results (SwiftData's and Core
    /// Data's prefetching): the objects every result's `\.owner` or `\.children` holds,
    /// read from the store together, so that reading them later makes no fault, and
    /// touches the store no more. Each key path must name a relationship of `Result`; one
    /// that does not is refused by the fetch, naming it.
    public var relationshipKeyPathsForPrefetching: [PartialKeyPath<Result>] = []
    /// More relationships to prefetch, by name (for run-time entities and the command
    /// line), after ``relationshipKeyPathsForPrefetching``. A dotted path prefetches hop by
    /// hop: `"owner.pets"` loads each result's owner, then each owner's pets.
    public var relationshipNamesForPrefetching: [String] = []
    /// Why ``predicate`` is evaluated on objects rather than on stored records (nil if it
    /// is not: no typed predicate, or one that converted).
    public private(set) var inMemoryReason: String?
    /// ``predicate`` as a ``FetchPredicate``, when it converted.
    private(set) var converted: FetchPredicate?
    /// ``predicate``, evaluated on objects, when it did not convert.
    private(set) var objectFilter: ((Result) throws -> Bool)?

    /// A query for the objects of `type` matching `predicate` (all, if nil), in the order
    /// of `sortBy` (ID order, if empty), at most `fetchLimit` of them.
    public init(_ type: Result.Type = Result.self, predicate: Foundation.Predicate<Result>? = nil,
                sortBy: [Foundation.SortDescriptor<Result>] = [], fetchLimit: Int? = nil) {
        entityName = type.entityName
        self.sortBy = sortBy
        self.fetchLimit = fetchLimit
        self.predicate = predicate
        compile()
    }

    /// A query with a predicate in NSPredicate format syntax, whose `%@` take plain Swift
    /// values (a string, a number, a date, an object's ID, nil, an array of those for `IN`:
    /// see ``FetchPredicate/init(format:_:_:)``) and `%K` key path strings, in the order of
    /// `sortBy` (ID order, if empty), at most `fetchLimit` of them. Throws for a format that
    /// does not parse, naming the column.
    ///
    /// ```swift
    /// let query = try FetchQuery(Person.self, format: "username IN %@ AND age >= %@", ["ann", "bo"], 18)
    /// ```
    public init(_ type: Result.Type = Result.self, format: String, _ arguments: any PredicateArgument...,
                sortBy: [Foundation.SortDescriptor<Result>] = [], fetchLimit: Int? = nil) throws {
        self.init(type, sortBy: sortBy, fetchLimit: fetchLimit)
        fetchPredicate = try FetchPredicate(format: format, plain: arguments)
    }

    /// A query with a ``FetchPredicate`` and ``SortKey``s built by name.
    public init(_ type: Result.Type = Result.self, fetchPredicate: FetchPredicate?, sortKeys: [SortKey] = []) {
        self.init(type)
        self.fetchPredicate = fetchPredicate
        self.sortKeys = sortKeys
    }

    /// A query for an entity by name (the dynamic API).
    public init(entityName: String, fetchPredicate: FetchPredicate? = nil, sortKeys: [SortKey] = []) {
        self.entityName = entityName
        sortBy = []
        self.fetchPredicate = fetchPredicate
        self.sortKeys = sortKeys
    }

    /// The query in the order of `descriptors`, before its ``sortKeys``.
    public func sorted(by descriptors: [Foundation.SortDescriptor<Result>]) -> FetchQuery {
        var query = self
        query.sortBy = descriptors
        return query
    }

    /// Converts ``predicate`` for the store, or keeps it for objects.
    private mutating func compile() {
        (converted, objectFilter, inMemoryReason) = (nil, nil, nil)
        guard let predicate else { return }
        do {
            converted = try convertBool(predicate.expression)
        } catch {
            inMemoryReason = (error as? UnsupportedPredicate)?.description ?? "\(error)"
            objectFilter = { try predicate.evaluate($0) }
        }
    }

    /// What the store tests: ``fetchPredicate`` and the converted ``predicate``.
    var storedPredicate: FetchPredicate? {
        switch (fetchPredicate, converted) {
        case (nil, nil): nil
        case (let one?, nil), (nil, let one?): one
        case (let first?, let second?): .and([first, second])
        }
    }

    /// The query with ``sortBy`` resolved into ``sortKeys`` (what a fetch runs): throws
    /// for a descriptor that reads no attribute Cairn can sort by, naming it.
    /// The query with ``sortBy`` resolved into ``sortKeys`` and ``relationshipKeyPathsForPrefetching``
    /// into ``relationshipNamesForPrefetching`` (what a fetch runs): throws for a
    /// descriptor that reads no attribute Cairn can sort by, or a key path that names no
    /// relationship, naming it.
    func resolved() throws -> FetchQuery {
        guard !sortBy.isEmpty || !relationshipKeyPathsForPrefetching.isEmpty else { return self }
        var query = self
        query.sortKeys = try sortBy.enumerated().map { try SortKey($1, index: $0) } + sortKeys
        query.sortBy = []
        query.relationshipNamesForPrefetching = try relationshipKeyPathsForPrefetching.enumerated().map { index, keyPath in
            guard let name = KeyPathNames.relationship(of: keyPath, in: Result.self) else {
                throw CairnError(.invalidArgument, "relationshipKeyPathsForPrefetching[\(index)] of \(Result.entityName) reads "
                                 + "\(KeyPathNames.spelled(keyPath)), which is no relationship of \(Result.entityName); "
                                 + "name a relationship, or a path of them with relationshipNamesForPrefetching")
            }
            return name
        } + relationshipNamesForPrefetching
        query.relationshipKeyPathsForPrefetching = []
        return query
    }
}

/// How a fetch found its candidates (``Context/explain(_:)``).
public struct QueryPlan: Sendable, Equatable, CustomStringConvertible {
    /// How the candidates were found.
    public enum Access: Sendable, Equatable {
        /// Every record of the entity was read.
        case fullScan
        /// Records came from the index on `attribute`.
        case index(attribute: String, condition: IndexLookup)
    }

    /// What an index lookup asked the index for.
    public enum IndexLookup: Sendable, Hashable, CustomStringConvertible {
        /// Values equal to any of these (`==`, `IN`).
        case equal([Value])
        /// Values in a range; a nil bound is open.
        case range(lower: Value?, lowerInclusive: Bool, upper: Value?, upperInclusive: Bool)

        package init(_ condition: IndexCondition) {
            switch condition {
            case .equal(let values): self = .equal(values)
            case .range(let lower, let lowerInclusive, let upper, let upperInclusive):
                self = .range(lower: lower, lowerInclusive: lowerInclusive, upper: upper, upperInclusive: upperInclusive)
            }
        }

        /// The condition the store's index runs.
        package var condition: IndexCondition {
            switch self {
            case .equal(let values): .equal(values)
            case .range(let lower, let lowerInclusive, let upper, let upperInclusive):
                .range(lower: lower, lowerInclusive: lowerInclusive, upper: upper, upperInclusive: upperInclusive)
            }
        }

        /// `= values` or the range in interval notation.
        public var description: String {
            switch self {
            case .equal(let values): return "= " + values.map { "\($0)" }.joined(separator: ", ")
            case .range(let lower, let lowerInclusive, let upper, let upperInclusive):
                return (lowerInclusive ? "[" : "(") + (lower.map { "\($0)" } ?? "-∞") + ", "
                    + (upper.map { "\($0)" } ?? "∞") + (upperInclusive ? "]" : ")")
            }
        }
    }

    /// The name of the entity fetched.
    public var entity: String
    /// Whether the candidates came from an index or from a scan of every record.
    public var access: Access
    /// The predicate each candidate is tested against (the whole of it, an index used or
    /// not); nil when the query has none.
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

/// What ``Context/aggregate(_:for:)`` computes over the objects a query matches: their
/// count, or the least, greatest, sum or mean of one attribute's values, the attribute
/// named by key path (`age`, or `owner.age` through a to-one relationship).
public enum Aggregate: Sendable, Hashable {
    /// How many objects match.
    case count
    /// The least of the attribute's values.
    case min(String)
    /// The greatest of the attribute's values.
    case max(String)
    /// The sum of a numeric attribute's values: `.int64` for integers (`.double` past its
    /// range), `.double` with a real among them, `.decimal` with a decimal.
    case sum(String)
    /// The mean of a numeric attribute's values: `.double`, or `.decimal` with a decimal
    /// among them.
    case average(String)
}
