import Foundation
import Testing
import Cairn

/// A gauge as version 1 of an app models it.
final class Gauge: ManagedObject {
    @Attribute var label = ""
    @Attribute var reading = 0
}

/// Version 2 of the same entity, without the reading.
final class GaugeWithoutReading: ManagedObject {
    override class var entityName: String { "Gauge" }
    @Attribute var label = ""
}

/// Store maintenance as an app reaches it: through the container, with `import Cairn`
/// alone (no store, no records, no entity numbers).
@Suite struct ContainerMaintenanceTests {
    static func open(_ directory: String, durability: Durability = .durable) throws -> Container {
        try Container(name: "Gauges", entities: [Gauge.self], storage: .onDisk(URL(fileURLWithPath: directory)),
                      durability: durability, compaction: .manual)
    }

    /// History counts each save's inserts, updates and deletes by entity name; statistics
    /// count what is stored; a compaction folds the log (history empties, records stay);
    /// verify finds nothing wrong; the next open reports what it replayed.
    @MainActor @Test func historyStatisticsCompactionAndVerifyThroughTheContainer() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let container = try Self.open(directory)
        let context = container.mainContext
        let a = Gauge(context: context), b = Gauge(context: context), c = Gauge(context: context)
        (a.label, b.label, c.label) = ("a", "b", "c")
        try context.save()
        a.reading = 7
        context.delete(c)
        try context.save()

        let history = try container.history()
        #expect(history.count == 2)
        #expect(history.first?.changes["Gauge"] == CommittedTransaction.Counts(inserted: 3, updated: 0, deleted: 0))
        #expect(history.last?.changes["Gauge"] == CommittedTransaction.Counts(inserted: 0, updated: 1, deleted: 1))
        #expect(history.map(\.sequence) == [history[0].sequence, history[0].sequence + 1])
        #expect(abs(history[0].date.timeIntervalSinceNow) < 600, "the commit's time, not 1970")

        var statistics = container.statistics
        #expect(statistics.recordCounts["Gauge"] == 2)
        #expect(statistics.logBytes > 0 && statistics.logRecordVersions == 4)
        #expect(container.verify().isEmpty)

        let result = try container.compact()
        #expect(result.records == 2)
        #expect(result.bytesAfter > 0)
        #expect(try container.history().isEmpty, "the log was folded into the snapshot")
        statistics = container.statistics
        #expect(statistics.recordCounts["Gauge"] == 2 && statistics.snapshotRecords == 2 && statistics.logRecordVersions == 0)
        #expect(container.verify().isEmpty)

