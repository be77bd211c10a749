import Foundation
import Testing
@testable import CairnStorage

/// A transaction's history notes (FORMAT.md §5.1): written after the operations, read back
/// exactly, and every malformed form refused as corrupt with its offset.
@Suite struct TransactionNotesTests {
    let operations: [RecordOperation] = [
        .put(RecordID(entity: 1, serial: 1), body: ValueCoding.encode([.string("a")])),
        .put(RecordID(entity: 1, serial: 2), body: ValueCoding.encode([.string("b")])),
        .delete(RecordID(entity: 1, serial: 3)),
        .delete(RecordID(entity: 1, serial: 4)),
    ]
    let notes = TransactionNotes(author: "sync-é", changes: [.insert, .update(slots: [0, 2, 300]),
                                                           .deleteKeeping(slots: [1, 4], values: [.string("ann"), .null]), .absent])

    func payload(_ notes: TransactionNotes?) -> [UInt8] {
        var writer = ByteWriter()
        TransactionCoding.encode(operations, timestamp: 42, notes: notes, into: &writer)
        #expect(writer.count == TransactionCoding.encodedSize(operations, notes: notes))
        return writer.bytes
    }

    func decode(_ bytes: [UInt8]) throws -> TransactionNotes? {
        var found: TransactionNotes?
        _ = try bytes.withUnsafeBytes { try TransactionCoding.decode($0, base: 1000, notes: { found = $0 }) { _, _ in } }
        return found
    }

    @Test func notesRoundTripAndAreOptional() throws {
        #expect(try decode(payload(notes)) == notes)
        #expect(try decode(payload(nil)) == nil)
        #expect(try decode(payload(TransactionNotes(author: "", changes: [.insert, .update(slots: []), .delete, .delete])))?.author == nil)
    }

    /// The notes' bytes start where the operations end.
    var notesStart: Int { payload(nil).count }

    func refused(_ bytes: [UInt8], _ fragment: String) {
        let error = #expect(throws: CairnError.self) { try decode(bytes) }
        #expect(error?.code == .corrupt)
        #expect(error?.message.contains(fragment) == true, "\(error?.message ?? "")")
        #expect((error?.offset ?? 0) >= 1000, "offsets count from the payload's place in the file")
    }

    @Test func malformedNotesAreCorrupt() throws {
        let good = payload(notes), start = notesStart
        var bytes = good
        bytes[start] = 0x47
        refused(bytes, "history marker")
        refused(Array(good.dropLast()), "needs")
        refused(good + [0], "unexpected bytes after the transaction's history notes")
        // A change that does not fit its operation: the first (a put) said deleted.
        let authorLength = Int(good[start + 1])
        bytes = good
        bytes[start + 2 + authorLength] = 3
        refused(bytes, "is a put")
        // The third (a delete) said inserted.
        bytes = payload(TransactionNotes(author: nil, changes: [.insert, .insert, .insert, .delete]))
        refused(bytes, "is a delete")
        // An unknown kind, slots out of order, an author that is not UTF-8.
        bytes = payload(TransactionNotes(author: nil, changes: [.insert, .insert, .delete, .delete]))
        bytes[notesStart + 2] = 9
        refused(bytes, "unknown history change kind")
        bytes = payload(TransactionNotes(author: nil, changes: [.insert, .update(slots: [1, 2]), .delete, .delete]))
        bytes[notesStart + 6] = 1
        refused(bytes, "out of range or order")
        bytes = payload(TransactionNotes(author: "ab", changes: [.insert, .insert, .delete, .delete]))
        bytes[notesStart + 2] = 0xFF
        refused(bytes, "UTF-8")
        // A delete keeping values: as many values as slots, and at least one slot.
        bytes = payload(TransactionNotes(author: nil, changes: [.insert, .insert, .deleteKeeping(slots: [1, 2], values: [.int64(1), .int64(2)]), .delete]))
        bytes[notesStart + 5] = 1  // the slot count: one slot, two values
        refused(bytes, "kept")
        bytes = payload(TransactionNotes(author: nil, changes: [.insert, .insert, .deleteKeeping(slots: [1], values: [.int64(1)]), .delete]))
        bytes[notesStart + 5] = 0
        refused(bytes, "keeps none")
    }

    /// A history file whose header claims the largest base sequence is corrupt, not a trap.
    @Test func aHistoryFileAtTheEndOfSequencesIsCorrupt() throws {
        let header = FileHeader(kind: .history, storeID: UUID(), fileNumber: 3, baseSequence: .max, createdMilliseconds: 0)
        let bytes = HistoryFileCoding.encode([], header: header)
        let error = #expect(throws: CairnError.self) { _ = try bytes.withUnsafeBytes { try HistoryFileCoding.decode($0) } }
        #expect(error?.code == .corrupt && error?.offset == 40)
    }

    /// Version 6 history files keep each update's and delete's past value, read back when
    /// asked for and skipped otherwise; version 5's layout has none, and a past value's
    /// length past the entry's end is corrupt.
    @Test func pastValuesRoundTripByVersion() throws {
        let before = ValueCoding.encode([.string("old"), .int64(7)])
        let entry = HistoryEntry(sequence: 4, time: 99, author: "a", changes: [
            HistoryChange(id: RecordID(entity: 1, serial: 1), kind: .insert, slots: nil),
            HistoryChange(id: RecordID(entity: 1, serial: 2), kind: .update, slots: [0], before: before),
            HistoryChange(id: RecordID(entity: 1, serial: 3), kind: .delete, slots: nil, keptSlots: [0], keptValues: [.string("x")], before: before),
            HistoryChange(id: RecordID(entity: 1, serial: 4), kind: .update, slots: nil, before: nil),
        ])
        func file(version: UInt32) -> [UInt8] {
            var header = FileHeader(kind: .history, storeID: UUID(), fileNumber: 3, baseSequence: 3, createdMilliseconds: 0)
            header.version = version
            return HistoryFileCoding.encode([entry], header: header)
        }
        let six = file(version: 6)
        #expect(HistoryFileCoding.frameSize(of: entry) == six.count - FileHeader.size)
        #expect(try six.withUnsafeBytes { try HistoryFileCoding.decode($0, pastValues: true) }.entries == [entry])
        let skipped = try six.withUnsafeBytes { try HistoryFileCoding.decode($0) }.entries[0]
        #expect(skipped.changes.allSatisfy { $0.before == nil } && skipped.changes.map(\.kind) == entry.changes.map(\.kind))
        let five = try file(version: 5).withUnsafeBytes { try HistoryFileCoding.decode($0, pastValues: true) }.entries[0]
        #expect(five.changes.allSatisfy { $0.before == nil } && five.changes[2].keptValues == [.string("x")])
        #expect(try six.withUnsafeBytes { try HistoryFileCoding.decode($0, after: 4) }.entries.isEmpty, "entries up to `after` left out")
        // The last past value's length claims one byte more than the entry holds.
        let payload = six.withUnsafeBytes { bytes -> [UInt8] in
            guard case .frame(_, _, let range, _) = LogFrame.parse(bytes, at: FileHeader.size) else { return [] }
            return Array(bytes[range])
        }
        #expect(try payload.withUnsafeBytes { try HistoryFileCoding.entry($0, sequence: 4, base: 0, pastValues: true) } == entry)
        let error = #expect(throws: CairnError.self) {
            _ = try Array(payload.dropLast()).withUnsafeBytes { try HistoryFileCoding.entry($0, sequence: 4, base: 0, pastValues: true) }
        }
        #expect(error?.code == .corrupt)
    }
}
