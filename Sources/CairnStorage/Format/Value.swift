import Foundation

/// One stored attribute value (FORMAT.md §2 "Values").
///
/// Every attribute type the object layer persists has a case; a record is a list of
/// values in the order of its entity's attributes and relationships.
public enum Value: Hashable, Sendable {
    /// No value: nil, for an optional attribute or an empty to-one relationship.
    case null
    /// A Boolean.
    case bool(Bool)
    /// An 8-bit signed integer.
    case int8(Int8)
    /// A 16-bit signed integer.
    case int16(Int16)
    /// A 32-bit signed integer.
    case int32(Int32)
    /// A 64-bit signed integer (an `Int` attribute's too).
    case int64(Int64)
    /// A 32-bit floating-point number.
    case float(Float)
    /// A 64-bit floating-point number.
    case double(Double)
    /// A string, stored as UTF-8.
    case string(String)
    /// Binary data.
    case bytes(Data)
    /// A date, stored exactly: its seconds since 2001 as a 64-bit floating-point number.
    case date(Date)
    /// A UUID.
    case uuid(UUID)
    /// A URL, stored as its absolute string.
    case url(URL)
    /// A decimal number, stored as its text.
    case decimal(Decimal)
    /// A `Codable` value archived to bytes by the object layer.
    case archived(Data)
    /// A to-one relationship: the target's record ID.
    case reference(UInt64)
    /// A to-many relationship: the targets' record IDs, in order.
    case references([UInt64])

    /// The one-byte type tag written before the value (FORMAT.md §2).
    package enum Tag: UInt8, Sendable, CaseIterable {
        case null = 0, boolFalse = 1, boolTrue = 2, int8 = 3, int16 = 4, int32 = 5, int64 = 6
        case float = 7, double = 8, string = 9, bytes = 10, date = 11, uuid = 12, url = 13
        case decimal = 14, archived = 15, reference = 16, references = 17
    }

    /// Whether the value is ``null``.
    @inlinable public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// The value of an integer of any width (not a boolean, real or decimal); nil for others.
    @inline(__always) @inlinable public var integer: Int64? {
        switch self {
        case .int64(let v): return v
        case .int32(let v): return Int64(v)
        case .int16(let v): return Int64(v)
        case .int8(let v): return Int64(v)
        default: return nil
        }
    }

    /// An integer value's number and type (nil for any other value): the form in which
    /// index runs and columns of integers keep their values.
    package var integerAndWidth: (key: Int64, width: AttributeType)? {
        switch self {
        case .int8(let v): return (Int64(v), .int8)
        case .int16(let v): return (Int64(v), .int16)
        case .int32(let v): return (Int64(v), .int32)
        case .int64(let v): return (v, .int64)
        default: return nil
        }
    }

    /// The integer value of type `width` holding `key` (``integerAndWidth``'s inverse;
    /// any type but the three narrower integers gives an `int64`).
    package init(integer key: Int64, width: AttributeType) {
        switch width {
        case .int8: self = .int8(Int8(truncatingIfNeeded: key))
        case .int16: self = .int16(Int16(truncatingIfNeeded: key))
        case .int32: self = .int32(Int32(truncatingIfNeeded: key))
        default: self = .int64(key)
        }
    }

    /// One bit for the value's kind (`1 << tag`, both booleans as `boolFalse`), read
    /// without copying the payload: schema checks compare it with
    /// ``AttributeType/acceptedKinds``.
    @inline(__always) package var kindBit: UInt32 {
        let tag: Tag
        switch self {
        case .null: tag = .null
        case .bool: tag = .boolFalse
        case .int8: tag = .int8
        case .int16: tag = .int16
        case .int32: tag = .int32
        case .int64: tag = .int64
        case .float: tag = .float
        case .double: tag = .double
        case .string: tag = .string
        case .bytes: tag = .bytes
        case .date: tag = .date
        case .uuid: tag = .uuid
        case .url: tag = .url
        case .decimal: tag = .decimal
        case .archived: tag = .archived
        case .reference: tag = .reference
        case .references: tag = .references
        }
        return 1 << UInt32(tag.rawValue)
    }

    package static let nullKindBit: UInt32 = 1 << UInt32(Tag.null.rawValue)

    /// The kinds ``checkLimits(_:)`` measures (the others always fit).
    package static let limitedKinds: UInt32 = 1 << UInt32(Tag.string.rawValue) | 1 << UInt32(Tag.bytes.rawValue)
        | 1 << UInt32(Tag.archived.rawValue) | 1 << UInt32(Tag.url.rawValue) | 1 << UInt32(Tag.decimal.rawValue)
        | 1 << UInt32(Tag.references.rawValue)  // (an expression of constants: no lazy initializer to check at each use)

    /// The kinds that name records (to-one and to-many references).
    package static let referenceKinds: UInt32 = 1 << UInt32(Tag.reference.rawValue) | 1 << UInt32(Tag.references.rawValue)

