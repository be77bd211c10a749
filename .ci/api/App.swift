// An app's view of Cairn: this file type-checks against `import Cairn` alone, as a module
// outside the package (.ci/public-api.sh). What it names is the public API.
import Cairn
import Foundation

final class Person: ManagedObject {
    @Attribute var username = ""
    @Attribute var age = 0
    @ToMany(inverse: \DVD.owner) var dvds: [DVD]
}

final class DVD: ManagedObject {
    @Attribute var title = ""
    @ToOne var owner: Person?
}

@MainActor
func app() throws {
    let container = try Container(name: "Collection", entities: [Person.self], storage: .inMemory)
    let context = container.mainContext
    let ann = Person(context: context)
    ann.username = "ann"
    try context.save()
    let adults = try context.fetch(Person.self, where: #Predicate { $0.age >= 18 }, sortBy: [SortDescriptor(\.username)])
    let named = try context.fetch(FetchQuery(Person.self, format: "username IN %@", ["ann", "bob"]))
    let owned = try context.fetch(FetchQuery(DVD.self, sortBy: [SortDescriptor(\.title)], fetchLimit: 10))
    var withOwners = FetchQuery(DVD.self)
    withOwners.relationshipKeyPathsForPrefetching = [\.owner]
    withOwners.relationshipNamesForPrefetching = ["owner.dvds"]
    let prefetched = try context.fetch(withOwners)
    _ = (adults, named, owned, prefetched)

    // Maintenance goes through the container.
    let problems: [StoreProblem] = container.verify()
    let result: CompactionResult = try container.compact()
    let statistics: StoreStatistics = container.statistics
    let history: [CommittedTransaction] = try container.history()
    let recovery: RecoveryReport = container.recoveryReport
    _ = (problems, result, statistics, history, recovery)

    // One committed state for a context, and what pins cost.
    try context.setQueryGenerationFrom(.current)
    let token: QueryGenerationToken? = context.queryGenerationToken
    let pinned: [PinnedGeneration] = container.pinnedGenerations
    _ = (token?.sequence, pinned.first?.retainedBytes)
    try context.setQueryGenerationFrom(nil)

    // History: tokens, what changed since, a feed.
    context.transactionAuthor = "app"
    let start: HistoryToken = container.historyToken
    let since: HistoryChanges = try container.changes(since: start)
    let transactions: [HistoryTransaction] = try container.history(after: start)
    let feed: AsyncThrowingStream<HistoryTransaction, any Error> = container.transactions(after: since.token)
    let retention: HistoryRetention = .transactions(100)
    _ = (transactions.first?.updated, feed, retention, CairnError.Code.historyExpired)
}
