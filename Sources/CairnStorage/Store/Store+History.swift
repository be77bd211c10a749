/// The transactions still in the log (since the last compaction), for `cairn history`.
extension Store {
    package struct Transaction: Sendable, Equatable {
        package var sequence: UInt64
        /// Milliseconds since 1970.
        package var time: UInt64
        /// Per entity number: (puts of new records, puts of existing records, deletes).
        package var changes: [UInt16: (inserts: Int, updates: Int, deletes: Int)]

        package static func == (a: Transaction, b: Transaction) -> Bool {
            a.sequence == b.sequence && a.time == b.time && a.changes.keys == b.changes.keys
                && a.changes.allSatisfy { key, value in b.changes[key].map { $0 == value } ?? false }
        }
    }

    /// Reads the current log from its start: each transaction with its counts, from its
    /// history (``logHistory(file:end:snapshot:after:)``: the frame's notes, or which
    /// records existed before it). A delete of a record that did not exist is not counted.
    package func history() throws -> [Transaction] {
        guard let (snapshot, file, end) = log.withLock({ writer in
            writer.map { writer in (state.withLock { $0.snapshot }, writer.file, writer.appendOffset) }
        }) else { throw closedError() }
        return try Self.logHistory(file: file, end: end, snapshot: snapshot, after: nil).entries.map {
            Transaction(sequence: $0.sequence, time: $0.time, changes: $0.counts)
        }
    }

    /// Calls `body` with each transaction of the current log, in order, up to the end of
    /// the last one replayed: its sequence number, its payload, the payload's offset in
    /// the log file, and the file's mapping (the payload points into it). The log is
    /// mapped, not read (as recovery maps it): it can be as large as the snapshot, and its
    /// pages are then the file's, which the kernel can drop, not a copy on the heap.
    /// Returns the log's base sequence: its first transaction is the one after it.
    @discardableResult
    package func forEachLogTransaction(_ body: (UInt64, UnsafeRawBufferPointer, Int, UnsafeRawBufferPointer) throws -> Void) throws -> UInt64 {
        // Through the store's own handle: a reader's log may since have been retired by a
        // writer's compaction, which leaves an open file readable.
        guard let (file, end) = log.withLock({ $0.map { ($0.file, $0.appendOffset) } }) else { throw closedError() }
        return try Self.forEachTransaction(in: file, end: end, body)
    }

    /// ``forEachLogTransaction(_:)`` of the log `file`, up to `end`.
    @discardableResult
    static func forEachTransaction(in file: any StorageFile, end: Int,
                                   _ body: (UInt64, UnsafeRawBufferPointer, Int, UnsafeRawBufferPointer) throws -> Void) throws -> UInt64 {
        try forEachTransaction(in: try file.map(), path: file.path, end: end, body)
    }

    /// ``forEachTransaction(in:end:_:)`` of a log mapped already (`path` names it in errors).
    @discardableResult
    static func forEachTransaction(in mapping: FileMapping, path: String, end: Int,
                                   _ body: (UInt64, UnsafeRawBufferPointer, Int, UnsafeRawBufferPointer) throws -> Void) throws -> UInt64 {
        try withExtendedLifetime(mapping) {
            let buffer = UnsafeRawBufferPointer(rebasing: mapping.bytes[..<min(max(0, end), mapping.bytes.count)])
            guard buffer.count >= FileHeader.size else {
                throw CairnError(.corrupt, "the log is shorter than its header", path: path, offset: 0)
            }
            let base: UInt64
            do {
                base = try FileHeader.decode(UnsafeRawBufferPointer(rebasing: buffer[..<FileHeader.size]), expected: .log).baseSequence
            } catch let error as CairnError {
                throw error.located(in: path)
            }
            var offset = FileHeader.size
            // Every frame up to the log's end was valid when replayed or written: one that
            // is not now is damage, reported where it is.
            while offset < buffer.count {
                switch LogFrame.parse(buffer, at: offset) {
                case .frame(let sequence, _, let payload, let next):
                    try body(sequence, UnsafeRawBufferPointer(rebasing: buffer[payload]), payload.lowerBound, buffer)
                    offset = next
                case .unused:
                    throw CairnError(.corrupt, "the log holds zero bytes at offset \(offset), before its last frame ends at \(buffer.count)",
                                     path: path, offset: Int64(offset))
                case .invalid(let reason):
                    throw CairnError(.corrupt, "the log's frame at offset \(offset) is damaged (\(reason))", path: path, offset: Int64(offset))
                }
            }
            return base
        }
    }

    /// The path of log file `number` of this store.
    package func logPath(_ number: UInt64) -> String { joinPath(path, StoreFileName.log(number)) }
}