    /// The kinds whose payload holds no reference (plain bits: copying one is copying
    /// its bytes).
    package static let trivialKinds: UInt32 = [Tag.null, .boolFalse, .int8, .int16, .int32, .int64, .float, .double, .date, .reference]
        .reduce(0) { $0 | 1 << UInt32($1.rawValue) }

    /// Whether no value of `values` holds a reference (numbers, booleans, dates, nil,
    /// to-one IDs): copying or dropping such values is copying or dropping their bytes.
    @inline(__always) package static func areTrivial(_ values: UnsafeBufferPointer<Value>) -> Bool {
        values.indices.allSatisfy { values[$0].kindBit & Value.trivialKinds != 0 }
    }

    /// A copy of `values` in storage of its own (the loop copies each value with code
    /// specialized for `Value`; copying a shared array on write goes through the generic
    /// value witnesses, several times slower).
    package static func uniqueCopy(of values: [Value]) -> [Value] {
        let count = values.count
        let trivial = values.withUnsafeBufferPointer(areTrivial)
        if trivial && count > 0 {
            // No value holds a reference (numbers, booleans, dates, nil, to-one IDs): a
            // copy of such a value is a copy of its bytes, the whole array in one move.
            // (Storage made by reserve and append, which are specialized for `Value`;
            // `init(repeating:count:)` asked the runtime for the array's metadata.)
            var copy: [Value] = []
            copy.reserveCapacity(count)
            for _ in 0..<count { copy.append(.null) }
            copy.withUnsafeMutableBufferPointer { target in
                values.withUnsafeBufferPointer { source in
                    if let to = target.baseAddress, let from = source.baseAddress {
                        UnsafeMutableRawPointer(to).copyMemory(from: from, byteCount: count * MemoryLayout<Value>.stride)
                    }
                }
            }
            return copy
        }
        var copy: [Value] = []
        copy.reserveCapacity(values.count)
        for value in values { copy.append(value) }
        return copy
    }

    /// Writes `source` over `target`, which has as many values, in `target`'s own storage
    /// (one uniqueness check for the array, not one per slot); when neither holds a
    /// reference, as one copy of bytes.
    package static func overwrite(_ target: inout [Value], with source: [Value]) {
        precondition(target.count == source.count, "overwriting \(target.count) values with \(source.count)")
        target.withUnsafeMutableBufferPointer { values in
            source.withUnsafeBufferPointer { source in
                if let to = values.baseAddress, let from = source.baseAddress,
                   areTrivial(UnsafeBufferPointer(values)), areTrivial(source) {
                    // Nothing to release or retain: the source's bytes over the target's.
                    UnsafeMutableRawPointer(to).copyMemory(from: from, byteCount: source.count * MemoryLayout<Value>.stride)
                } else {
                    for slot in source.indices { values[slot] = source[slot] }
                }
            }
        }
    }

    /// Whether writing `b` over `a` would leave what is stored unchanged: the check Cairn
    /// makes on every write and every changed-key test at save. `==`, except that reals
    /// and dates are compared by
    /// their bits (a NaN is the same as itself; -0.0 is not 0.0) and strings by their
    /// UTF-8 (a decomposed "é" is not a composed one): with `==` alone, a write of -0.0
    /// over 0.0 or of another spelling of a string was taken for no change and dropped.
    /// (Decimals and URLs are compared by `==`, which for every pair FormatTests tries
    /// also means encoded alike: a decimal is written as its description, which is
    /// normalized, and a URL as its absolute string.)
    /// Integers, booleans and references are compared without copying either value
    /// first (the synthesized `==` copies both through outlined value witnesses).
    @inline(__always) @inlinable public static func same(_ a: Value, _ b: Value) -> Bool {
        switch a {
        case .int64(let x): if case .int64(let y) = b { return x == y } else { return false }
        case .double(let x): if case .double(let y) = b { return x.bitPattern == y.bitPattern } else { return false }
        case .float(let x): if case .float(let y) = b { return x.bitPattern == y.bitPattern } else { return false }
        case .int32(let x): if case .int32(let y) = b { return x == y } else { return false }
        case .bool(let x): if case .bool(let y) = b { return x == y } else { return false }
        case .reference(let x): if case .reference(let y) = b { return x == y } else { return false }
        case .null: return b.isNull
        case .date(let x):
            guard case .date(let y) = b else { return false }
            return x.timeIntervalSinceReferenceDate.bitPattern == y.timeIntervalSinceReferenceDate.bitPattern
        case .string(let x):
            guard case .string(let y) = b else { return false }
            return sameUTF8(x, y)
        default: return a == b
        }
    }

