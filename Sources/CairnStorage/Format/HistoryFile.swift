/// History a compaction keeps (FORMAT.md §14): the history file `NNNNNN.history`, kept
/// with snapshot NNNNNN, holding the transactions before that snapshot that the store's
/// retention keeps.

/// One record a transaction changed, as history reports it.
package struct HistoryChange: Sendable, Equatable {
    package enum Kind: UInt8, Sendable, Equatable { case insert = 1, update = 2, delete = 3 }
    package var id: RecordID
    package var kind: Kind
    /// For an update: the slots (attributes, then relationships) it changed, or nil when
    /// they were not recorded (a frame written without history).
    package var slots: [Int]?
    /// For a delete: the slots whose values it kept (the tombstone), ascending, and those values.
    package var keptSlots: [Int] = []
    package var keptValues: [Value] = []
    /// For an update or a delete: the record's body (FORMAT.md §2.2) before it, which a
    /// read of a past state needs; nil where it was not kept (history written by format
    /// version 5, or read without past values).
    package var before: [UInt8]?

    package init(id: RecordID, kind: Kind, slots: [Int]?, keptSlots: [Int] = [], keptValues: [Value] = [], before: [UInt8]? = nil) {
        (self.id, self.kind, self.slots, self.keptSlots, self.keptValues) = (id, kind, slots, keptSlots, keptValues)
        self.before = before
    }
}

/// One committed transaction, as history reports it.
package struct HistoryEntry: Sendable, Equatable {
    package var sequence: UInt64
    /// When it was committed, in milliseconds since 1970.
    package var time: UInt64
    package var author: String?
    package var changes: [HistoryChange]

    package init(sequence: UInt64, time: UInt64, author: String?, changes: [HistoryChange]) {
        (self.sequence, self.time, self.author, self.changes) = (sequence, time, author, changes)
    }

    /// Per entity number: the records it inserted, updated and deleted.
    package var counts: [UInt16: (inserts: Int, updates: Int, deletes: Int)] {
        var counts: [UInt16: (inserts: Int, updates: Int, deletes: Int)] = [:]
        for change in changes {
            var count = counts[change.id.entity] ?? (0, 0, 0)
            switch change.kind {
            case .insert: count.inserts += 1
            case .update: count.updates += 1
            case .delete: count.deletes += 1
            }
            counts[change.id.entity] = count
        }
        return counts
    }
}

