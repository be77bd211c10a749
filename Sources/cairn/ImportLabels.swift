import CairnCollections
import CairnStorage

/// The labels of an import written as record IDs of their line's entity (an export's):
/// each one's line, whether its ID is kept for the line's record, and whether that record
/// was made. Consecutive IDs on consecutive lines (an export writes each entity's records
/// so) make one run, kept in 16 bytes: an export of any size takes a few bytes per run,
/// not per line. Other files cost one run per label.
struct IDLabels {
    /// Run r: IDs `starts[r] ..< starts[r] + counts[r]` on lines `lines[r]`, `lines[r] + 1`, …
    private var starts: [UInt64] = []
    private var lines: [UInt32] = []
    private var counts: [UInt32] = []
    /// The entries before each run, once ``sort()`` has put the runs in ID order.
    private var offsets: [Int] = []
    private var kept = Bits(), made = Bits()
    private(set) var count = 0

    /// The largest line number a label may have (the rest are text labels).
    static let maxLine = Int(UInt32.max) - 1

    /// Adds the label `raw` of line `line`.
    mutating func append(_ raw: UInt64, line: Int) {
        count += 1
        // (A run stays within one entity, so its serials are consecutive too.)
        if let last = starts.indices.last, counts[last] < UInt32.max, raw >> 48 == starts[last] >> 48,
           starts[last] &+ UInt64(counts[last]) == raw, Int(lines[last]) + Int(counts[last]) == line {
            counts[last] += 1
            return
        }
        starts.append(raw)
        lines.append(UInt32(line))
        counts.append(1)
    }

    /// Puts the runs in ID order, and returns the label repeated soonest: the line of its
    /// second occurrence (the lowest such), the line of its first, and the ID.
    mutating func sort() -> (second: Int, first: Int, raw: UInt64)? {
        var repeated: (second: Int, first: Int, raw: UInt64)?
        if !isOrderedWithoutOverlap() {
            // Labels out of order or repeated: one run per label, sorted by ID then line.
            var entries: [(raw: UInt64, line: UInt32)] = []
            entries.reserveCapacity(count)
            for run in starts.indices {
                for k in 0..<UInt64(counts[run]) { entries.append((starts[run] + k, lines[run] + UInt32(k))) }
            }
            RadixSort.sort(&entries) { UInt64($0.line) }
            RadixSort.sort(&entries) { $0.raw }
            for index in entries.indices.dropFirst() where entries[index - 1].raw == entries[index].raw {
                let second = Int(entries[index].line)
                if second < repeated?.second ?? Int.max { repeated = (second, Int(entries[index - 1].line), entries[index].raw) }
            }
            self = IDLabels()
            for entry in entries { append(entry.raw, line: Int(entry.line)) }
        }
        offsets = []
        var total = 0
        for run in counts.indices {
            offsets.append(total)
            total += Int(counts[run])
        }
        kept = Bits(count: total)
        made = Bits(count: total)
        return repeated
    }

    private func isOrderedWithoutOverlap() -> Bool {
        starts.indices.dropFirst().allSatisfy { starts[$0 - 1] < starts[$0] && starts[$0] - starts[$0 - 1] >= UInt64(counts[$0 - 1]) }
    }

    /// Forgets the labels of lines from `line` on (a stopped import does not read them).
    mutating func removeLines(from line: Int) {
        var kept = IDLabels()
        for run in starts.indices where Int(lines[run]) < line {
            let n = min(Int(counts[run]), line - Int(lines[run]))
            kept.starts.append(starts[run])
            kept.lines.append(lines[run])
            kept.counts.append(UInt32(n))
            kept.count += n
        }
        self = kept
        _ = sort()
    }

    /// The entry of label `raw` and its line, if a line has it.
    func find(_ raw: UInt64) -> (entry: Int, line: Int)? {
        let after = starts.partitionPoint { $0 > raw }
        guard after > 0 else { return nil }
        let run = after - 1
        let k = raw - starts[run]
        guard k < UInt64(counts[run]) else { return nil }
        return (offsets[run] + Int(k), Int(lines[run]) + Int(k))
    }

    func isKept(_ entry: Int) -> Bool { kept[entry] }
    func isMade(_ entry: Int) -> Bool { made[entry] }
    mutating func setMade(_ entry: Int) { made[entry] = true }

    /// Marks kept the IDs a store whose next serial is `nextSerial` never handed out,
    /// each serial once (its first line's), and returns the highest kept serial.
    mutating func keep(from nextSerial: UInt64) -> UInt64? {
        // Runs of one entity each, so a run's serials are consecutive too. Serials are the
        // store's, not the entity's: when no two runs' serials meet (as in an export), each
        // run keeps the part at or past `nextSerial`.
        var bySerial = Array(starts.indices)
        bySerial.sort { RecordID(rawValue: starts[$0]).serial < RecordID(rawValue: starts[$1]).serial }
        let disjoint = bySerial.indices.dropFirst().allSatisfy { position in
            let (a, b) = (bySerial[position - 1], bySerial[position])
            return RecordID(rawValue: starts[a]).serial + UInt64(counts[a]) <= RecordID(rawValue: starts[b]).serial
        }
        var highest: UInt64?
        if disjoint {
            for run in starts.indices {
                let first = RecordID(rawValue: starts[run]).serial, n = UInt64(counts[run])
                guard first + n > nextSerial else { continue }
                for k in (max(first, nextSerial) - first)..<n { kept[offsets[run] + Int(k)] = true }
                highest = max(highest ?? 0, first + n - 1)
            }
            return highest
        }
        // Serials shared between entities: each goes to the first line naming it.
        var entries: [(serial: UInt64, line: UInt32, entry: Int)] = []
        for run in starts.indices {
            for k in 0..<UInt64(counts[run]) {
                let serial = RecordID(rawValue: starts[run]).serial + k
                if serial >= nextSerial { entries.append((serial, lines[run] + UInt32(k), offsets[run] + Int(k))) }
            }
        }
        RadixSort.sort(&entries) { UInt64($0.line) }
        RadixSort.sort(&entries) { $0.serial }
        for index in entries.indices where index == 0 || entries[index - 1].serial != entries[index].serial {
            kept[entries[index].entry] = true
            highest = max(highest ?? 0, entries[index].serial)
        }
        return highest
    }
}

/// A fixed number of bits.
struct Bits {
    private var words: [UInt64] = []

    init() {}
    init(count: Int) { words = [UInt64](repeating: 0, count: (count + 63) / 64) }

    subscript(index: Int) -> Bool {
        get { words[index >> 6] & (1 << UInt64(index & 63)) != 0 }
        set {
            if newValue { words[index >> 6] |= 1 << UInt64(index & 63) } else { words[index >> 6] &= ~(1 << UInt64(index & 63)) }
        }
    }
}
