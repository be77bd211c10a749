/// The transactions still in the log (since the last compaction), for `cairn history`.
extension Store {
    public struct Transaction: Sendable, Equatable {
        public var sequence: UInt64
        /// Milliseconds since 1970.
        public var time: UInt64
        /// Per entity number: (puts of new records, puts of existing records, deletes).
        public var changes: [UInt16: (inserts: Int, updates: Int, deletes: Int)]

        public static func == (a: Transaction, b: Transaction) -> Bool {
            a.sequence == b.sequence && a.time == b.time && a.changes.keys == b.changes.keys
                && a.changes.allSatisfy { key, value in b.changes[key].map { $0 == value } ?? false }
        }
    }

    /// Reads the current log from its start: each transaction with its counts. A put is
    /// an insert if the record did not exist before it (in the snapshot or earlier in
    /// the log), else an update.
    public func history() throws -> [Transaction] {
        let (snapshot, logNumber) = (state.withLock { $0.snapshot }, log.withLock { $0?.manifest.logNumber })
        guard let logNumber else { throw closedError() }
        let path = joinPath(self.path, StoreFileName.log(logNumber))
        let file = try fileSystem.open(path, create: false, truncate: false)
        defer { file.close() }
        let end = log.withLock { $0?.appendOffset ?? 0 }
        // Mapped, not read (as recovery maps it): the log can be as large as the snapshot,
        // and its pages are then the file's, which the kernel can drop, not a copy on the heap.
        let mapping = try file.map()
        var seen = Set<UInt64>()
        var deleted = Set<UInt64>()
        var result: [Transaction] = []
        try withExtendedLifetime(mapping) {
            let buffer = UnsafeRawBufferPointer(rebasing: mapping.bytes[..<min(max(0, end), mapping.bytes.count)])
            var offset = FileHeader.size
            while case .frame(let sequence, _, let payload, let next) = LogFrame.parse(buffer, at: offset) {
                var transaction = Transaction(sequence: sequence, time: 0, changes: [:])
                transaction.time = try TransactionCoding.decode(UnsafeRawBufferPointer(rebasing: buffer[payload]),
                                                                base: payload.lowerBound) { id, body in
                    var counts = transaction.changes[id.entity] ?? (0, 0, 0)
                    let existed = !deleted.contains(id.rawValue) && (seen.contains(id.rawValue) || snapshot.contains(id))
                    if body == nil {
                        counts.deletes += 1
                        deleted.insert(id.rawValue)
                    } else {
                        if existed { counts.updates += 1 } else { counts.inserts += 1 }
                        seen.insert(id.rawValue)
                        deleted.remove(id.rawValue)
                    }
                    transaction.changes[id.entity] = counts
                }
                result.append(transaction)
                offset = next
            }
        }
        return result
    }
}
