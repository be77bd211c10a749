import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

final class FixtureReading: ManagedObject {
    @Attribute(indexed: true) var value: Double? = nil
    @Attribute(indexed: true) var when: Date? = nil
    @Attribute var serial: Int64 = 0
}

/// Stores whose stored attribute indexes hold reals and dates with NaNs among them
/// (Tests/Fixtures/format-vN-reals, see its README). Format versions 1 to 3 ordered a
/// NaN among reals by its encoded bytes, which is no order (1.0 before NaN before 0.1,
/// and 0.1 before 1.0), so a lookup in such an index could miss values; from version 4
/// a NaN comes after every other value (FORMAT.md §6.6), and a reader does not use a
/// stored index of reals, decimals or dates written by an earlier version.
@Suite struct RealIndexFixtureTests {
    static let reals: [Double?] = [nil, .nan, 0.1, 1.0, 2.0, -1.0, 0, -0.0, .infinity, 1e300, -.infinity, 1.0]

    /// The value and date of reading `serial` as first saved, and after the change the
    /// recipe makes to every tenth reading.
    static func row(_ serial: Int, changed: Bool) -> (value: Double?, when: Date?) {
        let value = reals[(serial * 7 + (changed ? 1 : 0)) % reals.count]
        let time = reals[(serial * 5 + 3) % reals.count]
        return (value, time.map { Date(timeIntervalSinceReferenceDate: $0) })
    }

    static let count = 80

    /// Writes the fixture with this build's format into `Tests/Fixtures/format-vN-reals`
    /// for the current N: 80 readings saved and compacted, then every tenth one's value
    /// changed in the log. Run it once, before the format version is bumped, and keep its
    /// files: `CAIRN_WRITE_FIXTURE=1 swift test --filter RealIndexFixtureTests`.
    @Test func writeFixture() throws {
        guard ProcessInfo.processInfo.environment["CAIRN_WRITE_FIXTURE"] == "1" else { return }
        let path = FormatFixtureTests.fixtures + "/format-v\(FileHeader.currentVersion)-reals"
        try? FileManager.default.removeItem(atPath: path)
        let model = try Model(FixtureReading.self)
        let coordinator = try Coordinator(path: path, schema: model.schema,
                                          options: StoreOptions(compaction: .manual, preallocationBytes: 4096))
        defer { try? coordinator.close() }
        let context = Context(coordinator: coordinator, model: model)
        var readings: [FixtureReading] = []
        for serial in 0..<Self.count {
            let reading = FixtureReading.create(in: context)
            (reading.value, reading.when) = Self.row(serial, changed: false)
            reading.serial = Int64(serial)
            readings.append(reading)
        }
        try context.save()
        try coordinator.store.compact()
        for (serial, reading) in readings.enumerated() where serial % 10 == 0 {
            reading.value = Self.row(serial, changed: true).value
        }
        try context.save()
    }

    /// Every lookup by equality and by range of the values the readings hold (and a few
    /// they do not) finds exactly the readings a test of each one finds.
    static func check(_ coordinator: Coordinator, model: Model) throws {
        let context = Context(coordinator: coordinator, model: model)
        let readings = try context.fetch(FetchQuery(FixtureReading.self))
        #expect(readings.count == Self.count)
        var rows: [RecordID: [Value]] = [:]
        for reading in readings {
            let serial = Int(reading.serial)
            let expected = Self.row(serial, changed: serial % 10 == 0)
            // (Equal, or both NaN: a write of -0.0 over 0.0 changes nothing, ``Value/same(_:_:)``.)
            func alike(_ a: Double?, _ b: Double?) -> Bool { a == b || (a?.isNaN == true && b?.isNaN == true) }
            #expect(alike(reading.value, expected.value), "reading \(serial)")
            #expect(alike(reading.when?.timeIntervalSinceReferenceDate, expected.when?.timeIntervalSinceReferenceDate), "reading \(serial)")
            rows[reading.objectID.recordID] = [reading.value.map { .double($0) } ?? .null, reading.when.map { .date($0) } ?? .null]
        }
        let entity = try #require(coordinator.entity(named: "FixtureReading")).number
        let targets = [Double.nan, 0.1, 1.0, 2.0, -1.0, 0, .infinity, -.infinity, 1e300, 0.5]
        var mismatches: [String] = []
        for slot in 0..<2 {
            let values: [Value] = targets.map { slot == 0 ? .double($0) : .date(Date(timeIntervalSinceReferenceDate: $0)) }
            var conditions: [IndexCondition] = values.map { .equal([$0]) }
            for lower in values {
                for upper in values { conditions.append(.range(lower: lower, lowerInclusive: true, upper: upper, upperInclusive: false)) }
                conditions.append(.range(lower: lower, lowerInclusive: false, upper: nil, upperInclusive: false))
                conditions.append(.range(lower: nil, lowerInclusive: false, upper: lower, upperInclusive: true))
            }
            for condition in conditions {
                let found = Set(try coordinator.store.indexedIDs(entity: entity, slot: slot, matching: condition))
                let expected = Set(rows.filter { SecondaryIndex.matches($0.value[slot], condition) }.keys)
                if found != expected { mismatches.append("slot \(slot), \(condition): found \(found.count), expected \(expected.count)") }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) lookups wrong, first \(mismatches.prefix(3))")
    }

    @Test(arguments: [3, 4])
    func anOlderStoreOfRealIndexesAnswersLookupsAsATest(version: Int) throws {
        let path = NSTemporaryDirectory() + "cairn-v\(version)-reals-\(UUID().uuidString)"
        try FileManager.default.copyItem(atPath: FormatFixtureTests.fixtures + "/format-v\(version)-reals", toPath: path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let model = try Model(FixtureReading.self)
        let options = StoreOptions(compaction: .manual)
        do {
            let coordinator = try Coordinator(path: path, schema: model.schema, options: options)
            defer { try? coordinator.close() }
            #expect(coordinator.store.statistics.snapshotFormatVersion == UInt32(version))
            // Version 3's stored indexes of a double and a date are not read (nor counted as read).
            #expect(coordinator.store.statistics.storedIndexes == (version < 4 ? 0 : 2))
            #expect(coordinator.store.statistics.storedIndexesInOlderOrder == (version < 4 ? 2 : 0))
            try Self.check(coordinator, model: model)
            #expect(coordinator.store.verify().isEmpty)
            try coordinator.store.compact()
            #expect(coordinator.store.statistics.snapshotFormatVersion == FileHeader.currentVersion)
            #expect(coordinator.store.statistics.storedIndexes == 2 && coordinator.store.statistics.storedIndexesInOlderOrder == 0)
            try Self.check(coordinator, model: model)
            #expect(coordinator.store.verify().isEmpty)
        }
        let coordinator = try Coordinator(path: path, schema: model.schema, options: options)
        defer { try? coordinator.close() }
        try Self.check(coordinator, model: model)
    }
}
