import Foundation
import Testing
@testable import Cairn

/// A write a setter refused (it cannot throw) is thrown by the next save, never by an
/// unrelated fetch that would hide it from the save.
@Suite struct RefusedWriteTests {
    @Test func aRefusedSetterIsThrownBySaveNotByAFetch() throws {
        let stack = try Stack(model: try Model(Report.self))
        let context = stack.context()
        let report = Report(context: context)
        report.summary = Summary(mean: 1.5, peak: 2)
        try context.save()
        report.summary = Summary(mean: .nan, peak: 0)  // does not archive: refused
        #expect(try context.fetch(FetchRequest(Report.self)).count == 1, "a fetch does not throw the refused write")
        #expect(try context.count(Report.self) == 1)
        let error = try #require(throws: CairnError.self) { try context.save() }
        #expect(error.message.contains("Report.summary"), "\(error)")
    }

    @Test func aWriteToADeletedObjectIsThrownBySave() throws {
        let stack = try Stack(model: try Model(Report.self))
        let context = stack.context()
        let kept = Report(context: context), gone = Report(context: context)
        try context.save()
        context.delete(gone)
        gone.summary = Summary(mean: 3, peak: 3)
        kept.summary = Summary(mean: 4, peak: 4)
        _ = try context.fetch(FetchRequest(Report.self))
        #expect { try context.save() } throws: { ($0 as? CairnError)?.message.contains("deleted") == true }
        // Rolled back, nothing is outstanding.
        context.rollback()
        try context.save()
    }
}