    /// Whether two strings hold the same UTF-8 bytes (`==` takes canonically equivalent
    /// spellings for equal).
    @usableFromInline static func sameUTF8(_ x: String, _ y: String) -> Bool {
        let (p, q) = (x.utf8, y.utf8)
        guard p.count == q.count else { return false }
        return p.withContiguousStorageIfAvailable { p in
            q.withContiguousStorageIfAvailable { q in
                guard let a = p.baseAddress, let b = q.baseAddress else { return p.count == q.count }
                return memcmp(a, b, p.count) == 0
            }
        }.flatMap { $0 } ?? p.elementsEqual(q)
    }

    /// Whether `b` stands for `a` exactly: `==`, and the same bytes once encoded. Kinds
    /// whose equal values can differ (0.0 and -0.0; two spellings of one string) are
    /// never interchangeable, so nothing is lost by taking one for the other.
    package static func interchangeable(_ a: Value, _ b: Value) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.bool(let x), .bool(let y)): return x == y
        case (.int8(let x), .int8(let y)): return x == y
        case (.int16(let x), .int16(let y)): return x == y
        case (.int32(let x), .int32(let y)): return x == y
        case (.int64(let x), .int64(let y)): return x == y
        case (.float(let x), .float(let y)): return x.bitPattern == y.bitPattern
        case (.double(let x), .double(let y)): return x.bitPattern == y.bitPattern
        case (.reference(let x), .reference(let y)): return x == y
        case (.references(let x), .references(let y)): return x == y
        default: return false
        }
    }

    /// `a == b` for two records' values, each pair compared by ``same(_:_:)`` in place (the
    /// arrays' `==` copies every value it compares through outlined value witnesses). Arrays
    /// sharing storage are equal without a look at their values, as with `==`.
    package static func sameValues(_ a: [Value], _ b: [Value]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBufferPointer { x in
            b.withUnsafeBufferPointer { y in
                if x.baseAddress == y.baseAddress { return true }
                for index in x.indices where !same(x[index], y[index]) { return false }
                return true
            }
        }
    }

    /// Throws `.tooLarge` if the value exceeds what a reader accepts (``FormatLimits``), so
    /// that writers never produce a file their own reader refuses.
    package func checkLimits(_ what: @autoclosure () -> String = "value") throws {
        let size: Int, limit: Int
        switch self {
        case .string(let text): (size, limit) = (text.utf8.count, FormatLimits.maxValueBytes)
        case .bytes(let data), .archived(let data): (size, limit) = (data.count, FormatLimits.maxValueBytes)
        // A reader takes a URL or decimal only in the text a writer writes for it, which must
        // read back as itself (FORMAT.md §2.1): one that does not is refused here.
        case .url(let url):
            let text = url.absoluteString
            guard ValueText.url(text) != nil else {
                throw CairnError(.invalidArgument, "\(what()) is the URL \(String(reflecting: text)), which does not read back as itself")
            }
            (size, limit) = (text.utf8.count, FormatLimits.maxValueBytes)
        case .decimal(let decimal):
            let text = decimal.isNaN ? "NaN" : decimal.description
            guard ValueText.decimal(text) != nil else {
                throw CairnError(.invalidArgument, "\(what()) is the decimal \(decimal), whose text does not read back as itself")
            }
            (size, limit) = (text.utf8.count, FormatLimits.maxDecimalBytes)
        case .references(let ids):
            guard ids.count <= FormatLimits.maxReferences else {
                throw CairnError(.tooLarge, "\(what()) holds \(ids.count) references; the limit is \(FormatLimits.maxReferences)")
            }
            return
        default: return
        }
        guard size <= limit else {
            throw CairnError(.tooLarge, "\(what()) is \(size) bytes; the limit is \(limit)")
        }
    }

    /// The record IDs a relationship value points at (empty for anything else).
    @inlinable public var referencedIDs: [UInt64] {
        switch self {
        case .reference(let raw): return [raw]
        case .references(let raws): return raws
        default: return []
        }
    }
}

extension Value: CustomStringConvertible {
    public var description: String {
        switch self {
        case .null: return "nil"
        case .bool(let v): return String(v)
        case .int8(let v): return String(v)
        case .int16(let v): return String(v)
        case .int32(let v): return String(v)
        case .int64(let v): return String(v)
        case .float(let v): return String(v)
        case .double(let v): return String(v)
        case .string(let v): return String(reflecting: v)
        case .bytes(let v): return "<\(v.count) bytes>"
        case .date(let v):
            // (Foundation's description traps on a date that is NaN or infinite, and a record
            // may hold one: such a date is shown as its seconds since 2001.)
            let t = v.timeIntervalSinceReferenceDate
            return t.isFinite && abs(t) < 9.0e15 ? v.description : "date(\(t) s since 2001)"
        case .uuid(let v): return v.uuidString
        case .url(let v): return v.absoluteString
        case .decimal(let v): return v.description
        case .archived(let v): return "<archived, \(v.count) bytes>"
        case .reference(let v): return "@\(RecordID(rawValue: v))"
        case .references(let v): return "[" + v.map { "@\(RecordID(rawValue: $0))" }.joined(separator: ", ") + "]"
        }
    }
}

