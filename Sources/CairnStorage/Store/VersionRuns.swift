import CairnCollections
/// Record versions (see ``StoreState/versions``) kept compactly: sorted runs of
/// consecutive raw IDs that one transaction changed last. A bulk insert of a million
/// records is one run of 20 bytes, not a million table entries; a record changed on its
/// own is a run of one. The store moves its recent versions here in batches
/// (``merging(_:)``), so the hash table of versions stays small however many records
/// change while the store is open.
final class VersionRuns: Sendable {
    /// Run i covers raw IDs `starts[i] ..< starts[i] + counts[i]`, all last changed by
    /// transaction `sequences[i]`; runs ascend and do not overlap.
    private let starts: [UInt64]
    private let counts: [UInt32]
    private let sequences: [UInt64]

    static let empty = VersionRuns(starts: [], counts: [], sequences: [])

    private init(starts: [UInt64], counts: [UInt32], sequences: [UInt64]) {
        self.starts = starts
        self.counts = counts
        self.sequences = sequences
    }

    var isEmpty: Bool { starts.isEmpty }
    var runCount: Int { starts.count }

    /// The number of IDs whose version is after `sequence`.
    func count(after sequence: UInt64) -> Int {
        var total = 0
        for run in sequences.indices where sequences[run] > sequence { total += Int(counts[run]) }
        return total
    }

    /// The version of raw ID `raw`, or nil if no run covers it.
    func version(of raw: UInt64) -> UInt64? {
        // The last run starting at or before `raw`.
        let after = starts.partitionPoint { $0 > raw }
        guard after > 0 else { return nil }
        let run = after - 1
        return raw - starts[run] < UInt64(counts[run]) ? sequences[run] : nil
    }

    /// These runs with `recent`'s versions laid over them (a recent version wins).
    func merging(_ recent: IDMap<UInt64, UInt64>) -> VersionRuns {
        var pairs: [(id: UInt64, sequence: UInt64)] = []
        pairs.reserveCapacity(recent.count)
        for (id, sequence) in recent { pairs.append((id, sequence)) }
        RadixSort.sort(&pairs) { $0.id }
        var builder = Builder()
        var next = 0
        for run in starts.indices {
            // (Ends are inclusive: a run may end at the largest raw ID.)
            var cursor: UInt64? = starts[run]
            let last = starts[run] + (UInt64(counts[run]) - 1)
            while next < pairs.count, pairs[next].id <= last {
                let (id, sequence) = pairs[next]
                next += 1
                if let from = cursor, id >= from {
                    if id > from { builder.append(from, count: id - from, sequences[run]) }
                    cursor = id < last ? id + 1 : nil
                }
                builder.append(id, count: 1, sequence)
            }
            if let from = cursor { builder.append(from, count: last - from + 1, sequences[run]) }
        }
        for (id, sequence) in pairs[next...] { builder.append(id, count: 1, sequence) }
        return VersionRuns(starts: builder.starts, counts: builder.counts, sequences: builder.sequences)
    }

    /// Runs appended in ascending order, each joined to the one before when they touch
    /// and share a version (and the joined count fits).
    private struct Builder {
        var starts: [UInt64] = [], counts: [UInt32] = [], sequences: [UInt64] = []

        mutating func append(_ start: UInt64, count: UInt64, _ sequence: UInt64) {
            var start = start, count = count
            if let last = starts.indices.last, sequences[last] == sequence, starts[last] &+ UInt64(counts[last]) == start, start != 0 {
                let room = UInt64(UInt32.max) - UInt64(counts[last])
                let joined = min(room, count)
                counts[last] += UInt32(joined)
                start &+= joined
                count -= joined
            }
            while count > 0 {
                let piece = min(count, UInt64(UInt32.max))
                starts.append(start)
                counts.append(UInt32(piece))
                sequences.append(sequence)
                start &+= piece
                count -= piece
            }
        }
    }
}
