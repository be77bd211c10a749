import CairnCollections
import Dispatch
import Synchronization

/// The log's frames in groups of about ``StoreOptions/frameGroupBytes`` each, with the
/// CRC-32C of each group's stored frame checksums (FORMAT.md §12.6): what a checkpoint
/// records of the log it covers, so that an open can check, in parallel parts, that every
/// frame it covers is in the log, whole, and the one it was made of. Kept as frames are
/// replayed and committed; a new log starts with none.
struct FrameGroups: Sendable {
    private(set) var groups: [FrameGroup] = []
    /// Where the last frame noted starts (0: none yet).
    private(set) var lastFrame = 0
    /// Where the last frame noted ends.
    private(set) var end = FileHeader.size

    init() {}

    /// The groups a checkpoint holds, its frames checked against the log.
    init(_ groups: [FrameGroup], lastFrame: Int, end: Int) {
        (self.groups, self.lastFrame, self.end) = (groups, lastFrame, end)
    }

    /// The frames noted in all.
    var frames: Int { groups.reduce(0) { $0 + $1.frames } }

    /// Notes the frame at `offset`, `size` bytes long, whose checksum field holds `stored`:
    /// the last group takes it, or a new group starts with it once the last spans `groupBytes`.
    mutating func note(frameAt offset: Int, size: Int, stored: UInt32, groupBytes: Int) {
        if let last = groups.indices.last, offset - groups[last].offset < groupBytes, groups[last].frames < Int(UInt32.max) {
            groups[last].frames += 1
            groups[last].checksum = FrameGroup.chain(groups[last].checksum, stored)
        } else {
            groups.append(FrameGroup(offset: offset, frames: 1, checksum: FrameGroup.chain(0, stored)))
        }
        lastFrame = offset
        end = offset + size
    }

    /// The stored checksum field of the frame at `offset` of `buffer`.
    static func storedChecksum(_ buffer: UnsafeRawBufferPointer, at offset: Int) -> UInt32 {
        UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }
}

/// What the log holds of the frames a checkpoint covers (FORMAT.md §12.5 step 4).
enum CoveredFrames: Equatable {
    /// Every covered frame is there, whole, and the checkpoint's.
    case hold
    /// A group of valid frames is not the checkpoint's: it was made of another log (a
    /// copy's, another store's) or of bytes since replaced. It is not this log's word.
    case differ(String)
    /// No group contradicts the checkpoint, but frames it covers are missing or fail their
    /// checks at `offset`: the log lost what the checkpoint shows it held.
    case damaged(offset: Int, String)
}

/// A checkpoint's frame groups laid over its log: where each starts and ends, and the
/// sequence number of its first frame.
struct GroupLayout: Sendable {
    let groups: [FrameGroup]
    let firstSequences: [UInt64]
    /// Where the last covered frame starts, and where it ends (the checkpoint's log offset).
    let lastFrame: Int
    let end: Int

    init(groups: [FrameGroup], baseSequence: UInt64, lastFrame: Int, end: Int) {
        var sequence = baseSequence + 1
        firstSequences = groups.map { group in
            defer { sequence += UInt64(group.frames) }
            return sequence
        }
        (self.groups, self.lastFrame, self.end) = (groups, lastFrame, end)
    }

    /// Where group `index`'s frames end: the next group's offset, or the log offset.
    func end(of index: Int) -> Int { index + 1 < groups.count ? groups[index + 1].offset : end }

    /// The group whose frames hold `offset`, if one does.
    func group(holding offset: Int) -> Int? {
        guard offset < end, let first = groups.first, offset >= first.offset else { return nil }
        return groups.partitionPoint(where: { $0.offset > offset }) - 1
    }
}

extension FrameGroups {
    /// How much of each frame a check reads.
    enum Depth {
        /// Headers only (length, sequence, type; the stored checksum is chained, not
        /// checked against the payload): whether the frames are there and the checkpoint's.
        case headers
        /// Every byte (§4.1, checksum and padding included).
        case whole
    }