/// A history file's entries: after the 64-byte header (kind `CAIRNHST`, base sequence:
/// the transaction before the first entry), one frame per entry in the log's frame format
/// (§4.1), whose sequence is the transaction's, synced-through the one before it, and
/// whose payload is:
///
/// ```
/// u64     commit time, milliseconds since 1970-01-01 UTC
/// varint  author length a (0: none), a bytes of UTF-8
/// varint  change count
/// each:   u8 kind (1 insert, 2 update, 3 delete), u64 record ID,
///         update only: varint slot flag (0: not recorded, 1: recorded),
///         recorded: varint slot count k, k varints ascending
///         delete only: varint kept slot count k (0: none), k varints ascending, and
///         when k > 0 varint length b, b bytes: the kept values as a record body (§2.2)
///         version 6, update and delete: varint p (0: not kept), p − 1 bytes: the
///         record's body before the change (§2.2)
/// ```
package enum HistoryFileCoding {
    /// The first format version whose history files keep records' values before a change.
    package static let pastValuesVersion: UInt32 = 6

    /// The bytes of a history file holding `entries` (consecutive sequences after `base`),
    /// laid out by the header's version, after the frames `carried` (whole frames of a
    /// history file of that version, copied as they are).
    package static func encode(_ entries: some Collection<HistoryEntry>, header: FileHeader,
                               carrying carried: [UnsafeRawBufferPointer] = []) -> [UInt8] {
        var writer = ByteWriter()
        writer.append(header.encoded())
        for frame in carried { writer.append(frame) }
        for entry in entries { appendFrame(of: entry, version: header.version, to: &writer) }
        return writer.bytes
    }

    /// Appends the frame of `entry`, laid out by format `version`, to `writer`.
    package static func appendFrame(of entry: HistoryEntry, version: UInt32, to writer: inout ByteWriter) {
        let pastValues = version >= pastValuesVersion
        LogFrame.append(to: &writer, sequence: entry.sequence, syncedThrough: entry.sequence - 1) { payload in
            payload.u64(entry.time)
            payload.string(entry.author ?? "")
            payload.varint(UInt64(entry.changes.count))
            for change in entry.changes {
                payload.u8(change.kind.rawValue)
                payload.u64(change.id.rawValue)
                if change.kind == .delete {
                    payload.varint(UInt64(change.keptSlots.count))
                    for slot in change.keptSlots { payload.varint(UInt64(slot)) }
                    if !change.keptSlots.isEmpty { payload.lengthPrefixed(ValueCoding.encode(change.keptValues)) }
                }
                if change.kind == .update {
                    if let slots = change.slots {
                        payload.varint(1)
                        payload.varint(UInt64(slots.count))
                        for slot in slots { payload.varint(UInt64(slot)) }
                    } else {
                        payload.varint(0)
                    }
                }
                if pastValues, change.kind != .insert {
                    if let before = change.before {
                        payload.varint(UInt64(before.count) + 1)
                        payload.append(before)
                    } else {
                        payload.varint(0)
                    }
                }
            }
        }
    }

    /// `entry` as a history file of the current version can hold it: without its past
    /// values when they would make its frame's payload pass `FormatLimits.maxFramePayload`
    /// (the states before it then expire; FORMAT.md §14).
    package static func fitted(_ entry: HistoryEntry) -> HistoryEntry {
        guard frameSize(of: entry) - LogFrame.headerSize > FormatLimits.maxFramePayload else { return entry }
        var fitted = entry
        for index in fitted.changes.indices { fitted.changes[index].before = nil }
        return fitted
    }

    /// The header and entries of a history file's bytes, each checked: the header, every
    /// frame's checksum, sequences one after another from the header's base, and every
    /// payload. Anything else is corrupt (offsets are the file's). Records' values before
    /// each change are checked and skipped unless `pastValues` asks for them. Entries up
    /// to transaction `after` are checked by their frames only, and left out.
    package static func decode(_ bytes: UnsafeRawBufferPointer, pastValues: Bool = false,
                               after: UInt64 = 0) throws -> (header: FileHeader, entries: [HistoryEntry]) {
        let (header, frames) = try frames(bytes)
        var entries: [HistoryEntry] = []
        for frame in frames where frame.sequence > after {
            entries.append(try entry(UnsafeRawBufferPointer(rebasing: bytes[frame.payload]), sequence: frame.sequence,
                                     base: frame.payload.lowerBound, version: header.version, pastValues: pastValues))
        }
        return (header, entries)
    }

    /// A history file's frames, each checked (its checksum, its sequence one after the
    /// header's base, a payload long enough for its time) but not decoded: what a
    /// compaction carries into the next history file as it is.
    package static func frames(_ bytes: UnsafeRawBufferPointer) throws
        -> (header: FileHeader, frames: [(sequence: UInt64, time: UInt64, range: Range<Int>, payload: Range<Int>)]) {
        let header = try FileHeader.decode(bytes, expected: .history)
        guard header.baseSequence < FormatLimits.maxSequence else {
            throw CairnError.corrupt("history base sequence \(header.baseSequence) is out of range", offset: 40)
        }
        var frames: [(sequence: UInt64, time: UInt64, range: Range<Int>, payload: Range<Int>)] = []
        var offset = FileHeader.size
        var expected = header.baseSequence + 1
        while offset < bytes.count {
            switch LogFrame.parse(bytes, at: offset) {
            case .frame(let sequence, _, let payload, let next):
                guard sequence == expected else {
                    throw CairnError.corrupt("history entry for transaction \(sequence) where \(expected) was expected", offset: offset + 8)
                }
                guard payload.count >= 8 else { throw CairnError.corrupt("history entry shorter than its commit time", offset: payload.lowerBound) }
                frames.append((sequence, bytes.loadUnaligned(fromByteOffset: payload.lowerBound, as: UInt64.self).littleEndian, offset..<next, payload))
                expected += 1
                offset = next
            case .unused:
                throw CairnError.corrupt("the history file holds zero bytes before its end", offset: offset)
            case .invalid(let reason):
                throw CairnError.corrupt("history frame damaged (\(reason))", offset: offset)
            }
        }
        return (header, frames)
    }

    /// One entry's payload, laid out by format `version`; records' values before each
    /// change are read when `pastValues` asks for them, else checked and skipped.
    package static func entry(_ payload: UnsafeRawBufferPointer, sequence: UInt64, base: Int,
                              version: UInt32 = FileHeader.currentVersion, pastValues: Bool = false) throws -> HistoryEntry {
        let hasPastValues = version >= pastValuesVersion
        var reader = ByteReader(payload, base: base)
        let time = try reader.u64("commit time")
        let author = try reader.string("transaction author", maximum: FormatLimits.maxNameBytes)
        let count = try reader.count("history change count", maximum: FormatLimits.maxOperations, minimumItemSize: 9)
        var changes: [HistoryChange] = []
        changes.reserveCapacity(count)
        for _ in 0..<count {
            let kindAt = reader.position
            guard let kind = HistoryChange.Kind(rawValue: try reader.u8("history change kind")) else {
                throw reader.failure("unknown history change kind", at: kindAt)
            }
            let id = RecordID(rawValue: try reader.u64("record ID"))
            var change = HistoryChange(id: id, kind: kind, slots: nil)
            if kind == .delete {
                let countAt = reader.position
                if try reader.varint("kept slot count") != 0 {
                    try reader.seek(to: countAt)
                    (change.keptSlots, change.keptValues) = try TransactionNotes.keptValues(&reader)
                }
            }
            if kind == .update {
                let flagAt = reader.position
                switch try reader.varint("changed slots flag") {
                case 0: break
                case 1: change.slots = try TransactionNotes.slotList(&reader, "changed")
                default:
                    throw reader.failure("changed slots flag is neither 0 nor 1", at: flagAt)
                }
            }
            if hasPastValues, kind != .insert {
                let length = try reader.count("past value length", maximum: FormatLimits.maxFramePayload, minimumItemSize: 0)
                if length > 0 {
                    if pastValues {
                        change.before = try reader.bytes(length - 1, "past value")
                    } else {
                        try reader.skip(length - 1, "past value")
                    }
                }
            }
            changes.append(change)
        }
        guard reader.isAtEnd else { throw reader.failure("\(reader.remaining) unexpected bytes after the history entry") }
        return HistoryEntry(sequence: sequence, time: time, author: author.isEmpty ? nil : author, changes: changes)
    }

    /// The bytes an entry's frame takes (for a retention by bytes).
    package static func frameSize(of entry: HistoryEntry) -> Int {
        var size = 8 + ByteWriter.varintSize(UInt64(entry.author?.utf8.count ?? 0)) + (entry.author?.utf8.count ?? 0)
        size += ByteWriter.varintSize(UInt64(entry.changes.count))
        for change in entry.changes {
            size += 9
            if change.kind == .delete {
                size += ByteWriter.varintSize(UInt64(change.keptSlots.count))
                    + change.keptSlots.reduce(0) { $0 + ByteWriter.varintSize(UInt64($1)) }
                if !change.keptSlots.isEmpty {
                    let body = ValueCoding.encode(change.keptValues).count
                    size += ByteWriter.varintSize(UInt64(body)) + body
                }
            }
            if change.kind == .update {
                size += 1
                if let slots = change.slots {
                    size += ByteWriter.varintSize(UInt64(slots.count)) + slots.reduce(0) { $0 + ByteWriter.varintSize(UInt64($1)) }
                }
            }
            if change.kind != .insert {
                let before = change.before.map { $0.count + 1 } ?? 0
                size += ByteWriter.varintSize(UInt64(before)) + max(0, before - 1)
            }
        }
        return LogFrame.frameSize(payloadLength: size)
    }
}
