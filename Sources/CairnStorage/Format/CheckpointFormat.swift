/// A checkpoint's directory (FORMAT.md §12 "Checkpoint"): what the log's frames up to
/// an offset added to the snapshot, as tables the file holds in sections, and where.
/// Only the directory is decoded here; the sections are checked against their checksums
/// and used in place by the store.
package struct CheckpointDirectory: Equatable, Sendable {
    /// FORMAT.md §12.2: the directory layout this build writes and reads. (Layout 1 had
    /// no frame groups: its checkpoints are ignored, and the log replayed.)
    package static let layout: UInt32 = 2
    /// Sections start at multiples of 8 in the file; one of at least this many bytes
    /// starts at a multiple of it (a page size on every platform), so that its pages are
    /// its own.
    package static let pageAlignment = 1 << 16

    /// A section of the file: where it starts, its length in bytes, and its masked CRC32C.
    package struct Section: Equatable, Sendable {
        package var offset: Int
        package var length: Int
        package var checksum: UInt32

        package init(offset: Int, length: Int, checksum: UInt32) {
            self.offset = offset
            self.length = length
            self.checksum = checksum
        }
    }

    /// One stored index's run of the entity's log records (FORMAT.md §12.4).
    package struct Run: Equatable, Sendable {
        /// The attribute's value slot (the snapshot stores an index for it).
        package var attribute: Int
        /// The attribute's integer type (int8 … int64).
        package var type: AttributeType
        /// The IDs whose value is nil, ascending: 8 bytes each.
        package var nulls: Section
        /// (integer, ID) pairs by integer then ID: 16 bytes each.
        package var keyed: Section

        package init(attribute: Int, type: AttributeType, nulls: Section, keyed: Section) {
            self.attribute = attribute
            self.type = type
            self.nulls = nulls
            self.keyed = keyed
        }
    }

    /// One entity's part of the log overlay (FORMAT.md §12.3).
    package struct Entity: Equatable, Sendable {
        package var number: UInt16
        /// The entity's record count with the log applied.
        package var recordCount: Int
        /// The sequence number of the last covered transaction that changed its records.
        package var lastChange: UInt64
        /// The table's seed (already mixed) and bucket count (a power of two, at least 8).
        package var seed: UInt64
        package var bucketCount: Int
        /// Keys that are not 0: fewer than the buckets.
        package var entryCount: Int
        /// `bucketCount` 8-byte keys, then as many 8-byte entries.
        package var keys: Section
        package var values: Section
        package var runs: [Run]

        package init(number: UInt16, recordCount: Int, lastChange: UInt64, seed: UInt64, bucketCount: Int, entryCount: Int,
                     keys: Section, values: Section, runs: [Run]) {
            self.number = number
            self.recordCount = recordCount
            self.lastChange = lastChange
            self.seed = seed
            self.bucketCount = bucketCount
            self.entryCount = entryCount
            self.keys = keys
            self.values = values
            self.runs = runs
        }
    }

    /// The log offset after the last covered frame: the replay goes on from here.
    package var logOffset: Int
    /// The sequence number of the last covered frame.
    package var lastSequence: UInt64
    /// Where the last covered frame starts: it ends at ``logOffset`` with sequence number
    /// ``lastSequence`` and a checksum that holds, or the checkpoint is not of this log.
    package var lastFrameOffset: Int
    package var lastCommitMilliseconds: UInt64
    package var nextSerial: UInt64
    /// Puts in the covered frames (``StoreStatistics/logRecordVersions``).
    package var logPuts: Int
    /// Snapshot records the covered frames replaced or deleted
    /// (``StoreStatistics/shadowedSnapshotRecords``).
    package var shadowed: Int
    /// The covered frames' groups (``FrameGroup``), 16 bytes each: what proves the
    /// checkpoint is of this log's bytes.
    package var frameGroups: Section
    package var entities: [Entity]

    package init(logOffset: Int, lastSequence: UInt64, lastFrameOffset: Int, lastCommitMilliseconds: UInt64,
                 nextSerial: UInt64, logPuts: Int, shadowed: Int, frameGroups: Section, entities: [Entity]) {
        self.logOffset = logOffset
        self.lastSequence = lastSequence
        self.lastFrameOffset = lastFrameOffset
        self.lastCommitMilliseconds = lastCommitMilliseconds
        self.nextSerial = nextSerial
        self.logPuts = logPuts
        self.shadowed = shadowed
        self.frameGroups = frameGroups
        self.entities = entities
    }

    private static let fixedSize = 88
    private static let entitySize = 96
    private static let runSize = 56

    /// The directory's bytes: a length and a masked CRC32C, then the body.
    package func encoded() -> [UInt8] {
        var body = ByteWriter()
        body.u32(Self.layout)
        body.u32(UInt32(entities.count))
        body.u64(UInt64(logOffset))
        body.u64(lastSequence)
        body.u64(UInt64(lastFrameOffset))
        body.u64(lastCommitMilliseconds)
        body.u64(nextSerial)
        body.u64(UInt64(logPuts))
        body.u64(UInt64(shadowed))
        Self.append(frameGroups, to: &body)
        for entity in entities {
            body.u16(entity.number)
            body.u16(UInt16(entity.runs.count))
            body.u32(0)
            body.u64(UInt64(entity.recordCount))
            body.u64(entity.lastChange)
            body.u64(entity.seed)
            body.u64(UInt64(entity.bucketCount))
            body.u64(UInt64(entity.entryCount))
            Self.append(entity.keys, to: &body)
            Self.append(entity.values, to: &body)
            for run in entity.runs {
                body.u16(UInt16(run.attribute))
                body.u8(run.type.rawValue)
                body.u8(0)
                body.u32(0)
                Self.append(run.nulls, to: &body)
                Self.append(run.keyed, to: &body)
            }
        }
        var writer = ByteWriter(capacity: body.count + 8)
        writer.u32(UInt32(body.count))
        writer.u32(CRC32C.masked(body.bytes))
        writer.append(body.bytes)
        return writer.bytes
    }

    private static func append(_ section: Section, to writer: inout ByteWriter) {
        writer.u64(UInt64(section.offset))
        writer.u64(UInt64(section.length))
        writer.u32(section.checksum)
        writer.u32(0)
    }

    /// Decodes the directory at the start of `bytes` (the file after its header, which
    /// starts at `base`), and checks every section lies in `fileSize` bytes, aligned,
    /// without overlapping another; offsets in errors are the file's.
    package static func decode(_ bytes: UnsafeRawBufferPointer, base: Int, fileSize: Int) throws -> CheckpointDirectory {
        var reader = ByteReader(bytes, base: base)
        let length = Int(try reader.u32("directory length"))
        let checksum = try reader.u32("directory checksum")
        guard length >= fixedSize, length <= bytes.count - 8 else {
            throw CairnError.corrupt("checkpoint directory length \(length) does not fit the \(bytes.count - 8) bytes after it", offset: base)
        }
        let body = UnsafeRawBufferPointer(rebasing: bytes[8..<(8 + length)])
        guard CRC32C.masked(body) == checksum else {
            throw CairnError.corrupt("checkpoint directory checksum mismatch", offset: base + 4)
        }
        reader = ByteReader(body, base: base + 8)
        let layout = try reader.u32("layout")
        guard layout == Self.layout else {
            throw CairnError(.unsupportedVersion, "checkpoint directory has layout \(layout); this build reads layout \(Self.layout)",
                             offset: Int64(base + 8))
        }
        let entityCount = try fixedCount(Int(try reader.u32("entity count")), "entities", itemSize: entitySize, reader: reader)
        let logOffset = try reader.u64("log offset")
        let lastSequence = try reader.u64("last sequence")
        let lastFrameOffset = try reader.u64("last frame offset")
        let lastCommit = try reader.u64("last commit time")
        let nextSerial = try reader.u64("next serial")
        let logPuts = try reader.u64("log puts")
        let shadowed = try reader.u64("shadowed records")
        guard logOffset > UInt64(FileHeader.size), logOffset < 1 << 39, lastFrameOffset >= UInt64(FileHeader.size),
              lastFrameOffset < logOffset,
              lastSequence <= FormatLimits.maxSequence, nextSerial <= RecordID.maxSerial + 1, logPuts <= UInt64(Int.max),
              shadowed <= UInt64(Int.max) else {
            throw CairnError.corrupt("checkpoint directory holds an impossible log offset, sequence, serial or count", offset: base + 16)
        }
        let frameGroups = try section(&reader, "frame groups", length: nil, unit: FrameGroup.size, fileSize: fileSize)
        guard frameGroups.length > 0 else {
            throw CairnError.corrupt("checkpoint has no frame groups", offset: base + 8 + 64)
        }
        var sections: [Section] = [frameGroups]
        var entities: [Entity] = []
        var previous: UInt16 = 0
        for _ in 0..<entityCount {
            let at = reader.base + reader.position
            let number = try reader.u16("entity number")
            let runCount = try fixedCount(Int(try reader.u16("run count")), "runs", itemSize: runSize, reader: reader)
            try reader.zeros(4, "reserved field")
            let recordCount = try reader.u64("record count")
            let lastChange = try reader.u64("last change")
            let seed = try reader.u64("seed")
            let bucketCount = try reader.u64("bucket count")
            let entryCount = try reader.u64("entry count")
            guard number > previous else {
                throw CairnError.corrupt("checkpoint entity \(number) is not after entity \(previous)", offset: at)
            }
            previous = number
            guard bucketCount >= 8, bucketCount & (bucketCount - 1) == 0, bucketCount <= UInt64(Int.max / 16),
                  entryCount * 10 <= bucketCount * 7, recordCount <= UInt64(Int.max), lastChange <= lastSequence else {
                throw CairnError.corrupt("checkpoint entity \(number) has an impossible table (\(entryCount) entries in \(bucketCount) buckets) or count",
                                         offset: at)
            }
            let keys = try section(&reader, "keys", length: Int(bucketCount) * 8, fileSize: fileSize)
            let values = try section(&reader, "values", length: Int(bucketCount) * 8, fileSize: fileSize)
            sections += [keys, values]
            var runs: [Run] = []
            for _ in 0..<runCount {
                let runAt = reader.base + reader.position
                let attribute = Int(try reader.u16("attribute"))
                let rawType = try reader.u8("attribute type")
                try reader.zeros(5, "reserved field")
                guard let type = AttributeType(rawValue: rawType), [.int8, .int16, .int32, .int64].contains(type) else {
                    throw CairnError.corrupt("checkpoint run of attribute \(attribute) has type \(rawType), not an integer type", offset: runAt)
                }
                let nulls = try section(&reader, "nulls", length: nil, unit: 8, fileSize: fileSize)
                let keyed = try section(&reader, "pairs", length: nil, unit: 16, fileSize: fileSize)
                sections += [nulls, keyed]
                runs.append(Run(attribute: attribute, type: type, nulls: nulls, keyed: keyed))
            }
            entities.append(Entity(number: number, recordCount: Int(recordCount), lastChange: lastChange, seed: seed,
                                   bucketCount: Int(bucketCount), entryCount: Int(entryCount), keys: keys, values: values, runs: runs))
        }
        guard reader.remaining == 0 else {
            throw CairnError.corrupt("checkpoint directory has \(reader.remaining) bytes after its last entity", offset: reader.base + reader.position)
        }
        // (Sections may not share bytes: a table written through in place must not be another's.)
        let placed = sections.filter { $0.length > 0 }.sorted { $0.offset < $1.offset }
        let directoryEnd = base + 8 + length
        for (index, section) in placed.enumerated() {
            let floor = index == 0 ? directoryEnd : placed[index - 1].offset + placed[index - 1].length
            guard section.offset >= floor else {
                throw CairnError.corrupt("checkpoint section at offset \(section.offset) overlaps the directory or another section",
                                         offset: base)
            }
        }
        return CheckpointDirectory(logOffset: Int(logOffset), lastSequence: lastSequence, lastFrameOffset: Int(lastFrameOffset),
                                   lastCommitMilliseconds: lastCommit, nextSerial: nextSerial, logPuts: Int(logPuts),
                                   shadowed: Int(shadowed), frameGroups: frameGroups, entities: entities)
    }

    /// Decodes the frame groups section (`bytes`, at `offset` in the file; its checksum
    /// checked) and checks it describes the covered frames: the first group starts after
    /// the log's header, each later one further on, the last at or before the last frame;
    /// every group holds a frame, room for its frames (``LogFrame/minimumSize`` each) lies
    /// before the next, and the groups hold one frame for each covered transaction.
    package func decodeFrameGroups(_ bytes: UnsafeRawBufferPointer, offset: Int, baseSequence: UInt64) throws -> [FrameGroup] {
        var reader = ByteReader(bytes, base: offset)
        var groups: [FrameGroup] = []
        groups.reserveCapacity(bytes.count / FrameGroup.size)
        var frames: UInt64 = 0
        while !reader.isAtEnd {
            let at = reader.base + reader.position
            let start = try reader.u64("frame group offset")
            let count = try reader.u32("frame group's frames")
            let checksum = try reader.u32("frame group's checksum")
            let floor = groups.last.map { UInt64($0.offset + $0.frames * LogFrame.minimumSize) } ?? UInt64(FileHeader.size)
            guard groups.isEmpty ? start == UInt64(FileHeader.size) : start >= floor, start % UInt64(LogFrame.alignment) == 0,
                  start <= UInt64(lastFrameOffset), count > 0 else {
                throw CairnError.corrupt("checkpoint frame group at \(start) of \(count) frames does not follow the one before it inside the covered log",
                                         offset: at)
            }
            frames += UInt64(count)
            groups.append(FrameGroup(offset: Int(start), frames: Int(count), checksum: CRC32C.unmask(checksum)))
        }
        guard let last = groups.last, frames == lastSequence &- baseSequence, lastSequence > baseSequence,
              UInt64(lastFrameOffset) >= UInt64(last.offset) + UInt64(last.frames - 1) * UInt64(LogFrame.minimumSize),
              logOffset - lastFrameOffset >= LogFrame.minimumSize else {
            throw CairnError.corrupt("checkpoint frame groups hold \(frames) frames, but it covers transactions \(baseSequence + 1) to \(lastSequence) up to offset \(logOffset)",
                                     offset: offset)
        }
        return groups
    }

    /// A count read as a fixed-width number, checked against the bytes left for its items.
    private static func fixedCount(_ count: Int, _ what: String, itemSize: Int, reader: ByteReader) throws -> Int {
        guard count <= reader.remaining / itemSize else {
            throw reader.failure("\(count) \(what) need \(count * itemSize) bytes but only \(reader.remaining) remain")
        }
        return count
    }

    /// Where a writer places a section of `length` bytes that may start at `end` or later.
    package static func placement(after end: Int, length: Int) -> Int {
        let alignment = length >= pageAlignment ? pageAlignment : 8
        return (end + alignment - 1) / alignment * alignment
    }

    /// Reads a section's offset, length and checksum: aligned, inside the file, and of
    /// `length` bytes (or of whole `unit`s).
    private static func section(_ reader: inout ByteReader, _ what: String, length expected: Int?, unit: Int = 8,
                                fileSize: Int) throws -> Section {
        let at = reader.base + reader.position
        let offset = try reader.u64("\(what) offset")
        let length = try reader.u64("\(what) length")
        let checksum = try reader.u32("\(what) checksum")
        try reader.zeros(4, "reserved field")
        guard offset <= UInt64(fileSize), length <= UInt64(fileSize) - offset, offset % 8 == 0,
              length % UInt64(unit) == 0, expected.map({ UInt64($0) == length }) ?? true else {
            throw CairnError.corrupt("checkpoint \(what) section (offset \(offset), \(length) bytes) does not fit the \(fileSize)-byte file",
                                     offset: at)
        }
        return Section(offset: Int(offset), length: Int(length), checksum: checksum)
    }
}

