/// Stored record bodies copied out of the store's files into memory the object layer owns,
/// for fetched objects that decode a value when it is read rather than all of them up front.
///
/// A record is kept only when every value is of a kind that decodes without allocating
/// (nil, booleans, integers, reals, dates, UUIDs and to-one references) and fits its
/// entity: the copy is checked as a decode would check it, value by value, so a read of a
/// kept value cannot fail. Its bodies lie back to back in chunks of their own memory,
/// never written again once kept, so a file that changes under the store afterwards cannot
/// change a value already checked.
///
/// Each record is kept as a header (its value count, two unused bytes, its body's length),
/// the byte offset of each value in the body, then the body itself: a value is read in
/// place at its offset, with no pass over the ones before.
package final class RecordArena {
    // (An arena is its context's, used on that context's isolation only: no dynamic
    // exclusivity checks, a runtime call on every record a fault keeps.)
    @exclusivity(unchecked) private var chunk: RecordChunk?
    /// Whether records are kept at all (false: every one is decoded, as before records were
    /// kept; the property tests compare the two).
    @exclusivity(unchecked) package var keeps = true

    package init() {}

    /// A copy of `record` to read later, or nil when it holds a value of a kind that
    /// allocates when decoded, is larger than ``RecordChunk/largestKept``, or does not decode
    /// and fit `entity` (the caller then decodes it as usual, which names what is wrong).
    package func keep(_ record: borrowing StoredRecord, entity: EntityDescription) -> KeptRecord? {
        let bytes = record.bytes
        guard keeps, let count = record.shortValueCount, count > 0 else { return nil }
        let kinds = entity.kinds.stored, required = entity.kinds.required
        let size = 8 + 2 * count + bytes.count
        guard count == kinds.count, size <= RecordChunk.largestKept else { return nil }
        let chunk = room(for: size)
        let start = chunk.used
        let header = chunk.base + start
        let table = header + 8
        var reader = ByteReader(bytes)
        reader.position = 1
        // Whether every value is also of a kind its property requires (a value for a
        // property that must have one): a save's validation then checks only the values
        // written over the record.
        var fitsRequired = true
        let fits = kinds.withUnsafeBufferPointer { kinds in
            for slot in 0..<count {
                let at = reader.position
                // (Nothing is kept until the end: a record refused here leaves the chunk as it was.)
                guard at < bytes.count else { return false }
                let tag = bytes[at]
                guard tag < 32, RecordChunk.inPlaceTags & 1 << UInt32(tag) != 0 else { return false }
                let kind: UInt32 = tag == Value.Tag.boolTrue.rawValue ? 1 << UInt32(Value.Tag.boolFalse.rawValue) : 1 << UInt32(tag)
                guard kind & kinds[slot] != 0 else { return false }
                if slot < required.count, kind & required[slot] == 0 { fitsRequired = false }
                // A common encoding is stepped over (it decodes as framed); any other is
                // decoded, as a read will decode it, and so checked (an int16's range, say).
                if let next = ByteReader.skipCommon(bytes, at: at) {
                    reader.position = next
                } else if (try? reader.nextValue()) == nil {
                    return false
                }
                table.storeBytes(of: UInt16(at).littleEndian, toByteOffset: 2 * slot, as: UInt16.self)
            }
            return true
        }
        guard fits, reader.isAtEnd else { return nil }
        header.storeBytes(of: UInt16(count).littleEndian, as: UInt16.self)
        header.storeBytes(of: fitsRequired ? 1 : 0, toByteOffset: 2, as: UInt8.self)
        header.storeBytes(of: 0, toByteOffset: 3, as: UInt8.self)
        header.storeBytes(of: UInt32(bytes.count).littleEndian, toByteOffset: 4, as: UInt32.self)
        if let source = bytes.baseAddress {
            (table + 2 * count).copyMemory(from: source, byteCount: bytes.count)
        }
        chunk.used += size
        return KeptRecord(owner: chunk, values: KeptValues(UnsafeRawPointer(header)))
    }

    /// A copy of `record`, kept by this arena or another, after the records this arena
    /// kept last: rows kept in one order and read in another (a sorted fetch's) are copied
    /// in the order they will be read, so that reading them goes through memory in order
    /// rather than to a cache miss each. The bytes were checked when first kept, and are
    /// copied as they are. Nil when records are not kept.
    package func copy(_ record: KeptRecord) -> KeptRecord? {
        guard keeps else { return nil }
        let bytes = withExtendedLifetime(record.owner) { record.values.bytes }
        guard let source = bytes.baseAddress, bytes.count <= RecordChunk.largestKept else { return nil }
        let chunk = room(for: bytes.count)
        let header = chunk.base + chunk.used
        header.copyMemory(from: source, byteCount: bytes.count)
        chunk.used += bytes.count
        return KeptRecord(owner: chunk, values: KeptValues(UnsafeRawPointer(header)))
    }

    /// The chunk to keep a record of `size` bytes in (at most ``RecordChunk/largestKept``):
    /// the current one if it has room, else a new one.
    private func room(for size: Int) -> RecordChunk {
        if let chunk, chunk.capacity - chunk.used >= size { return chunk }
        let fresh = RecordChunk()
        chunk = fresh
        return fresh
    }
}