// MARK: - Encoding

/// Where values are encoded to: a growing array (``ByteWriter``) or the fixed scratch
/// buffer of a ``RecordEncoder``. The encoding itself is written once, here.
protocol ValueSink {
    mutating func u8(_ value: UInt8)
    mutating func u32(_ value: UInt32)
    mutating func u64(_ value: UInt64)
    mutating func varint(_ value: UInt64)
    mutating func append(_ bytes: UnsafeRawBufferPointer)
}

extension ValueSink {
    /// Appends one value: its tag, then its payload (FORMAT.md §2).
    @inline(__always)
    mutating func encode(_ value: Value) {
        switch value {
        case .null: u8(Value.Tag.null.rawValue)
        case .bool(let v): u8(v ? Value.Tag.boolTrue.rawValue : Value.Tag.boolFalse.rawValue)
        case .int8(let v): u8(Value.Tag.int8.rawValue); u8(UInt8(bitPattern: v))
        case .int16(let v): u8(Value.Tag.int16.rawValue); zigzag(Int64(v))
        case .int32(let v): u8(Value.Tag.int32.rawValue); zigzag(Int64(v))
        case .int64(let v): u8(Value.Tag.int64.rawValue); zigzag(v)
        case .float(let v): u8(Value.Tag.float.rawValue); u32(v.bitPattern)
        case .double(let v): u8(Value.Tag.double.rawValue); u64(v.bitPattern)
        case .string(let v): u8(Value.Tag.string.rawValue); utf8(v)
        case .bytes(let v): u8(Value.Tag.bytes.rawValue); lengthPrefixed(v)
        case .date(let v): u8(Value.Tag.date.rawValue); u64(v.timeIntervalSinceReferenceDate.bitPattern)
        case .uuid(let v):
            u8(Value.Tag.uuid.rawValue)
            withUnsafeBytes(of: v.uuid) { append($0) }
        case .url(let v): u8(Value.Tag.url.rawValue); utf8(v.absoluteString)
        case .decimal(let v): u8(Value.Tag.decimal.rawValue); utf8(v.isNaN ? "NaN" : v.description)
        case .archived(let v): u8(Value.Tag.archived.rawValue); lengthPrefixed(v)
        case .reference(let v): u8(Value.Tag.reference.rawValue); u64(v)
        case .references(let v):
            u8(Value.Tag.references.rawValue)
            varint(UInt64(v.count))
            for id in v { u64(id) }
        }
    }

    /// `data`'s length then its bytes, read in one access: each of Foundation's accesses to
    /// a `Data`'s storage (its count, its bytes) is checked for exclusivity at run time.
    @inline(__always)
    private mutating func lengthPrefixed(_ data: Data) {
        data.withUnsafeBytes { bytes in
            varint(UInt64(bytes.count))
            append(bytes)
        }
    }

    /// Zigzag then LEB128: 0, -1, 1, -2, … map to 0, 1, 2, 3, ….
    @inline(__always)
    mutating func zigzag(_ value: Int64) {
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    /// A varint length, then the UTF-8 bytes.
    @inline(__always)
    mutating func utf8(_ value: String) {
        var copy = value
        copy.withUTF8 { bytes in
            varint(UInt64(bytes.count))
            append(UnsafeRawBufferPointer(bytes))
        }
    }
}

extension ByteWriter: ValueSink {
    /// Appends one value: its tag, then its payload (FORMAT.md §2).
    public mutating func value(_ value: Value) { encode(value) }

    /// A record body: the number of values, then each value (FORMAT.md §2.2).
    public mutating func values(_ values: [Value]) {
        varint(UInt64(values.count))
        for v in values { encode(v) }
    }
}

/// Encodes record bodies through one reusable scratch buffer and copies each out at its
/// exact size: one allocation per body, and no per-byte growth checks of an array.
/// For one committer's use: it is not `Sendable` (its buffer is reused by every call).
final class RecordEncoder {
    // Used by one committer at a time, never reentrantly (encoding calls nothing that
    // encodes), so the runtime's exclusivity checks, a call for each read of these on
    // every record, are skipped.
    @exclusivity(unchecked) private var buffer: UnsafeMutableRawPointer
    @exclusivity(unchecked) private var capacity: Int

    init(capacity: Int = 4096) {
        self.capacity = capacity
        buffer = .allocate(byteCount: capacity, alignment: 8)
    }

    deinit { buffer.deallocate() }

    /// The chunks the bodies this encoder makes are copied into.
    @exclusivity(unchecked) private var bodies = RecordBodies()