    /// Checks `log` (the log file's bytes, mapped by `mapping`) against the checkpoint
    /// frame groups of `layout`: in each group, as many frames as it says, with the
    /// sequence numbers that follow, back to back up to the group's end (the last group's
    /// last frame at `layout.lastFrame`), whose stored checksums give the group's; each
    /// frame valid, read to `depth`. A group whose headers do not hold is read whole, to
    /// tell damage from another log's frames. A group a part, on every core; each
    /// group's pages are let go of once read.
    static func check(_ log: UnsafeRawBufferPointer, mapping: FileMapping?, layout: GroupLayout, depth: Depth) -> CoveredFrames {
        let results = PerRun<CoveredFrames>(count: layout.groups.count, initial: .hold)
        let bytes = ReadOnlyBytes(log)
        let check: @Sendable (Int) -> Void = { index in
            results[index] = checkGroup(bytes.bytes, layout: layout, index: index, depth: depth, mapping: mapping)
            if results[index] != .hold, depth == .headers {
                results[index] = checkGroup(bytes.bytes, layout: layout, index: index, depth: .whole, mapping: mapping)
            }
            let group = layout.groups[index], read = min(layout.end(of: index), bytes.bytes.count)
            if group.offset < read { mapping?.dropResidentPages(in: group.offset..<read) }
        }
        if layout.groups.count > 1 {
            DispatchQueue.concurrentPerform(iterations: layout.groups.count, execute: check)
        } else {
            for index in layout.groups.indices { check(index) }
        }
        var damage: CoveredFrames?
        for index in layout.groups.indices {
            switch results[index] {
            case .hold: continue
            case .differ: return results[index]
            case .damaged: if damage == nil { damage = results[index] }
            }
        }
        return damage ?? .hold
    }

    /// Checks group `index` of `layout` against `log`, as ``check(_:mapping:layout:depth:)`` says;
    /// the pages of a long frame are let go of piece by piece as they are read.
    static func checkGroup(_ log: UnsafeRawBufferPointer, layout: GroupLayout, index: Int, depth: Depth,
                           mapping: FileMapping?) -> CoveredFrames {
        let group = layout.groups[index], end = layout.end(of: index)
        var offset = group.offset
        var checksum: UInt32 = 0
        var start = offset
        for frame in 0..<group.frames {
            let expected = layout.firstSequences[index] + UInt64(frame)
            guard offset < log.count else {
                return .damaged(offset: offset, "the log ends at offset \(log.count), before transaction \(expected)")
            }
            let parsed: LogFrame.Parsed
            if depth == .whole {
                parsed = LogFrame.parse(log, at: offset, read: mapping.map { mapping in { mapping.dropResidentPages(in: $0) } })
            } else if let header = LogFrame.header(in: log, at: offset) {
                parsed = .frame(sequence: header.sequence, syncedThrough: 0, payload: 0..<0, next: header.next)
            } else {
                parsed = .invalid(reason: "its header does not read")
            }
            switch parsed {
            case .unused:
                return .damaged(offset: offset, "transaction \(expected) is missing (zero bytes at offset \(offset))")
            case .invalid(let reason):
                return .damaged(offset: offset, "the frame of transaction \(expected) at offset \(offset) is damaged (\(reason))")
            case .frame(let sequence, _, _, let next):
                guard sequence == expected else {
                    return .differ("the log's frame at offset \(offset) holds transaction \(sequence), where the checkpoint's holds \(expected)")
                }
                checksum = FrameGroup.chain(checksum, FrameGroups.storedChecksum(log, at: offset))
                start = offset
                offset = next
            }
        }
        guard offset == end, index + 1 < layout.groups.count || start == layout.lastFrame else {
            return .differ("the log's frames from offset \(group.offset) end at \(offset), where the checkpoint's end at \(end)")
        }
        guard checksum == group.checksum else {
            return .differ("the log's \(group.frames) frames from offset \(group.offset) are not those the checkpoint was made of")
        }
        return .hold
    }
}

