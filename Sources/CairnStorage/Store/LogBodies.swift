import CairnCollections
/// One record's state in the log overlay, in 8 bytes: where the log holds its body, the
/// body held in memory (``LogBodies/held``), or deleted. The overlay keeps no record body
/// of its own, so its memory per record in the log tail is this entry and its key.
///
/// Bits: all ones is a delete; with the top bit set, the rest index the held bodies;
/// otherwise the top 40 bits are the body's offset in the log and the low 24 its length.
struct OverlayEntry: Sendable, Equatable {
    let bits: UInt64

    static let deleted = OverlayEntry(bits: .max)
    private static let lengthBits: UInt64 = 24
    private static let heldFlag: UInt64 = 1 << 63

    /// The entry of a body at `offset` of the log, or nil when offset or length do not fit
    /// (a body of 16 MiB or more, or a log past 512 GiB: those bodies are held instead).
    static func logged(offset: Int, length: Int) -> OverlayEntry? {
        guard offset >= 0, length >= 0, UInt64(length) < 1 << lengthBits, UInt64(offset) < 1 << (63 - lengthBits) else { return nil }
        return OverlayEntry(bits: UInt64(offset) << lengthBits | UInt64(length))
    }

    static func held(_ index: Int) -> OverlayEntry { OverlayEntry(bits: heldFlag | UInt64(index)) }

    var isDeleted: Bool { bits == .max }
    var isLive: Bool { bits != .max }
    /// The index into ``LogBodies/held``, for a held body.
    var heldIndex: Int? { isLive && bits & Self.heldFlag != 0 ? Int(bits & ~Self.heldFlag) : nil }
    /// Where the log holds the body, for a logged one.
    var logRange: Range<Int>? {
        guard bits & Self.heldFlag == 0 else { return nil }
        let offset = Int(bits >> Self.lengthBits)
        return offset..<(offset + Int(bits & (1 << Self.lengthBits - 1)))
    }
}

/// What the overlay's record bodies are read from: a mapping of the current log that
/// follows its appends, and the few bodies held in memory (too large for an entry's
/// length, or of frames a failed sync is about to discard). A copy keeps both alive, so a
/// reader that took one with the overlay reads bodies after a compaction retired the log.
struct LogBodies: Sendable {
    /// The log, mapped through at least the end of its last logged body.
    private(set) var log: FileMapping?
    /// Bodies held in memory, each in a buffer of its own (its address stays put).
    private(set) var held: [FileMapping] = []
    /// The frames a checkpoint covered that are still to be read whole before a body in
    /// them is (nil: every frame mapped was checked as it was replayed or written).
    private(set) var covered: CoveredFrameCheck?

    init(log: FileMapping?) { self.log = log }

    /// Checks the frames a checkpoint covered on first use (see ``covered``).
    mutating func cover(_ check: CoveredFrameCheck) { covered = check }

    /// Checks every frame a checkpoint covered that is not yet checked: for a reader of
    /// every body (a scan, an index build), before it reads them with ``uncheckedBody(_:)``.
    func checkAll() throws { try covered?.checkAll() }

    /// The bytes the log maps (empty if none).
    var mappedCount: Int { log?.bytes.count ?? 0 }

    /// The body of a live entry, its frame checked first if a checkpoint covered it and
    /// no read has checked it yet; valid while this value (or a copy) is alive.
    @inline(__always) func body(_ entry: OverlayEntry) throws -> UnsafeRawBufferPointer {
        if let covered, let range = entry.logRange { try covered.check(offset: range.lowerBound) }
        return uncheckedBody(entry)
    }

    /// ``body(_:)`` with no check of its frame: for a body of a frame this process replayed
    /// or wrote, or after ``checkAll()``. An entry outside what is mapped (which the store
    /// never makes) reads as an empty body, which fails to decode as a record rather than
    /// reading out of bounds.
    func uncheckedBody(_ entry: OverlayEntry) -> UnsafeRawBufferPointer {
        if let index = entry.heldIndex {
            return index < held.count ? held[index].bytes : UnsafeRawBufferPointer(start: nil, count: 0)
        }
        guard let range = entry.logRange, let log, range.upperBound <= log.bytes.count else {
            return UnsafeRawBufferPointer(start: nil, count: 0)
        }
        return UnsafeRawBufferPointer(rebasing: log.bytes[range])
    }

    /// Holds a copy of `body` and returns its entry.
    mutating func hold(_ body: UnsafeRawBufferPointer) -> OverlayEntry {
        held.append(FileMapping(copying: body))
        return .held(held.count - 1)
    }

    /// The entry of a body the log holds at `offset` (one that does not fit an entry is held).
    mutating func entry(offset: Int, body: UnsafeRawBufferPointer) -> OverlayEntry {
        OverlayEntry.logged(offset: offset, length: body.count) ?? hold(body)
    }

    /// Whether the log is mapped through `end`.
    func covers(_ end: Int) -> Bool { end <= mappedCount }

    /// The length to map the log with to reach `end`: as much again (at least 1 MiB), so
    /// appends remap rarely.
    static func mappingLength(through end: Int) -> Int {
        (end + max(end, 1 << 20) + 0xFFFF) & ~0xFFFF
    }

    /// Reads the log through `mapping` from now on (it maps the current log, further).
    mutating func useLog(_ mapping: FileMapping) { log = mapping }

    /// Copies the bodies of `overlay`'s entries that lie at or past `offset` in the log
    /// into memory, before a failed sync's frames there are discarded.
    mutating func holdBodies(from offset: Int, in overlay: inout EntityMap<IDMap<UInt64, OverlayEntry>>) {
        for (entity, before) in overlay {
            var entries = before
            var moved: [(UInt64, OverlayEntry)] = []
            for (raw, entry) in entries {
                // (Bodies past the last sync were written by this process.)
                if let range = entry.logRange, range.upperBound > offset { moved.append((raw, hold(uncheckedBody(entry)))) }
            }
            guard !moved.isEmpty else { continue }
            for (raw, entry) in moved { entries[raw] = entry }
            overlay[entity] = entries
        }
    }
}

/// One entity's log overlay as a reader takes it: its entries and what their bodies are
/// read from. Bodies it gives stay valid while it is alive.
struct EntityOverlay: Sendable {
    let entries: IDMap<UInt64, OverlayEntry>
    let bodies: LogBodies

    init(_ entries: IDMap<UInt64, OverlayEntry>?, bodies: LogBodies) {
        self.entries = entries ?? [:]
        self.bodies = bodies
    }

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }
    var keys: [UInt64] { entries.keys }

    subscript(raw: UInt64) -> OverlayEntry? { entries[raw] }
    func contains(_ raw: UInt64) -> Bool { entries.contains(raw) }

    /// The body of the record `raw` if the overlay holds it live (``LogBodies/body(_:)``).
    @inline(__always) func liveBody(_ raw: UInt64) throws -> UnsafeRawBufferPointer? {
        guard let entry = entries[raw], entry.isLive else { return nil }
        return try bodies.body(entry)
    }

    /// ``liveBody(_:)`` with no check of its frame (``LogBodies/uncheckedBody(_:)``).
    func uncheckedLiveBody(_ raw: UInt64) -> UnsafeRawBufferPointer? {
        guard let entry = entries[raw], entry.isLive else { return nil }
        return bodies.uncheckedBody(entry)
    }
}

extension StoreState {
    /// The overlay of `entity`, as a reader takes it.
    func overlay(of entity: UInt16) -> EntityOverlay { EntityOverlay(overlay[entity], bodies: bodies) }
}