    /// The body of a record with `values` (FORMAT.md §2.2), as ``ValueCoding/encode(_:)``.
    /// Throws `.tooLarge`, naming the record as `what` says, for a body larger than a
    /// transaction may be.
    func encode(_ values: [Value], of what: @autoclosure () -> String = "a record") throws -> RecordBody {
        var sink = Sink(base: buffer, capacity: capacity)
        sink.varint(UInt64(values.count))
        for value in values { sink.encode(value) }
        if !sink.overflowed { return bodies.body(copying: UnsafeRawBufferPointer(start: buffer, count: sink.position)) }
        // A body larger than the scratch buffer is measured, then encoded straight into a
        // chunk of its size: a large value is copied once, and the scratch does not grow.
        var counter = Counter()
        counter.varint(UInt64(values.count))
        for value in values { counter.encode(value) }
        guard counter.count <= FormatLimits.maxFramePayload else {
            throw CairnError(.tooLarge, "\(what()) encodes to \(counter.count) bytes, past the \(FormatLimits.maxFramePayload)-byte limit of a transaction")
        }
        // (Room for a varint more than the count: the sink asks for ten bytes before any.)
        return bodies.body(capacity: counter.count + 10) { base in
            var sink = Sink(base: base, capacity: counter.count + 10)
            sink.varint(UInt64(values.count))
            for value in values { sink.encode(value) }
            return sink.position
        }
    }

    /// The body of a kept record (checked when kept) with `written` values, in slot
    /// order, over the slots of `mask`: the record's other values copied as they are
    /// encoded. Nil if it does not fit the scratch buffer (the caller then encodes the
    /// values whole).
    func encode(_ kept: KeptValues, written writtenValues: [Value], mask: UInt64) -> RecordBody? {
        var sink = Sink(base: buffer, capacity: capacity)
        let count = kept.count
        sink.varint(UInt64(count))
        // The record's values between two written ones are copied in one run.
        var slot = 0, next = 0, rest = mask
        while slot < count {
            let written = rest == 0 ? count : min(count, rest.trailingZeroBitCount)
            if slot < written { sink.append(kept.encoded(slot..<written)) }
            guard written < count else { break }
            sink.encode(writtenValues[next])
            next += 1
            rest &= rest &- 1
            slot = written + 1
        }
        guard !sink.overflowed else { return nil }
        return bodies.body(copying: UnsafeRawBufferPointer(start: buffer, count: sink.position))
    }

    /// Counts the bytes an encoding takes.
    private struct Counter: ValueSink {
        var count = 0
        mutating func u8(_ value: UInt8) { count += 1 }
        mutating func u32(_ value: UInt32) { count += 4 }
        mutating func u64(_ value: UInt64) { count += 8 }
        mutating func varint(_ value: UInt64) { count += ByteWriter.varintSize(value) }
        mutating func append(_ bytes: UnsafeRawBufferPointer) { count += bytes.count }
    }

    /// Writes into the scratch buffer; a write that would not fit sets `overflowed` (the
    /// body is then encoded again into a larger buffer).
    private struct Sink: ValueSink {
        let base: UnsafeMutableRawPointer
        let capacity: Int
        var position = 0
        var overflowed = false

        @inline(__always) private mutating func fits(_ count: Int) -> Bool {
            if capacity &- position >= count { return true }
            overflowed = true
            return false
        }

        @inline(__always) mutating func u8(_ value: UInt8) {
            guard fits(1) else { return }
            base.storeBytes(of: value, toByteOffset: position, as: UInt8.self)
            position &+= 1
        }

        @inline(__always) mutating func u32(_ value: UInt32) {
            guard fits(4) else { return }
            base.storeBytes(of: value.littleEndian, toByteOffset: position, as: UInt32.self)
            position &+= 4
        }

        @inline(__always) mutating func u64(_ value: UInt64) {
            guard fits(8) else { return }
            base.storeBytes(of: value.littleEndian, toByteOffset: position, as: UInt64.self)
            position &+= 8
        }

        @inline(__always) mutating func varint(_ value: UInt64) {
            guard fits(10) else { return }
            var v = value
            while v >= 0x80 {
                base.storeBytes(of: UInt8(truncatingIfNeeded: v) | 0x80, toByteOffset: position, as: UInt8.self)
                position &+= 1
                v >>= 7
            }
            base.storeBytes(of: UInt8(v), toByteOffset: position, as: UInt8.self)
            position &+= 1
        }