/// The frames a checkpoint covers, checked whole on first use rather than by the open,
/// which read only their headers and stored checksums (enough to know they are there
/// and the checkpoint's): a group at a time, by the first read of a body in it, by a
/// reader of every body (``checkAll()``: scans, index builds, `verify`), or by a thread
/// of its own that the open starts. A group that fails is reported, as corrupt at its
/// damaged frame, to every read of it. (FORMAT.md §12.5.)
final class CoveredFrameCheck: Sendable {
    let layout: GroupLayout
    /// The log as the open mapped it (its covered bytes never change).
    let mapping: FileMapping
    let path: String
    private let checked: AtomicBitmap
    private let allChecked = Atomic<Bool>(false)
    /// (A `Protected`, whose lock the thread sanitizer sees: a `Mutex` handed over through
    /// its contended path, inside the standard library, showed the sanitizer a race between
    /// the background check and a read's.)
    private let failures = Protected<[Int: CairnError]>([:])

    init(layout: GroupLayout, mapping: FileMapping, path: String) {
        self.layout = layout
        self.mapping = mapping
        self.path = path
        checked = AtomicBitmap(count: layout.groups.count)
    }

    /// Checks the group whose frames hold log offset `offset`, if a checkpoint covered it.
    @inline(__always) func check(offset: Int) throws {
        guard !allChecked.load(ordering: .relaxed), let group = layout.group(holding: offset) else { return }
        try check(group: group)
    }

    /// Checks group `index` unless it was: throws what its check found wrong.
    func check(group index: Int) throws {
        if checked.contains(index) { return }
        if let failure = failures.withLock({ $0[index] }) { throw failure }
        let bytes = UnsafeRawBufferPointer(rebasing: mapping.bytes[..<min(layout.end, mapping.bytes.count)])
        let result = FrameGroups.checkGroup(bytes, layout: layout, index: index, depth: .whole, mapping: mapping)
        let group = layout.groups[index]
        mapping.dropResidentPages(in: group.offset..<min(layout.end(of: index), bytes.count))
        let failure: CairnError
        switch result {
        case .hold:
            checked.insert(index)
            return
        case .differ(let reason):
            failure = CairnError(.corrupt, "\(reason); checked on first read, after the open found the frame's header and checksum the checkpoint's: run `cairn repair`",
                                 path: path, offset: Int64(group.offset))
        case .damaged(let offset, let reason):
            failure = CairnError(.corrupt, "\(reason); the frame is one the log's checkpoint covers, checked on first read: run `cairn repair`",
                                 path: path, offset: Int64(offset))
        }
        failures.withLock { $0[index] = failure }
        throw failure
    }

    /// Checks every group not yet checked, on every core; throws the first failure, in
    /// log order.
    func checkAll() throws {
        guard !allChecked.load(ordering: .relaxed) else { return }
        let pending = layout.groups.indices.filter { !checked.contains($0) }
        let errors = PerRun<CairnError?>(count: pending.count, initial: nil)
        let run: @Sendable (Int) -> Void = { [self] at in
            do { try check(group: pending[at]) } catch { errors[at] = error as? CairnError }
        }
        if pending.count > 1 { DispatchQueue.concurrentPerform(iterations: pending.count, execute: run) } else { pending.indices.forEach(run) }
        if let first = (0..<pending.count).lazy.compactMap({ errors[$0] }).first { throw first }
        allChecked.store(true, ordering: .relaxed)
    }

    /// Checks every group on a thread of its own, one after another, at utility priority:
    /// reads after it find nothing left to check.
    func checkInBackground() {
        DispatchQueue.global(qos: .utility).async { [self] in
            var failed = false
            for index in layout.groups.indices where (try? check(group: index)) == nil { failed = true }
            if !failed { allChecked.store(true, ordering: .relaxed) }
        }
    }
}
