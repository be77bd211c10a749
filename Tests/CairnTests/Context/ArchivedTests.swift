import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A reading archived with the rest of a summary: reals that JSON has no number for.
struct Summary: Codable, Equatable {
    var mean: Double
    var peak: Float
}

/// A value whose archiving fails (its `encode(to:)` throws) once `broken` is set.
struct Fragile: Codable, Equatable {
    var text: String
    var broken = false
    struct Refused: Error, CustomStringConvertible { var description: String { "refused to archive" } }
    func encode(to encoder: Encoder) throws {
        if broken { throw Refused() }
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
    init(text: String, broken: Bool = false) { (self.text, self.broken) = (text, broken) }
    init(from decoder: Decoder) throws { text = try decoder.singleValueContainer().decode(String.self) }
}

final class Report: ManagedObject {
    @Archived var summary = Summary(mean: 0, peak: 0)
    @Archived var fragile = Fragile(text: "first")
}

/// An initial value that does not archive (a NaN): the schema has no default for it.
final class Placeholder: ManagedObject {
    @Archived var summary = Summary(mean: .nan, peak: 0)
    @Archived var kept = Summary(mean: 1, peak: 1)
}

@Suite struct ArchivedTests {
    /// An object saved with an initial value that does not archive is refused for a missing
    /// value, and the message says why the value is missing; one given a value that
    /// archives is saved.
    @Test func anInitialValueThatDoesNotArchiveIsNamedByTheSave() throws {
        let stack = try Stack(model: try Model(Placeholder.self))
        let context = stack.context()
        let placeholder = Placeholder(context: context)
        let error = try #require(throws: CairnError.self) { try context.save() }
        #expect(error.code == .validation && error.message.contains("'summary' is required but has no value")
                && error.message.contains("initial value, Summary, does not archive"), "\(error)")
        #expect(!error.message.contains("kept"))
        placeholder.summary = Summary(mean: 2, peak: 3)
        try context.save()
        let reader = stack.context()
        let read = try #require(try reader.fetch(FetchQuery(Placeholder.self)).first)
        #expect(read.summary == Summary(mean: 2, peak: 3) && read.kept == Summary(mean: 1, peak: 1))
    }

    /// Reals JSON has no number for (NaN, the infinities) do not archive: the write is
    /// refused and the next save throws, naming the property and the encoder's complaint.
    /// (The value had been stored as nil, read back as the initial value, and the save
    /// had failed validation for a value it said was missing.)
    @Test func nonFiniteRealsAreRefusedByTheNextSave() throws {
        let stack = try Stack(model: try Model(Report.self))
        let context = stack.context()
        let report = Report(context: context)
        report.summary = Summary(mean: 1.5, peak: 2)
        try context.save()
        for summary in [Summary(mean: .nan, peak: 0), Summary(mean: 0, peak: -.infinity)] {
            report.summary = summary
            #expect(report.summary == Summary(mean: 1.5, peak: 2))
            let error = try #require(throws: CairnError.self) { try context.save() }
            #expect(error.code == .invalidArgument && error.message.contains("Report.summary"), "\(error)")
        }
        let read = try #require(try stack.context().fetch(FetchQuery(Report.self)).first)
        #expect(read.summary == Summary(mean: 1.5, peak: 2))
    }

    /// A value that does not archive is not written (the old value stays) and the context's
    /// next save throws, naming the entity, the property and the encoder's complaint.
    @Test func aValueThatDoesNotArchiveIsRefusedByTheNextSave() throws {
        let stack = try Stack(model: try Model(Report.self))
        let context = stack.context()
        let report = Report(context: context)
        report.fragile = Fragile(text: "second")
        try context.save()
        report.fragile = Fragile(text: "third", broken: true)
        #expect(report.fragile == Fragile(text: "second"))
        #expect(!context.hasChanges)
        let error = try #require(throws: CairnError.self) { try context.save() }
        #expect(error.code == .invalidArgument)
        #expect("\(error)".contains("Report.fragile") && "\(error)".contains("refused to archive"), "\(error)")
        // The error is thrown once; the store holds the last value that archived.
        try context.save()
        let read = try #require(try stack.context().fetch(FetchQuery(Report.self)).first)
        #expect(read.fragile == Fragile(text: "second"))

        // An object in no context keeps nil instead, which the save that inserts it refuses.
        let detached = Report()
        detached.fragile = Fragile(text: "fourth", broken: true)
        let other = stack.context()
        other.insert(detached)
        let refused = try #require(throws: CairnError.self) { try other.save() }
        #expect(refused.code == .validation && refused.message.contains("fragile"), "\(refused)")
    }
}