        b.reading = 9
        try context.save()
        try container.close()
        let reopened = try Self.open(directory)
        #expect(reopened.recoveryReport.replayedTransactions == 1)
        #expect(reopened.recoveryReport.truncatedBytes == 0)
        #expect(try reopened.mainContext.fetch(Gauge.self, sortBy: [SortDescriptor(\.label)]).map(\.reading) == [7, 9])
        try reopened.close()
    }

    /// A damaged byte in a stored record is found by verify, which names the file and the
    /// offset; the container still opens (the byte is checked when read), and what reads
    /// the record is refused.
    @MainActor @Test func verifyNamesADamagedRecord() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var container = try Self.open(directory)
        let gauge = Gauge(context: container.mainContext)
        gauge.label = "MARKER-0123456789"
        try container.mainContext.save()
        try container.compact()
        try container.close()

        let snapshot = try #require(try FileManager.default.contentsOfDirectory(atPath: directory).first { $0.hasSuffix(".snapshot") })
        let url = URL(fileURLWithPath: directory).appendingPathComponent(snapshot)
        var bytes = try Data(contentsOf: url)
        let marker = try #require(bytes.firstRange(of: Data("MARKER-0123456789".utf8)))
        bytes[marker.lowerBound + 3] ^= 0x20
        try bytes.write(to: url)

        container = try Self.open(directory)
        let problems = container.verify()
        #expect(problems.count == 1)
        let problem = try #require(problems.first)
        #expect(problem.path?.hasSuffix(snapshot) == true, "\(problem)")
        #expect(problem.offset != nil, "\(problem)")
        #expect(problem.description.contains("checksum"), "\(problem)")
        // A fetch that reads the stored values refuses the damaged one, naming the file.
        let context = container.mainContext
        let error = try #require(throws: CairnError.self) { try context.fetch(Gauge.self, where: #Predicate { $0.label == "x" }) }
        #expect(error.path?.hasSuffix(snapshot) == true, "\(error)")
        // A fault whose record is damaged cannot throw where it is read: the read finds
        // the default value, and the context's next fetch throws the error.
        let faults = try context.fetch(Gauge.self)
        #expect(faults.map(\.label) == [""])
        #expect(throws: CairnError.self) { try context.fetch(Gauge.self) }
        try container.close()
    }

    /// A deferred save is made durable by `sync()`; after `close()`, `sync()` throws `.closed`.
    @MainActor @Test func syncMakesDeferredSavesDurable() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let container = try Self.open(directory, durability: .deferred)
        Gauge(context: container.mainContext).label = "deferred"
        try container.mainContext.save()
        try container.sync()
        try container.close()
        #expect(throws: CairnError.self) { try container.sync() }
        let reopened = try Self.open(directory)
        #expect(try reopened.mainContext.fetch(Gauge.self).map(\.label) == ["deferred"])
        try reopened.close()
    }

    /// A forecast names what a new model version would drop, changes nothing, and
    /// forecasts no step for the model the store already has.
    @MainActor @Test func aMigrationForecastNamesTheDataItWouldDrop() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let url = URL(fileURLWithPath: directory)
        let container = try Self.open(directory)
        for reading in [0, 3, 5] { Gauge(context: container.mainContext).reading = reading }
        try container.mainContext.save()
        try container.close()

        #expect(try !Container.migrationForecast(at: url, entities: [Gauge.self]).isNeeded)
        let forecast = try Container.migrationForecast(at: url, entities: [GaugeWithoutReading.self], modelVersion: 2)
        #expect(forecast.isNeeded)
        #expect(forecast.losses.map { "\($0.entity).\($0.property ?? "*") \($0.records)" } == ["Gauge.reading 3"])

        let reopened = try Self.open(directory)
        #expect(try reopened.mainContext.fetch(Gauge.self).map(\.reading).sorted() == [0, 3, 5], "the forecast changed nothing")
        try reopened.close()
    }

    /// A widget's container: a reader of the store the app's container holds. It opens
    /// while the app writes, sees the app's saved objects, refuses to save, and changes no
    /// file; a reader opened later sees the app's later saves.
    @MainActor @Test func aReadOnlyContainerReadsTheStoreAnotherContainerHolds() throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let app = try Self.open(directory)
        let gauge = Gauge(context: app.mainContext)
        (gauge.label, gauge.reading) = ("boiler", 70)
        try app.mainContext.save()

        let url = URL(fileURLWithPath: directory)
        let widget = try Container(name: "Gauges", entities: [Gauge.self], storage: .onDisk(url), readOnly: true)
        let seen = try widget.mainContext.fetch(FetchQuery<Gauge>())
        #expect(seen.map(\.label) == ["boiler"] && seen.first?.reading == 70)
        seen.first?.reading = 71
        #expect(throws: CairnError.self) { try widget.mainContext.save() }

        gauge.reading = 90
        try app.mainContext.save()
        let later = try Container(name: "Gauges", entities: [Gauge.self], storage: .onDisk(url), readOnly: true)
        #expect(try later.mainContext.fetch(FetchQuery<Gauge>()).first?.reading == 90)
        #expect(throws: CairnError.self) {
            try Container(name: "Gauges", entities: [Gauge.self], storage: .onDisk(url.appendingPathComponent("none")), readOnly: true)
        }
    }
}
