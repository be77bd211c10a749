/// A stored record's body (FORMAT.md §4: a value count, then each value), lent to a reader
/// for the length of one call: a scan or an index walk hands each record it visits to its
/// callback as a `borrowing StoredRecord`, pointing into the mapped snapshot or log.
///
/// It cannot outlive the call. It is not copyable, so a callback can neither store nor
/// return it, and its bytes are not reachable outside the storage layer: above the store,
/// a record is read through these methods only, which decode or step over its values in
/// place and never copy the body.
package struct StoredRecord: ~Copyable {
    /// The body's bytes, valid while the call that lent the record runs.
    let bytes: UnsafeRawBufferPointer

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// Lends the body held in `bytes` (in a test, a body encoded in memory) to `body`.
    package static func lending<R>(_ bytes: [UInt8], _ body: (borrowing StoredRecord) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes { try body(StoredRecord($0)) }
    }

    /// The size of the body in bytes.
    package var byteCount: Int { bytes.count }

    /// Every value of the record, in slot order (checked for framing, not against a schema).
    package func values() throws -> [Value] { try ValueCoding.decode(bytes) }

    /// Decodes every value into `values`, replacing its contents and reusing its storage.
    package func decode(into values: inout [Value]) throws { try ValueCoding.decode(bytes, into: &values) }

    /// The value at `slot`, stepping over the values before it; nil if the record holds
    /// fewer values. (The rest of the body is not checked.)
    package func value(at slot: Int) throws -> Value? { try ValueCoding.value(at: slot, in: bytes) }

    /// The value count, when the body states it in one byte (fewer than 128 values);
    /// nil otherwise, or for an empty body.
    @inline(__always) package var shortValueCount: Int? {
        guard bytes.count > 0, bytes[0] < 0x80 else { return nil }
        return Int(bytes[0])
    }

    /// Where the value at byte offset `at` ends, when it is well framed; nil otherwise.
    @inline(__always) package func end(ofValueAt at: Int) -> Int? {
        ByteReader.skipCommon(bytes, at: at) ?? ByteReader.skipAny(bytes, at: at)
    }

    /// The integer at byte offset `at` and where it ends, when it is stored with `tag` in a
    /// varint of at most 9 bytes; nil otherwise.
    @inline(__always) package func integer(tagged tag: UInt8, at: Int) -> (Int64, Int)? {
        ByteReader.integer(tagged: tag, in: bytes, at: at)
    }

    /// Reads the body value by value from its start: `read` gets a cursor over it that
    /// lives as long as the call, and answers yes or no. (Not generic: it is called across
    /// modules for every record of a scan, where a generic call would not be specialized.)
    @inline(__always) package func reading(_ read: (inout Cursor) throws -> Bool) rethrows -> Bool {
        var cursor = Cursor(reader: ByteReader(bytes))
        return try read(&cursor)
    }

    /// A reading position in a ``StoredRecord``; like the record, not copyable and not
    /// reachable past the call that lends it.
    package struct Cursor: ~Copyable {
        var reader: ByteReader

        /// The value count at the start of the body (at most `maximum`).
        package mutating func valueCount(maximum: Int) throws -> Int { try reader.count("value count", maximum: maximum) }

        /// Steps over the next value.
        @inline(__always) package mutating func skipValue() throws { try reader.skipValue() }

        /// The next value when it is an int64 in its common encoding (the position then
        /// after it); nil, having read nothing, otherwise.
        @inline(__always) package mutating func commonInt64() -> Int64? { reader.commonInt64() }

        /// The next value when it has a common short encoding; nil, having read nothing,
        /// otherwise.
        @inline(__always) package mutating func commonValue() -> Value? { reader.commonValue() }

        /// The next value, in any encoding.
        package mutating func value() throws -> Value { try reader.value() }
    }
}
