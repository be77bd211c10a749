import CairnCollections
/// An open snapshot file: validated header, footer, schema and index; records are found
/// by binary search in the index and checked (CRC) when read, never all decoded at open.
package final class SnapshotReader: Sendable {
    package let path: String
    package let mapping: FileMapping
    package let header: FileHeader
    package let footer: SnapshotFooter
    package let schema: Schema
    package let index: SnapshotIndex
    /// Records lie in `recordsStart ..< recordsEnd`.
    package let recordsStart: Int
    package let recordsEnd: Int
    /// Entity number → position in `index.entities`, or −1: a table, not a dictionary,
    /// since every lookup starts here (at most 65,536 entries, sized by the highest entity).
    private let entityPositions: [Int32]
    /// For each entity of `index.entities`: the ordinal of its first record among all the
    /// snapshot's records (a ``Place``'s bit in `checkedFrames`).
    private let firstOrdinals: [Int]
    /// For each entity of `index.entities`: its lowest and highest record ID, found by the
    /// checks at open, so that most questions of whether the snapshot holds an ID are
    /// answered without a search (``contains(_:)``).
    private let idSpans: [IDSpan]
    /// Version 3: the frames whose header and checksum have been checked, one bit per
    /// record ordinal. The file is mapped read-only and never rewritten (a compaction
    /// writes a new one), so a frame checked once reads the same bytes later: reads that
    /// come with a ``Place`` check a frame's checksum the first time only, as a block cache
    /// keeps blocks it checked. `cairn verify` and reads by bare offset check every time.
    private let checkedFrames: AtomicBitmap
    /// The checksums being computed on another thread, if the opener asked for that.
    private let checksums: SnapshotChecksums?

    /// Opens and validates (in order: header, footer, schema, index) the snapshot `file`.
    ///
    /// - Parameter backgroundChecksumMinimum: if the index is at least this many bytes
    ///   and there is more than one processor, compute its checksum (and, ahead of their
    ///   use, the attribute index blocks') on other threads; nil: never. The reader is
    ///   then not to be trusted, nor anything written on its word, until
    ///   ``awaitIndexChecksum()`` has returned. A version-3 index's entries are then
    ///   checked on another thread too, beside the index's checksum (``checkCompactEntries(_:_:recordsStart:recordsEnd:)``):
    ///   until then, lookups stay inside the file and trap on no bytes, but may answer
    ///   wrongly. The tables of the index are checked here all the same.
    package init(file: any StorageFile, expectedStore: FileHeader? = nil, backgroundChecksumMinimum: Int? = nil) throws {
        path = file.path
        mapping = try file.map()
        let bytes = mapping.bytes
        var pending: SnapshotChecksums?
        var indexAt = 0
        do {
            header = try FileHeader.decode(bytes, expected: .snapshot)
            if let expected = expectedStore {
                guard header.storeID == expected.storeID else {
                    throw CairnError.corrupt("snapshot belongs to another store (\(header.storeID))", offset: 16)
                }
                guard header.fileNumber == expected.fileNumber else {
                    throw CairnError.corrupt("snapshot header says file \(header.fileNumber), expected \(expected.fileNumber)", offset: 32)
                }
            }
            footer = try SnapshotFooter.decode(file: bytes)
            let (schemaBytes, afterSchema) = try SchemaBlock.read(file: bytes, at: Int(footer.schemaOffset),
                                                                  limit: Int(footer.indexOffset))
            schema = try SchemaCoding.decode(schemaBytes, base: Int(footer.schemaOffset) + 8)
            guard footer.lastSequence == header.baseSequence else {
                throw CairnError.corrupt("snapshot footer covers sequence \(footer.lastSequence) but its header says \(header.baseSequence)",
                                         offset: bytes.count - SnapshotFooter.size + 32)
            }
            recordsStart = afterSchema
            let indexOffset = Int(footer.indexOffset)
            indexAt = indexOffset
            let indexRange = indexOffset..<(indexOffset + Int(footer.indexLength))
            if let minimum = backgroundChecksumMinimum, indexRange.count >= minimum, Processors.count > 1 {
                pending = SnapshotChecksums(mapping: mapping, index: indexRange, expected: footer.indexChecksum)
            } else {
                guard ChecksumInParts.masked(UnsafeRawBufferPointer(rebasing: bytes[indexRange])) == footer.indexChecksum else {
                    throw Self.indexMismatch(at: indexOffset)
                }
            }
            checksums = pending
            index = try SnapshotIndex.decode(file: bytes, indexOffset: indexOffset, indexLength: Int(footer.indexLength),
                                             version: header.version)
            // Entities by number: the index may name up to 65,535 of them, so no linear search per row.
            let entities = Dictionary(schema.entities.map { ($0.number, $0) }, uniquingKeysWith: { first, _ in first })
            recordsEnd = try Self.checkAttributeIndexBlocks(index, entities: entities, file: bytes,
                                                            recordsStart: recordsStart, indexOffset: indexOffset)
            var positions = [Int32](repeating: -1, count: Int(index.entities.last?.entity ?? 0) + 1)
            var total = 0
            var firsts: [Int] = []
            for (position, range) in index.entities.enumerated() {
                firsts.append(total)
                guard entities[range.entity] != nil else {
                    throw CairnError.corrupt("snapshot index names entity \(range.entity), which the schema lacks", offset: indexOffset)
                }
                positions[Int(range.entity)] = Int32(position)
                total += range.count
            }
            guard UInt64(total) == footer.recordCount else {
                throw CairnError.corrupt("snapshot index holds \(total) records but the footer says \(footer.recordCount)",
                                         offset: bytes.count - SnapshotFooter.size + 24)
            }
            entityPositions = positions
            firstOrdinals = firsts
            checkedFrames = AtomicBitmap(count: header.version >= 3 ? total : 0)  // older frames are checked on every read
            if header.version >= 3, let pending {
                // The entries' structure is checked on another thread too, beside the
                // checksums; the spans, read from each entity's ends meanwhile, are what
                // that check finds when it passes (and it says so).
                let spans = Self.compactSpans(bytes, index)
                idSpans = spans
                let (index, recordsStart, recordsEnd, mapping) = (index, recordsStart, recordsEnd, mapping)
                pending.checkStructure {
                    let checked = try Self.checkCompactEntries(mapping.bytes, index, recordsStart: recordsStart, recordsEnd: recordsEnd)
                    guard checked == spans else {
                        throw CairnError.corrupt("snapshot index entries disagree with their anchors about the entities' first and last records",
                                                 offset: index.entities.first?.entriesOffset ?? 0)
                    }
                }
            } else if header.version >= 3 {
                idSpans = try Self.checkCompactEntries(bytes, index, recordsStart: recordsStart, recordsEnd: recordsEnd)
            } else {
                idSpans = try Self.checkFixedEntries(bytes, index, recordsStart: recordsStart, recordsEnd: recordsEnd)
            }
            // (After the structure's check has started: the blocks wait for it.)
            pending?.checkBlocks(index.attributeIndexes, in: mapping)
        } catch let error as CairnError {
            // A damaged index is reported as such, whatever its damage made fail first
            // (as when the checksum was checked before anything else).
            if let pending, !pending.indexMatches() {
                throw Self.indexMismatch(at: indexAt).located(in: file.path)
            }
            throw error.located(in: file.path)
        }
    }

    private static func indexMismatch(at offset: Int) -> CairnError {
        CairnError.corrupt("snapshot index checksum mismatch", offset: offset)
    }

    /// Throws if the index's checksum, computed in the background (see
    /// `init(file:expectedStore:backgroundChecksumMinimum:)`), does not match, or (the
    /// checksum matching) if its entries' structure, checked there after it, does not
    /// hold; waits for both.
    package func awaitIndexChecksum() throws {
        guard let checksums else { return }
        if !checksums.indexMatches() {
            throw Self.indexMismatch(at: Int(footer.indexOffset)).located(in: path)
        }
        if let failure = checksums.structureFailure() { throw failure.located(in: path) }
    }

    package var fileSize: Int { mapping.bytes.count }

    /// The record with the highest serial the snapshot holds, or nil if it holds none.
    package var highestID: RecordID? {
        idSpans.filter { $0.count > 0 }.map { RecordID(rawValue: $0.last) }.max { $0.serial < $1.serial }
    }

    /// Checks an attribute index block's checksum (once, before its entries are trusted).
    package func checkAttributeIndex(_ block: SnapshotIndex.AttributeIndex) throws {
        if let checksums, let row = index.attributeIndexes.firstIndex(of: block), checksums.blockMatches(row) { return }
        let bytes = UnsafeRawBufferPointer(rebasing: mapping.bytes[block.entryBytes])
        guard ChecksumInParts.masked(bytes) == block.checksum else {
            throw CairnError.corrupt("attribute index of entity \(block.entity), attribute \(block.attribute): checksum mismatch",
                                     offset: block.blockOffset).located(in: path)
        }
    }

    /// Whether `block`'s entries are in ``IndexOrder`` (FORMAT.md §6.6): not for an index of
    /// reals, decimals or dates written before format version 4, which a store does not use.
    package func storedOrderHolds(_ block: SnapshotIndex.AttributeIndex) -> Bool {
        guard let entity = schema.entity(number: block.entity), block.attribute < entity.attributes.count else { return false }
        return IndexOrder.storedOrderHolds(entity.attributes[block.attribute].type, version: header.version)
    }

    /// Checks all of an attribute index (for `cairn verify`): checksum, every record of the
    /// entity listed exactly once, in value order (FORMAT.md §6.6; not for an index whose
    /// order a store does not rely on, ``storedOrderHolds(_:)``).
    package func verifyAttributeIndex(_ block: SnapshotIndex.AttributeIndex) throws {
        let ordered = storedOrderHolds(block)
        try checkAttributeIndex(block)
        var seen = [Bool](repeating: false, count: block.count)
        var previous: (value: Value, id: RecordID)?
        for i in 0..<block.count {
            let (id, place) = try record(in: block, at: i)
            let at = block.blockOffset + i * block.entryWidth
            let position = self.position(in: block, at: i)
            guard !seen[position] else {
                throw CairnError.corrupt("attribute index of entity \(block.entity), attribute \(block.attribute) lists \(id) twice",
                                         offset: at).located(in: path)
            }
            seen[position] = true
            let record = try body(at: place.offset, id: id)  // every checksum, whatever was read before
            let value: Value
            do {
                value = try ValueCoding.value(at: block.attribute, in: record) ?? .null
            } catch let error as CairnError {
                throw error.located(in: path, base: Int64(fileOffset(of: record)))
            }
            if ordered, let previous {
                let order = IndexOrder.compare(previous.value, value)
                guard order == .orderedAscending || (order == .orderedSame && previous.id < id) else {
                    throw CairnError.corrupt("attribute index of entity \(block.entity), attribute \(block.attribute) is out of order at entry \(i) (\(id) after \(previous.id))",
                                             offset: at).located(in: path)
                }
            }
            previous = (value, id)
        }
    }

    /// The record position stored at place `i` of an attribute index.
    @inline(__always) private func position(in block: SnapshotIndex.AttributeIndex, at i: Int) -> Int {
        let at = block.blockOffset + i * block.entryWidth
        if block.entryWidth == 4 { return Int(UInt32(littleEndian: mapping.bytes.loadUnaligned(fromByteOffset: at, as: UInt32.self))) }
        var position = 0
        for k in 0..<block.entryWidth { position |= Int(mapping.bytes[at + k]) << (8 * k) }
        return position
    }

    /// The record at place `i` of an attribute index: its ID and where its frame is.
    package func record(in block: SnapshotIndex.AttributeIndex, at i: Int) throws -> (id: RecordID, place: Place) {
        let position = self.position(in: block, at: i)
        guard let (range, first) = rangeAndFirst(of: block.entity), position < range.count else {
            throw CairnError.corrupt("attribute index entry \(i) of entity \(block.entity) names position \(position), past its records",
                                     offset: block.blockOffset + i * block.entryWidth).located(in: path)
        }
        let (id, offset, size) = entry(range, position)
        return (RecordID(rawValue: id), Place(id: id, offset: offset, size: size, ordinal: first + position))
    }

    package func count(of entity: UInt16) -> Int {
        range(of: entity)?.count ?? 0
    }

    @inline(__always) private func range(of entity: UInt16) -> SnapshotIndex.EntityRange? {
        rangeAndFirst(of: entity)?.range
    }

    /// An entity's index range and the ordinal of its first record.
    @inline(__always) private func rangeAndFirst(of entity: UInt16) -> (range: SnapshotIndex.EntityRange, first: Int)? {
        position(of: entity).map { (index.entities[$0], firstOrdinals[$0]) }
    }

    /// An entity's position in `index.entities`, if the index has a row for it.
    @inline(__always) private func position(of entity: UInt16) -> Int? {
        let position = Int(entity) < entityPositions.count ? Int(entityPositions[Int(entity)]) : -1
        return position >= 0 ? position : nil
    }

    /// The ID and frame offset of place `i` of an entity's entries.
    /// The ID, frame offset and (version 3) frame size of place `i` of an entity's entries.
    @inline(__always) private func entry(_ range: SnapshotIndex.EntityRange, _ i: Int) -> (id: UInt64, offset: UInt64, size: UInt64) {
        let bytes = mapping.bytes
        guard header.version >= 3 else {
            let at = range.entriesOffset + i * SnapshotIndex.entrySize
            return (UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self)),
                    UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self)), 0)
        }
        var walk = GroupWalk(bytes, range, group: i / SnapshotIndex.groupSize)
        for _ in 0..<(i % SnapshotIndex.groupSize) { walk.advance(bytes) }
        return (walk.id, walk.offset, walk.size)
    }

    /// Version 3: the entries of one group, one by one, from its anchor. The entries were
    /// checked at open, so reads here need no errors; they stay inside the mapping
    /// whatever the bytes say.
    private struct GroupWalk {
        package var id: UInt64
        package var offset: UInt64
        package var size: UInt64
        package var at: Int

        @inline(__always) package init(_ bytes: UnsafeRawBufferPointer, _ range: SnapshotIndex.EntityRange, group: Int) {
            let anchor = range.entriesOffset + group * SnapshotIndex.anchorSize
            id = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: anchor, as: UInt64.self))
            offset = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: anchor + 8, as: UInt64.self))
            at = range.entryBytesOffset + Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: anchor + 16, as: UInt32.self)))
            size = 0
            size = Self.varint(bytes, &at)
        }

        /// Moves to the group's next entry (the caller knows there is one).
        @inline(__always) package mutating func advance(_ bytes: UnsafeRawBufferPointer) {
            offset &+= size
            id &+= Self.varint(bytes, &at)
            size = Self.varint(bytes, &at)
        }

        @inline(__always) package static func varint(_ bytes: UnsafeRawBufferPointer, _ at: inout Int) -> UInt64 {
            if at < bytes.count, bytes[at] < 0x80 {  // deltas and sizes under 128: most of them
                at += 1
                return UInt64(bytes[at - 1])
            }
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while at < bytes.count, shift < 64 {
                let byte = bytes[at]
                at += 1
                result |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { break }
                shift += 7
            }
            return result
        }
    }

    /// Each entity's lowest and highest record ID and its count, as
    /// ``checkCompactEntries(_:_:recordsStart:recordsEnd:)`` finds them in a version-3 index
    /// whose structure holds, read from each entity's first anchor and last group alone.
    /// (On any bytes it stays inside the mapping; on an index whose structure does not
    /// hold, its answer means nothing.)
    static func compactSpans(_ bytes: UnsafeRawBufferPointer, _ index: SnapshotIndex) -> [IDSpan] {
        index.entities.map { range in
            guard range.count > 0 else {
                return IDSpan(first: 0, last: UInt64(range.entity) << RecordID.serialBits, count: 0)
            }
            let first = GroupWalk(bytes, range, group: 0).id
            var walk = GroupWalk(bytes, range, group: range.groups - 1)
            for _ in 1..<(range.count - (range.groups - 1) * SnapshotIndex.groupSize) { walk.advance(bytes) }
            return IDSpan(first: first, last: walk.id, count: range.count)
        }
    }

    /// The frame offset of `id`, or nil if the snapshot does not hold it.
    package func offset(of id: RecordID) -> Int? { place(of: id)?.offset }

    /// Where the frame of `id` is, or nil if the snapshot does not hold it.
    ///
    /// Serials are handed out in order and rarely skipped, so an entity's IDs are close
    /// to evenly spread: the first probes interpolate (one or two find the place in a dense
    /// run), and binary search takes over if they do not narrow the range fast. Version 3
    /// searches the anchors, then walks one group.
    package func place(of id: RecordID) -> Place? {
        guard let position = position(of: id.entity), idSpans[position].covers(id.rawValue) else { return nil }
        let range = index.entities[position], first = firstOrdinals[position]
        let wanted = id.rawValue
        let bytes = mapping.bytes
        if header.version >= 3 {
            // The last group whose first ID is ≤ wanted: it is in low..<high.
            let anchor = { (group: Int) in
                UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: range.entriesOffset + group * SnapshotIndex.anchorSize,
                                                         as: UInt64.self))
            }
            guard range.count > 0, wanted >= anchor(0) else { return nil }
            var low = 0, high = range.groups
            var probes = 0
            while high - low > 1 {
                let mid: Int
                if probes < 3 {
                    let first = anchor(low), last = anchor(high - 1)
                    if wanted >= last { low = high - 1; break }
                    let fraction = Double(wanted - first) / Double(last - first)
                    mid = min(high - 1, max(low + 1, low + Int(fraction * Double(high - 1 - low))))
                } else {
                    mid = (low + high) / 2
                }
                probes += 1
                if anchor(mid) <= wanted { low = mid } else { high = mid }
            }
            var walk = GroupWalk(bytes, range, group: low)
            let members = min(SnapshotIndex.groupSize, range.count - low * SnapshotIndex.groupSize)
            for member in 0..<members {
                if walk.id == wanted {
                    return Place(id: walk.id, offset: walk.offset, size: walk.size, ordinal: first + low * SnapshotIndex.groupSize + member)
                }
                if walk.id > wanted || member == members - 1 { return nil }
                walk.advance(bytes)
            }
            return nil
        }
        let entry = { (i: Int) in self.entry(range, i) }
        var low = 0, high = range.count  // the entry, if present, is in low..<high
        var probes = 0
        while low < high {
            let mid: Int
            if probes < 3 {
                let first = entry(low).id, last = entry(high - 1).id
                guard wanted >= first, wanted <= last else { return nil }
                let fraction = last == first ? 0 : Double(wanted - first) / Double(last - first)
                mid = min(high - 1, low + Int(fraction * Double(high - 1 - low)))
            } else {
                mid = (low + high) / 2
            }
            probes += 1
            let (candidate, offset, size) = entry(mid)
            if candidate == wanted { return Place(id: candidate, offset: offset, size: size, ordinal: first + mid) }
            if candidate < wanted { low = mid + 1 } else { high = mid }
        }
        return nil
    }

    /// Whether the snapshot holds `id`. An ID outside its entity's span is not held, and
    /// every ID inside a dense span is (the usual case after a compaction of records that
    /// were never deleted), so only a gapped span is searched: a log replayed at open, and
    /// each record a commit inserts, ask this once.
    package func contains(_ id: RecordID) -> Bool {
        guard let position = position(of: id.entity) else { return false }
        let span = idSpans[position]
        guard span.covers(id.rawValue) else { return false }
        return span.isDense || place(of: id) != nil
    }

    /// Where a record's frame is, as the index says: the ID it holds, its file offset and
    /// (version 3) size, and its ordinal among the snapshot's records (its bit in
    /// `checkedFrames`). Made only by the reader, from one index entry.
    package struct Place: Hashable, Sendable {
        fileprivate let id: UInt64
        package let offset: Int
        package let size: Int
        fileprivate let ordinal: Int

        fileprivate init(id: UInt64, offset: UInt64, size: UInt64, ordinal: Int) {
            self.id = id
            self.offset = Int(clamping: offset)
            self.size = Int(clamping: size)
            self.ordinal = ordinal
        }
    }

    /// The body of the record frame at `place`, checked as ``body(at:id:)-(Int,_)`` checks
    /// it, and against the frame size the index gives, the first time; later, a version-3
    /// frame's header and checksum are not read again.
    @inline(__always)
    package func body(at place: Place, id: RecordID) throws -> UnsafeRawBufferPointer {
        if id.rawValue == place.id, checkedFrames.contains(place.ordinal),
           let start = SnapshotRecord.checkedBodyStart(in: mapping.bytes, at: place.offset, end: place.offset + place.size) {
            return UnsafeRawBufferPointer(rebasing: mapping.bytes[start..<(place.offset + place.size)])
        }
        return try checkedBody(at: place, id: id)
    }

    /// ``body(at:id:)-(Place,_)`` the first time, and every time for `cairn verify`: every
    /// check (the checksum computed, the frame's size compared with the index's), then the
    /// frame's bit set.
    package func checkedBody(at place: Place, id: RecordID) throws -> UnsafeRawBufferPointer {
        let body = try body(at: place.offset, id: id)
        guard header.version >= 3 else { return body }
        let end = fileOffset(of: body) + body.count
        guard end - place.offset == place.size else {
            throw CairnError.corrupt("record frame of \(id) takes \(end - place.offset) bytes where the index says \(place.size)",
                                     offset: place.offset).located(in: path)
        }
        if id.rawValue == place.id { checkedFrames.insert(place.ordinal) }
        return body
    }

    /// The checked body of the record frame at `offset` (valid while `self` is alive),
    /// its checksum computed on every call.
    package func body(at offset: Int, id: RecordID) throws -> UnsafeRawBufferPointer {
        do {
            return try SnapshotRecord.body(in: mapping.bytes, at: offset, limit: recordsEnd, expected: id, version: header.version)
        } catch let error as CairnError {
            throw error.located(in: path)
        }
    }

    /// The checked record frame at `offset` as it is in the file, with its body, if this
    /// file's frames are those of the current format version (3 and 4 have the same), which
    /// a writer may copy as they are; nil for older versions.
    package func currentFrame(at place: Place, id: RecordID) throws -> (frame: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer)? {
        guard header.version >= 3 else { return nil }
        let body = try body(at: place, id: id)
        let end = fileOffset(of: body) + body.count
        return (UnsafeRawBufferPointer(rebasing: mapping.bytes[place.offset..<end]), body)
    }

    /// Where `body` starts in the file, if it lies in this snapshot's mapping (nil for a
    /// body held elsewhere, as the log's are).
    package func offset(of body: UnsafeRawBufferPointer) -> Int? {
        let start = fileOffset(of: body)
        return start >= 0 && start + body.count <= fileSize ? start : nil
    }

    /// Where `body`, a body returned by ``body(at:id:)``, starts in the file.
    package func fileOffset(of body: UnsafeRawBufferPointer) -> Int {
        Int(bitPattern: body.baseAddress) - Int(bitPattern: mapping.bytes.baseAddress)
    }

    /// Calls `body` for each record of `entity` in ID order: all of them, or with `groups`
    /// those of a run of index groups (``scanRuns(of:parts:minimumPerRun:)``).
    @inline(__always)
    package func forEach(entity: UInt16, groups: Range<Int>? = nil, _ body: (RecordID, Place) throws -> Void) rethrows {
        guard let (range, first) = rangeAndFirst(of: entity) else { return }
        guard header.version >= 3 else {
            for i in 0..<range.count {
                let (id, offset, size) = entry(range, i)
                try body(RecordID(rawValue: id), Place(id: id, offset: offset, size: size, ordinal: first + i))
            }
            return
        }
        let bytes = mapping.bytes
        let all = 0..<range.groups
        for group in (groups ?? all).clamped(to: all) {
            var walk = GroupWalk(bytes, range, group: group)
            let members = min(SnapshotIndex.groupSize, range.count - group * SnapshotIndex.groupSize)
            for member in 0..<members {
                if member > 0 { walk.advance(bytes) }
                try body(RecordID(rawValue: walk.id),
                         Place(id: walk.id, offset: walk.offset, size: walk.size, ordinal: first + group * SnapshotIndex.groupSize + member))
            }
        }
    }

    /// A run of an entity's index groups for a scan in parts, and the ID of its first record.
    package struct ScanRun: Sendable {
        package let groups: Range<Int>
        package let firstID: UInt64
    }

    /// `entity`'s records split into at most `parts` runs of whole index groups, of about
    /// equal size and at least `minimumPerRun` records each, in ID order; empty when they
    /// make fewer than two runs, or the file (older than version 3) has no groups.
    package func scanRuns(of entity: UInt16, parts: Int, minimumPerRun: Int) -> [ScanRun] {
        guard header.version >= 3, let (range, _) = rangeAndFirst(of: entity) else { return [] }
        let runs = min(parts, range.count / max(minimumPerRun, 1), range.groups)
        guard runs >= 2 else { return [] }
        return (0..<runs).map { run in
            let start = range.groups * run / runs, end = range.groups * (run + 1) / runs
            return ScanRun(groups: start..<end, firstID: GroupWalk(mapping.bytes, range, group: start).id)
        }
    }

    /// Every (ID, offset) of `entity`, in ID order.
    package func entries(of entity: UInt16) -> [(id: UInt64, offset: Int)] {
        var result: [(id: UInt64, offset: Int)] = []
        result.reserveCapacity(count(of: entity))
        forEach(entity: entity) { result.append(($0.rawValue, $1.offset)) }
        return result
    }
}

/// An entity's lowest and highest record ID in a snapshot, and how many records it has
/// there (which the index lists in strictly ascending ID order).
struct IDSpan: Sendable, Equatable {
    let first: UInt64
    let last: UInt64
    let count: Int

    /// Whether `id` lies between the lowest and highest ID (never, for no records).
    @inline(__always) func covers(_ id: UInt64) -> Bool { count > 0 && id >= first && id <= last }

    /// Whether every ID from the lowest to the highest is held: as many records as IDs in
    /// the span, all distinct. (The checks at open make `first` ≤ `last`; it is tested
    /// all the same, so no span can make the subtraction trap.)
    var isDense: Bool { count > 0 && first <= last && last - first == UInt64(count - 1) }
}