        @inline(__always) mutating func append(_ bytes: UnsafeRawBufferPointer) {
            guard fits(bytes.count) else { return }
            if let source = bytes.baseAddress { (base + position).copyMemory(from: source, byteCount: bytes.count) }
            position &+= bytes.count
        }
    }
}

@available(*, unavailable)
extension RecordEncoder: Sendable {}

// MARK: - Decoding

extension ByteReader {
    /// Reads one value; any bad tag, length or payload is `.corrupt` with its offset.
    public mutating func value() throws -> Value {
        let start = position
        let raw = try u8("value tag")
        guard let tag = Value.Tag(rawValue: raw) else {
            throw failure("unknown value tag \(raw)", at: start)
        }
        switch tag {
        case .null: return .null
        case .boolFalse: return .bool(false)
        case .boolTrue: return .bool(true)
        case .int8: return .int8(Int8(bitPattern: try u8("int8 value")))
        case .int16:
            let v = try signedVarint("int16 value")
            guard let narrow = Int16(exactly: v) else { throw failure("int16 value \(v) is out of range", at: start) }
            return .int16(narrow)
        case .int32:
            let v = try signedVarint("int32 value")
            guard let narrow = Int32(exactly: v) else { throw failure("int32 value \(v) is out of range", at: start) }
            return .int32(narrow)
        case .int64: return .int64(try signedVarint("int64 value"))
        case .float: return .float(Float(bitPattern: try u32("float value")))
        case .double: return .double(Double(bitPattern: try u64("double value")))
        case .string: return .string(try string("string value"))
        case .bytes:
            let length = try count("binary value length", maximum: FormatLimits.maxValueBytes)
            return .bytes(Data(try slice(length, "binary value")))
        case .date: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try u64("date value"))))
        case .uuid:
            let raw = try slice(16, "UUID value")
            var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &uuid) { $0.copyMemory(from: raw) }
            return .uuid(UUID(uuid: uuid))
        case .url:
            let text = try string("URL value")
            guard let url = ValueText.url(text) else {
                throw failure("URL value \(String(reflecting: text)) is not a URL as written (it does not read back as itself)", at: start)
            }
            return .url(url)
        case .decimal:
            let text = try string("decimal value", maximum: FormatLimits.maxDecimalBytes)
            guard let decimal = ValueText.decimal(text) else {
                throw failure("decimal value \(String(reflecting: text)) is not a decimal as written", at: start)
            }
            return .decimal(decimal)
        case .archived:
            let length = try count("archived value length", maximum: FormatLimits.maxValueBytes)
            return .archived(Data(try slice(length, "archived value")))
        case .reference: return .reference(try u64("reference"))
        case .references:
            let count = try count("reference count", maximum: FormatLimits.maxReferences, minimumItemSize: 8)
            var ids = [UInt64]()
            ids.reserveCapacity(count)
            for _ in 0..<count { ids.append(try u64("reference")) }
            return .references(ids)
        }
    }

    /// The next value: an int64 or another common kind read in place, anything else by
    /// ``value()`` (which says what is wrong with it).
    @inline(__always) package mutating func nextValue() throws -> Value {
        if let x = commonInt64() { return .int64(x) }
        return try commonValue() ?? value()
    }

    /// The next value if it is an int64 of at most 9 varint bytes (as ``commonValue()``
    /// reads it), without making a ``Value``; else nil, having read nothing.
    @inline(__always) package mutating func commonInt64() -> Int64? {
        guard let (x, next) = Self.integer(tagged: Value.Tag.int64.rawValue, in: buffer, at: position) else { return nil }
        position = next
        return x
    }

    /// The integer of the value at `at` in `buffer` and the position after it, if the
    /// value's tag is `tag` (one of the varint integers: int16, int32, int64) and its
    /// varint has at most 9 bytes, as ``commonInt64()`` reads it; not checked against the
    /// range of an int16 or int32. Else nil. (A static function of positions, so a caller's
    /// loop keeps them in registers.)
    @inline(__always)
    package static func integer(tagged tag: UInt8, in buffer: UnsafeRawBufferPointer, at start: Int) -> (Int64, Int)? {
        guard start < buffer.count, buffer[start] == tag else { return nil }
        let raw: UInt64, next: Int
        // One or two varint bytes (-64…63, -8192…8191) here; longer ones out of line.
        if start + 1 < buffer.count, buffer[start + 1] < 0x80 {
            raw = UInt64(buffer[start + 1])
            next = start + 2
        } else if start + 2 < buffer.count, buffer[start + 2] < 0x80 {
            raw = UInt64(buffer[start + 1] & 0x7F) | UInt64(buffer[start + 2]) << 7
            next = start + 3
        } else {
            guard let (long, length) = shortVarint(buffer, at: start + 1) else { return nil }
            raw = long
            next = start + 1 + length
        }
        return (Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1))), next)
    }

    /// A varint of at most 9 bytes (63 bits: no overflow to check) at `at`, and its length.
    @inline(never) package static func shortVarint(_ buffer: UnsafeRawBufferPointer, at: Int) -> (UInt64, Int)? {
        if buffer.count - at >= 8 {
            // Eight bytes at once: the first without its top bit ends the varint.
            let word = UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: at, as: UInt64.self))
            let ends = ~word & 0x8080_8080_8080_8080
            if ends != 0 {
                let length = ends.trailingZeroBitCount / 8 + 1
                var raw: UInt64 = 0
                var rest = word
                for i in 0..<length {
                    raw |= (rest & 0x7F) << UInt64(7 * i)
                    rest >>= 8
                }
                return (raw, length)
            }
        }
        var raw: UInt64 = 0
        var shift: UInt64 = 0
        var next = at
        while next < buffer.count, shift < 63 {
            let byte = buffer[next]
            next += 1
            raw |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return (raw, next - at) }
            shift += 7
        }
        return nil
    }

    /// The next value, decoded in place, if it is one of the common kinds — nil, a boolean,
    /// an int64 of at most 9 varint bytes, a double; else nil, having read nothing, and
    /// ``value()`` decodes it (and reports what is wrong with it). Same results as
    /// ``value()`` for every value it decodes.
    @inline(__always) package mutating func commonValue() -> Value? {
        let start = position
        guard start < buffer.count else { return nil }
        switch buffer[start] {
        case Value.Tag.null.rawValue:
            position = start + 1
            return .null
        case Value.Tag.boolFalse.rawValue:
            position = start + 1
            return .bool(false)
        case Value.Tag.boolTrue.rawValue:
            position = start + 1
            return .bool(true)
        case Value.Tag.int64.rawValue:
            guard let x = commonInt64() else { return nil }
            return Value.int64(x)
        case Value.Tag.double.rawValue:
            guard buffer.count - start >= 9 else { return nil }
            position = start + 9
            return .double(Double(bitPattern: UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: start + 1, as: UInt64.self))))
        default:
            return nil
        }
    }

    /// Steps over one value without decoding it: its tag must be known and its payload
    /// must fit, as for ``value()``, but the payload itself is not checked (UTF-8, integer
    /// ranges, whether a URL or decimal parses). For a scan that reads some values of a
    /// record to test it, and decodes the whole record (checking everything) on a match.
    @inline(__always) package mutating func skipValue() throws {
        if let next = Self.skipCommon(buffer, at: position) {
            position = next
            return
        }
        try skipGeneralValue()
    }

    /// Where the value at `at` ends, if it is nil, a boolean, an int64 of at most 9 varint
    /// bytes, or of a fixed size that any bytes decode (a float, double, date, UUID or
    /// reference), and fits; else nil, and ``skipValue()`` steps over it (or says
    /// what is wrong with it). A static function of positions, as ``integer(tagged:in:at:)``.
    @inline(__always) package static func skipCommon(_ buffer: UnsafeRawBufferPointer, at start: Int) -> Int? {
        guard start < buffer.count else { return nil }
        switch buffer[start] {
        case Value.Tag.null.rawValue, Value.Tag.boolFalse.rawValue, Value.Tag.boolTrue.rawValue:
            return start + 1
        case Value.Tag.int64.rawValue:
            if buffer.count - start > 8 {
                // Eight bytes at once: the first without its top bit ends the varint.
                let word = UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: start + 1, as: UInt64.self))
                let ends = ~word & 0x8080_8080_8080_8080
                if ends != 0 { return start + 2 + ends.trailingZeroBitCount / 8 }
            }
            var next = start + 1
            while next < buffer.count, next - start <= 9 {  // up to 9 bytes, as commonValue
                if buffer[next] < 0x80 { return next + 1 }
                next += 1
            }
            return nil
        case Value.Tag.double.rawValue, Value.Tag.date.rawValue, Value.Tag.reference.rawValue:
            return buffer.count - start >= 9 ? start + 9 : nil
        case Value.Tag.float.rawValue:
            return buffer.count - start >= 5 ? start + 5 : nil
        case Value.Tag.uuid.rawValue:
            return buffer.count - start >= 17 ? start + 17 : nil
        default:
            return nil
        }
    }

    /// Where the value at `at` ends, as ``skipValue()`` steps over it; nil where that throws.
    @inline(never) package static func skipAny(_ buffer: UnsafeRawBufferPointer, at start: Int) -> Int? {
        var reader = ByteReader(buffer)
        reader.position = start
        do { try reader.skipValue() } catch { return nil }
        return reader.position
    }

    private mutating func skipGeneralValue() throws {
        let start = position
        let raw = try u8("value tag")
        guard let tag = Value.Tag(rawValue: raw) else {
            throw failure("unknown value tag \(raw)", at: start)
        }
        switch tag {
        case .null, .boolFalse, .boolTrue: return
        case .int8: try skip(1, "int8 value")
        case .int16, .int32, .int64: _ = try varint("integer value")
        case .float: try skip(4, "float value")
        case .double, .date, .reference: try skip(8, "\(tag) value")
        case .uuid: try skip(16, "UUID value")
        case .string, .bytes, .url, .decimal, .archived:
            try skip(try count("\(tag) value length", maximum: FormatLimits.maxValueBytes), "\(tag) value")
        case .references:
            try skip(8 * (try count("reference count", maximum: FormatLimits.maxReferences, minimumItemSize: 8)), "references")
        }
    }

    /// Reads a record body written by ``ByteWriter/values(_:)``.
    public mutating func values() throws -> [Value] {
        let count = try count("value count", maximum: FormatLimits.maxValuesPerRecord)
        var result = [Value]()
        result.reserveCapacity(count)
        for _ in 0..<count { result.append(try value()) }
        return result
    }
}