extension RecordArena {
    /// A stored record read for an object: kept here where it can be, decoded and checked
    /// otherwise (which throws for a record that does not decode or fit `entity`).
    package func row(_ record: borrowing StoredRecord, id: RecordID, entity: EntityDescription?) throws -> StoredRow {
        if let entity, let kept = keep(record, entity: entity) { return .kept(kept) }
        return .decoded(try Store.decodeRecord(record, id: id, entity: entity))
    }
}

/// A stored record read for an object, which takes it as its values: decoded, or kept
/// undecoded (``RecordArena``).
package enum StoredRow {
    case decoded([Value])
    case kept(KeptRecord)

    /// The values, decoded.
    package var values: [Value] {
        switch self {
        case .decoded(let values): return values
        case .kept(let record): return withExtendedLifetime(record.owner) { record.values.all() }
        }
    }

    /// The value in `slot` (`.null` past the last), read in place from a kept record.
    package func value(at slot: Int) -> Value {
        switch self {
        case .decoded(let values): return values.indices.contains(slot) ? values[slot] : .null
        case .kept(let record): return withExtendedLifetime(record.owner) { record.values.value(at: slot) }
        }
    }
}

@available(*, unavailable, message: "a record arena belongs to one context")
extension RecordArena: Sendable {}

/// One block of kept record bodies (see ``RecordArena``), freed when the last record kept
/// in it is let go of.
package final class RecordChunk {
    /// The size of a chunk: many records to one allocation, and little memory held by a
    /// chunk that a few objects still read.
    static let capacity = 32 << 10
    /// The largest record kept (its body with its length and offsets): a chunk then holds
    /// at least 16, and a record too large for what is left of one wastes at most that.
    package static let largestKept = capacity / 16

    let base: UnsafeMutableRawPointer
    let capacity = RecordChunk.capacity
    /// Bytes kept so far, from `base`. Only the arena that made the chunk writes here, past
    /// every record it has handed out (on its context's isolation: not checked at run time).
    @exclusivity(unchecked) var used = 0

    init() { base = .allocate(byteCount: RecordChunk.capacity, alignment: 8) }

    deinit { base.deallocate() }

    /// The tags of values that decode without allocating (and so are read in place), as
    /// bits: nil, booleans, integers, reals, dates, UUIDs and to-one references.
    static let inPlaceTags: UInt32 = 1 << UInt32(Value.Tag.null.rawValue) | 1 << UInt32(Value.Tag.boolFalse.rawValue)
        | 1 << UInt32(Value.Tag.boolTrue.rawValue) | 1 << UInt32(Value.Tag.int8.rawValue) | 1 << UInt32(Value.Tag.int16.rawValue)
        | 1 << UInt32(Value.Tag.int32.rawValue) | 1 << UInt32(Value.Tag.int64.rawValue) | 1 << UInt32(Value.Tag.float.rawValue)
        | 1 << UInt32(Value.Tag.double.rawValue) | 1 << UInt32(Value.Tag.date.rawValue) | 1 << UInt32(Value.Tag.uuid.rawValue)
        | 1 << UInt32(Value.Tag.reference.rawValue)  // (constants: no lazy initializer to check at each use)
}

