/// What a transaction's frame records for history (FORMAT.md §5.1), after its
/// operations, in a store that keeps history: who made it, and for each operation
/// whether it inserted a record, updated one (and which slots — attributes, then
/// relationships — changed), deleted one (keeping the values of some slots, the
/// tombstone a sync needs to find the row to remove), or deleted one that did not exist.
///
/// ```
/// u8      marker 0x48 ("H")
/// varint  author length a (0: none), ≤ FormatLimits.maxNameBytes; a bytes of UTF-8
/// each operation, in order:
///         u8 kind: 1 insert, 2 update, 3 delete, 4 delete of an absent record,
///                  5 delete keeping values
///         update only: varint slot count k; k varints, the changed slots, ascending
///         kind 5 only: varint slot count k ≥ 1; k varints, the kept slots, ascending;
///                  varint length b, b bytes: their values as a record body (§2.2)
/// ```
package struct TransactionNotes: Sendable, Equatable {
    /// What one operation did.
    package enum Change: Sendable, Equatable {
        case insert
        /// The slots whose values differ from the record's before, ascending.
        case update(slots: [Int])
        case delete
        /// A delete of a record that did not exist: it changed nothing.
        case absent
        /// A delete that keeps the values of `slots` (ascending), as they were.
        case deleteKeeping(slots: [Int], values: [Value])
    }

    /// The name the saving context or write gave (Core Data's `transactionAuthor`).
    package var author: String?
    /// One per operation, in the operations' order.
    package var changes: [Change]

    package static let marker: UInt8 = 0x48
    static let insert: UInt8 = 1, update: UInt8 = 2, delete: UInt8 = 3, absent: UInt8 = 4, deleteKeeping: UInt8 = 5

    package init(author: String?, changes: [Change]) {
        self.author = author?.isEmpty == true ? nil : author
        self.changes = changes
    }

    /// The bytes ``encode(into:)`` writes.
    package var encodedSize: Int {
        let authorBytes = author?.utf8.count ?? 0
        var size = 1 + ByteWriter.varintSize(UInt64(authorBytes)) + authorBytes
        for change in changes {
            size += 1
            switch change {
            case .update(let slots):
                size += ByteWriter.varintSize(UInt64(slots.count))
                for slot in slots { size += ByteWriter.varintSize(UInt64(slot)) }
            case .deleteKeeping(let slots, let values):
                size += ByteWriter.varintSize(UInt64(slots.count))
                for slot in slots { size += ByteWriter.varintSize(UInt64(slot)) }
                let body = ValueCoding.encode(values).count
                size += ByteWriter.varintSize(UInt64(body)) + body
            case .insert, .delete, .absent: break
            }
        }
        return size
    }

    package func encode(into writer: inout ByteWriter) {
        writer.u8(Self.marker)
        writer.string(author ?? "")
        for change in changes {
            switch change {
            case .insert: writer.u8(Self.insert)
            case .update(let slots):
                writer.u8(Self.update)
                writer.varint(UInt64(slots.count))
                for slot in slots { writer.varint(UInt64(slot)) }
            case .delete: writer.u8(Self.delete)
            case .absent: writer.u8(Self.absent)
            case .deleteKeeping(let slots, let values):
                writer.u8(Self.deleteKeeping)
                writer.varint(UInt64(slots.count))
                for slot in slots { writer.varint(UInt64(slot)) }
                writer.lengthPrefixed(ValueCoding.encode(values))
            }
        }
    }

    /// Reads notes for `operations` operations from `reader`, positioned at the marker.
    /// Each change must fit its operation: `isPut(i)` says whether operation `i` is a put
    /// (an insert or an update) or a delete.
    package static func decode(_ reader: inout ByteReader, operations: Int, isPut: (Int) -> Bool) throws -> TransactionNotes {
        let start = reader.position
        guard try reader.u8("history marker") == marker else {
            throw reader.failure("unexpected bytes after the last operation (no history marker)", at: start)
        }
        let author = try reader.string("transaction author", maximum: FormatLimits.maxNameBytes)
        var changes: [Change] = []
        changes.reserveCapacity(operations)
        for index in 0..<operations {
            let kindAt = reader.position
            let kind = try reader.u8("history change kind")
            switch kind {
            case insert, update:
                guard isPut(index) else { throw reader.failure("operation \(index) is a delete, but its history says it wrote", at: kindAt) }
                guard kind == update else {
                    changes.append(.insert)
                    continue
                }
                changes.append(.update(slots: try slotList(&reader, "changed")))
            case delete, absent, deleteKeeping:
                guard !isPut(index) else { throw reader.failure("operation \(index) is a put, but its history says it deleted", at: kindAt) }
                guard kind == deleteKeeping else {
                    changes.append(kind == delete ? .delete : .absent)
                    continue
                }
                let (slots, values) = try keptValues(&reader)
                changes.append(.deleteKeeping(slots: slots, values: values))
            default:
                throw reader.failure("unknown history change kind \(kind)", at: kindAt)
            }
        }
        return TransactionNotes(author: author, changes: changes)
    }

    /// A varint count and that many strictly ascending slots, each within the format's limit.
    static func slotList(_ reader: inout ByteReader, _ what: String) throws -> [Int] {
        let count = try reader.count("\(what) slot count", maximum: FormatLimits.maxValuesPerRecord)
        var slots: [Int] = []
        slots.reserveCapacity(count)
        for _ in 0..<count {
            let at = reader.position
            let slot = try reader.varint("\(what) slot")
            guard slot < UInt64(FormatLimits.maxValuesPerRecord), slots.last.map({ slot > UInt64($0) }) ?? true else {
                throw reader.failure("\(what) slot \(slot) is out of range or order", at: at)
            }
            slots.append(Int(slot))
        }
        return slots
    }

    /// A delete's kept slots (at least one) and their values, as many as the slots.
    static func keptValues(_ reader: inout ByteReader) throws -> (slots: [Int], values: [Value]) {
        let start = reader.position
        let slots = try slotList(&reader, "kept")
        guard !slots.isEmpty else { throw reader.failure("a delete keeping values keeps none", at: start) }
        let length = try reader.count("kept values length", maximum: FormatLimits.maxFramePayload)
        let bodyAt = reader.position
        let values: [Value]
        do { values = try ValueCoding.decode(try reader.slice(length, "kept values"), base: reader.base + bodyAt) } catch var error as CairnError {
            error.message = "kept values: " + error.message
            throw error
        }
        guard values.count == slots.count else {
            throw reader.failure("\(values.count) kept values for \(slots.count) kept slots", at: bodyAt)
        }
        return (slots, values)
    }
}
