/// The encoded values of a record being put (FORMAT.md §2.2): a range of a chunk of memory
/// that the bodies of one save share, so that a save of many records allocates a chunk for
/// many of them rather than an array each (an allocation, and a free when the save is done).
///
/// 16 bytes: a put operation is 24, and an array of operations (deletes too) no larger than
/// that. A body is at most ``FormatLimits/maxFramePayload`` bytes (its encoder refuses a
/// larger one), so its count and its offset in a chunk fit 32 bits.
package struct RecordBody: Sendable, Equatable {
    private let chunk: BodyChunk
    private let offset: UInt32
    private let storedCount: UInt32

    fileprivate init(chunk: BodyChunk, offset: Int, count: Int) {
        self.chunk = chunk
        self.offset = UInt32(truncatingIfNeeded: offset)
        storedCount = UInt32(truncatingIfNeeded: count)
    }

    /// The number of bytes.
    package var count: Int { Int(storedCount) }

    /// A body holding a copy of `bytes` (at most ``FormatLimits/maxFramePayload`` of
    /// them: tests and tools make these), in a chunk of its own.
    package init(_ bytes: [UInt8]) {
        precondition(bytes.count <= FormatLimits.maxFramePayload, "a record body of \(bytes.count) bytes")
        self.init(chunk: bytes.withUnsafeBytes(BodyChunk.init(copying:)), offset: 0, count: bytes.count)
    }

    /// Calls `body` with the bytes.
    package func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try withExtendedLifetime(chunk) {
            try body(UnsafeRawBufferPointer(start: UnsafeRawPointer(chunk.base + Int(offset)), count: count))
        }
    }

    /// The bytes, as an array.
    package var bytes: [UInt8] { withUnsafeBytes { [UInt8]($0) } }

    package static func == (a: RecordBody, b: RecordBody) -> Bool {
        a.count == b.count && a.withUnsafeBytes { a in b.withUnsafeBytes { b in a.elementsEqual(b) } }
    }
}

/// Memory that record bodies are written into one after another (``RecordBodies``).
// @unchecked Sendable: a chunk is written only by the ``RecordBodies`` that made it, and
// only past `used`, beyond every body it handed out; the bytes of a body never change once
// it is handed out, so the bodies read on other threads (a group commit's leader) are
// never written.
final class BodyChunk: @unchecked Sendable {
    let base: UnsafeMutableRawPointer
    let capacity: Int
    var used = 0

    init(capacity: Int) {
        self.capacity = capacity
        base = .allocate(byteCount: max(capacity, 1), alignment: 8)
    }

    /// A chunk of its own for a copy of `bytes`, all used.
    convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(capacity: bytes.count)
        if let source = bytes.baseAddress { base.copyMemory(from: source, byteCount: bytes.count) }
        used = bytes.count
    }

    deinit { base.deallocate() }
}

/// Hands out record bodies copied into chunks of shared memory: a chunk for many small
/// bodies (the first 4 KiB, each next one twice the last, up to 64 KiB: a save of one
/// record takes little); a body larger than a quarter of the largest gets a chunk of its
/// size.
struct RecordBodies {
    static let chunkCapacity = 64 << 10
    private var chunk: BodyChunk?
    private var nextCapacity = 4 << 10

    /// A body holding a copy of `bytes`.
    mutating func body(copying bytes: UnsafeRawBufferPointer) -> RecordBody {
        let count = bytes.count
        guard count <= Self.chunkCapacity / 4 else { return RecordBody(chunk: BodyChunk(copying: bytes), offset: 0, count: count) }
        let current: BodyChunk
        if let chunk, chunk.capacity - chunk.used >= count {
            current = chunk
        } else {
            current = BodyChunk(capacity: max(nextCapacity, count))
            nextCapacity = min(Self.chunkCapacity, nextCapacity * 2)
            chunk = current
        }
        let offset = current.used
        if let source = bytes.baseAddress { (current.base + offset).copyMemory(from: source, byteCount: count) }
        current.used = offset + count
        return RecordBody(chunk: current, offset: offset, count: count)
    }

    /// A body in a chunk of its own with room for `capacity` bytes, of the bytes `write`
    /// writes there (it returns how many).
    mutating func body(capacity: Int, _ write: (UnsafeMutableRawPointer) -> Int) -> RecordBody {
        let own = BodyChunk(capacity: capacity)
        let count = min(capacity, write(own.base))
        own.used = count
        return RecordBody(chunk: own, offset: 0, count: count)
    }
}