/// Encodes and decodes record bodies (FORMAT.md §2.2).
package enum ValueCoding {
    package static func encode(_ values: [Value]) -> [UInt8] {
        var writer = ByteWriter(capacity: 16 + values.count * 9)
        writer.values(values)
        return writer.bytes
    }

    /// Decodes a record body; trailing bytes are corruption.
    package static func decode(_ bytes: UnsafeRawBufferPointer, base: Int = 0) throws -> [Value] {
        var values: [Value] = []
        try decode(bytes, base: base, into: &values)
        return values
    }

    /// Decodes a record body into `values`, replacing its contents and reusing its storage
    /// (a scan decodes every record into one buffer and keeps copies of the matches only).
    package static func decode(_ bytes: UnsafeRawBufferPointer, base: Int = 0, into values: inout [Value]) throws {
        var reader = ByteReader(bytes, base: base)
        let count = try reader.count("value count", maximum: FormatLimits.maxValuesPerRecord)
        // An empty array is not emptied: on the shared empty buffer `removeAll(keepingCapacity:)`
        // still checks uniqueness and goes through the library's reallocation path, for
        // each record decoded into a new array.
        if !values.isEmpty { values.removeAll(keepingCapacity: true) }
        values.reserveCapacity(count)
        for _ in 0..<count { values.append(try reader.nextValue()) }
        guard reader.isAtEnd else { throw reader.failure("\(reader.remaining) unexpected bytes after the record's values") }
    }

    package static func decode(_ bytes: [UInt8]) throws -> [Value] {
        try bytes.withUnsafeBytes { try decode($0) }
    }

    /// The value at `slot` of a record body, stepping over the values before it
    /// (``ByteReader/skipValue()``: a long string before it is not made into one); nil if
    /// the body holds fewer values. (The rest of the body is not checked.)
    package static func value(at slot: Int, in bytes: UnsafeRawBufferPointer, base: Int = 0) throws -> Value? {
        var reader = ByteReader(bytes, base: base)
        let count = try reader.count("value count", maximum: FormatLimits.maxValuesPerRecord)
        guard slot >= 0, slot < count else { return nil }
        for _ in 0..<slot { try reader.skipValue() }
        return try reader.nextValue()
    }
}