@available(*, unavailable, message: "a record chunk belongs to one context")
extension RecordChunk: Sendable {}

/// A record kept by a ``RecordArena``: its chunk, which holds its bytes, and the values
/// read from them.
package struct KeptRecord {
    /// The chunk that holds the record, to be retained while the values are read.
    package let owner: RecordChunk
    /// The values.
    package let values: KeptValues

    package init(owner: RecordChunk, values: KeptValues) {
        self.owner = owner
        self.values = values
    }
}

/// The values of a ``KeptRecord``, read in place while its chunk is retained: a plain
/// position, which an object reads without retaining the chunk again for each read.
package struct KeptValues {
    /// The record: its value count (UInt16), whether every value fits its property's
    /// required kinds (a byte, 1 or 0), a byte unused, its body's length (UInt32), the
    /// offset of each value in the body (UInt16 each), then the body.
    private let start: UnsafeRawPointer

    fileprivate init(_ start: UnsafeRawPointer) { self.start = start }

    /// The number of values (the entity's attributes and relationships).
    package var count: Int { Int(UInt16(littleEndian: start.loadUnaligned(as: UInt16.self))) }

    /// The whole record as kept: its header, offsets and body (for ``RecordArena/copy(_:)``).
    fileprivate var bytes: UnsafeRawBufferPointer {
        let length = Int(UInt32(littleEndian: start.loadUnaligned(fromByteOffset: 4, as: UInt32.self)))
        return UnsafeRawBufferPointer(start: start, count: 8 + 2 * count + length)
    }

    /// The body, after the header and offsets.
    private var body: UnsafeRawBufferPointer {
        let length = Int(UInt32(littleEndian: start.loadUnaligned(fromByteOffset: 4, as: UInt32.self)))
        return UnsafeRawBufferPointer(start: start + 8 + 2 * count, count: length)
    }

    /// Whether every value is of a kind its property requires (see ``EntityDescription/firstValueOfWrongKind(count:from:onlySlots:value:)``).
    package var fitsRequiredKinds: Bool { start.load(fromByteOffset: 2, as: UInt8.self) != 0 }

    /// The encoded bytes of the values in `slots` (in range, at least one), one after
    /// another as the record holds them: their tags and payloads.
    func encoded(_ slots: Range<Int>) -> UnsafeRawBufferPointer {
        let body = self.body
        func offset(_ slot: Int) -> Int {
            slot < count ? Int(UInt16(littleEndian: start.loadUnaligned(fromByteOffset: 8 + 2 * slot, as: UInt16.self))) : body.count
        }
        return UnsafeRawBufferPointer(rebasing: body[offset(slots.lowerBound)..<offset(slots.upperBound)])
    }

    /// The value in `slot`; `.null` past the last.
    package func value(at slot: Int) -> Value {
        guard slot >= 0, slot < count else { return .null }
        let offset = UInt16(littleEndian: start.loadUnaligned(fromByteOffset: 8 + 2 * slot, as: UInt16.self))
        var reader = ByteReader(body)
        reader.position = Int(offset)
        // (Checked when kept: a value that failed to decode was never kept. Nil stands in
        // for one all the same, rather than a trap.)
        return (try? reader.nextValue()) ?? .null
    }

    /// Every value, in slot order.
    package func all() -> [Value] {
        var reader = ByteReader(body)
        reader.position = 1  // after the value count, one byte (fewer than 128 values)
        var values: [Value] = []
        values.reserveCapacity(count)
        for _ in 0..<count { values.append((try? reader.nextValue()) ?? .null) }
        return values
    }
}
