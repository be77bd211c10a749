import Dispatch

/// The masked CRC-32C of a large buffer (a snapshot's index, an attribute index block),
/// taken in parts on several threads and combined (``CRC32C/combine(_:_:secondLength:)``):
/// an open checks megabytes of index before it trusts them, and one core checksums about
/// three bytes a cycle.
enum ChecksumInParts {
    /// Each part at least this long; a shorter buffer is checksummed on the calling thread.
    static let minimumPerPart = 1 << 20

    static func masked(_ bytes: UnsafeRawBufferPointer, parts: Int = Processors.count) -> UInt32 {
        let parts = min(parts, bytes.count / minimumPerPart)
        guard parts > 1 else { return CRC32C.masked(bytes) }
        let length = (bytes.count + parts - 1) / parts
        let bounds = (0..<parts).map { part in (part * length)..<min(bytes.count, (part + 1) * length) }
        let crcs = PerRun<UInt32>(count: parts, initial: 0)
        let memory = ReadOnlyBytes(bytes)
        DispatchQueue.concurrentPerform(iterations: parts) { part in
            crcs[part] = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: memory.bytes[bounds[part]]))
        }
        var crc = crcs[0]
        for part in 1..<parts { crc = CRC32C.combine(crc, crcs[part], secondLength: bounds[part].count) }
        return CRC32C.mask(crc)
    }
}

/// Bytes read by several threads while their owner waits for them (the caller keeps the
/// memory alive and unchanged for the call).
struct ReadOnlyBytes: @unchecked Sendable {
    // @unchecked: the pointer is only read, by the threads of one `concurrentPerform`,
    // while the caller that owns the memory waits for them to finish.
    let bytes: UnsafeRawBufferPointer
    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }
}