/// A run of consecutive log frames a checkpoint covers (FORMAT.md §12.6): where its first
/// frame starts, how many frames it holds, and the CRC-32C of their stored checksum fields
/// in order. Only the log the checkpoint was made of holds such frames there.
package struct FrameGroup: Equatable, Sendable {
    package static let size = 16

    package var offset: Int
    package var frames: Int
    /// The CRC-32C (unmasked; the file holds it masked) of the frames' stored checksums.
    package var checksum: UInt32

    package init(offset: Int, frames: Int, checksum: UInt32) {
        self.offset = offset
        self.frames = frames
        self.checksum = checksum
    }

    /// The group's bytes in a checkpoint.
    package static func encoded(_ groups: [FrameGroup]) -> [UInt8] {
        var writer = ByteWriter(capacity: groups.count * size)
        for group in groups {
            writer.u64(UInt64(group.offset))
            writer.u32(UInt32(group.frames))
            writer.u32(CRC32C.mask(group.checksum))
        }
        return writer.bytes
    }

    /// `checksum` extended with a frame's stored checksum field.
    @inline(__always) package static func chain(_ checksum: UInt32, _ stored: UInt32) -> UInt32 {
        withUnsafeBytes(of: stored.littleEndian) { CRC32C.update(checksum, $0) }
    }
}