/// The text forms of URLs and decimals (FORMAT.md §2.1). A stored text is read only if it
/// is the text a writer writes for the value it parses as, so every value reads back, and
/// exports, as the text stored: not a prefix (`12a` as 12) nor a re-encoding (`p`th` as
/// `p%60th`).
package enum ValueText {
    /// The URL of `text`, if Foundation parses it and its `absoluteString` is `text`.
    package static func url(_ text: String) -> URL? {
        guard let url = URL(string: text), url.absoluteString == text else { return nil }
        return url
    }

    /// The decimal of `text`: `NaN`, or the decimal whose `description` is `text`.
    package static func decimal(_ text: String) -> Decimal? {
        if text == "NaN" { return .nan }
        guard text.utf8.count <= FormatLimits.maxDecimalBytes, isNumber(text, exponent: false),
              let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")),
              !decimal.isNaN, decimal.description == text else { return nil }
        return decimal
    }

    /// The decimal of a number written by a person (a JSON number, or such text in a
    /// string): the whole text must be one (`-? digits [. digits] [e [±] digits]`), and its
    /// significant digits at most 38, which a decimal holds exactly.
    package static func decimal(parsing text: String) -> Decimal? {
        if text == "NaN" { return .nan }
        guard text.utf8.count <= FormatLimits.maxDecimalBytes, isNumber(text, exponent: true) else { return nil }
        let mantissa = text.utf8.prefix { $0 != UInt8(ascii: "e") && $0 != UInt8(ascii: "E") }
        let digits = mantissa.filter { $0 >= 0x30 && $0 <= 0x39 }.drop { $0 == 0x30 }
        guard digits.reversed().drop(while: { $0 == 0x30 }).count <= 38,
              let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")), !decimal.isNaN else { return nil }
        return decimal
    }

    /// Whether `text` is `-? digits [. digits]`, with `[e|E [+|-] digits]` if `exponent`.
    static func isNumber(_ text: String, exponent: Bool) -> Bool {
        let bytes = Array(text.utf8)
        var i = 0
        func digits() -> Bool {
            let start = i
            while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 { i += 1 }
            return i > start
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard digits() else { return false }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard digits() else { return false }
        }
        if exponent, i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() else { return false }
        }
        return i == bytes.count
    }
}
