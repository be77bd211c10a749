/// An open snapshot file: validated header, footer, schema and index; records are found
/// by binary search in the index and checked (CRC) when read, never all decoded at open.
final class SnapshotReader: Sendable {
    let path: String
    let mapping: FileMapping
    let header: FileHeader
    let footer: SnapshotFooter
    let schema: Schema
    let index: SnapshotIndex
    /// Records lie in `recordsStart ..< recordsEnd`.
    let recordsStart: Int
    let recordsEnd: Int
    /// Entity number → position in `index.entities`, or −1: a table, not a dictionary,
    /// since every lookup starts here (at most 65,536 entries, sized by the highest entity).
    private let entityPositions: [Int32]

    /// Opens and validates (in order: header, footer, schema, index) the snapshot `file`.
    init(file: any StorageFile, expectedStore: FileHeader? = nil) throws {
        path = file.path
        mapping = try file.map()
        let bytes = mapping.bytes
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
            let indexBytes = UnsafeRawBufferPointer(rebasing: bytes[indexOffset..<(indexOffset + Int(footer.indexLength))])
            guard CRC32C.masked(indexBytes) == footer.indexChecksum else {
                throw CairnError.corrupt("snapshot index checksum mismatch", offset: indexOffset)
            }
            index = try SnapshotIndex.decode(file: bytes, indexOffset: indexOffset, indexLength: Int(footer.indexLength),
                                             version: header.version)
            // Entities by number: the index may name up to 65,535 of them, so no linear search per row.
            let entities = Dictionary(schema.entities.map { ($0.number, $0) }, uniquingKeysWith: { first, _ in first })
            recordsEnd = try Self.checkAttributeIndexBlocks(index, entities: entities, file: bytes,
                                                            recordsStart: recordsStart, indexOffset: indexOffset)
            var positions = [Int32](repeating: -1, count: Int(index.entities.last?.entity ?? 0) + 1)
            var total = 0
            for (position, range) in index.entities.enumerated() {
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
            if header.version >= 3 {
                try Self.checkCompactEntries(bytes, index, recordsStart: recordsStart, recordsEnd: recordsEnd)
            } else {
                try Self.checkFixedEntries(bytes, index, recordsStart: recordsStart, recordsEnd: recordsEnd)
            }
        } catch let error as CairnError {
            throw error.located(in: file.path)
        }
    }

    /// Versions 1–2: every entry's ID is of its row's entity, IDs strictly ascend within a
    /// row, and the frame offset is a multiple of 8 with the frame header inside the
    /// record area. One pass over the index only.
    private static func checkFixedEntries(_ bytes: UnsafeRawBufferPointer, _ index: SnapshotIndex,
                                          recordsStart: Int, recordsEnd: Int) throws {
        for range in index.entities {
            var previous: UInt64? = nil
            for i in 0..<range.count {
                let at = range.entriesOffset + i * SnapshotIndex.entrySize
                let id = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self))
                let offset = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self))
                guard RecordID(rawValue: id).entity == range.entity, previous.map({ $0 < id }) ?? true,
                      offset >= UInt64(recordsStart), offset % 8 == 0,
                      offset + UInt64(SnapshotRecord.fixedHeaderSize) <= UInt64(recordsEnd) else {
                    throw CairnError.corrupt(
                        "snapshot index entry \(i) of entity \(range.entity) (\(RecordID(rawValue: id)) at \(offset)) is out of order, of another entity, or outside the record area",
                        offset: at)
                }
                previous = id
            }
        }
    }

    /// Version 3: walks every entity's anchors and entry bytes once. IDs are of the row's
    /// entity, serial ≥ 1, strictly ascending; each group's entry bytes start where the
    /// previous group's end and the last end with the entity's; frames follow one another
    /// from the start of the record area, each at least 7 bytes, the last ending inside
    /// it, followed by fewer than 8 bytes of zero padding. The record frames themselves
    /// are not read.
    private static func checkCompactEntries(_ bytes: UnsafeRawBufferPointer, _ index: SnapshotIndex,
                                            recordsStart: Int, recordsEnd: Int) throws {
        var frameEnd = recordsStart
        for range in index.entities {
            let lowest = UInt64(range.entity) << RecordID.serialBits, highest = lowest | RecordID.maxSerial
            var previous = lowest
            var reader = ByteReader(UnsafeRawBufferPointer(rebasing: bytes[range.entryBytesOffset..<(range.entryBytesOffset + range.entryBytesLength)]),
                                    base: range.entryBytesOffset)
            for group in 0..<range.groups {
                let at = range.entriesOffset + group * SnapshotIndex.anchorSize
                var id = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self))
                let offset = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self))
                let start = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: at + 16, as: UInt32.self)))
                guard id > previous, id <= highest else {
                    throw CairnError.corrupt("snapshot index anchor \(group) of entity \(range.entity) names \(RecordID(rawValue: id)), out of order or of another entity",
                                             offset: at)
                }
                guard offset == UInt64(frameEnd) else {
                    throw CairnError.corrupt("snapshot index anchor \(group) of entity \(range.entity) puts its first frame at \(offset), not at \(frameEnd) where the previous frame ends",
                                             offset: at + 8)
                }
                guard start == reader.position else {
                    throw CairnError.corrupt("snapshot index anchor \(group) of entity \(range.entity) starts its entries at \(start), not at \(reader.position) where the previous group's end",
                                             offset: at + 16)
                }
                let members = min(SnapshotIndex.groupSize, range.count - group * SnapshotIndex.groupSize)
                if let walked = quickGroup(bytes, from: range.entryBytesOffset + start,
                                           to: range.entryBytesOffset + range.entryBytesLength, members: members,
                                           id: id, highest: highest, frameEnd: frameEnd, recordsEnd: recordsEnd) {
                    (id, frameEnd) = (walked.id, walked.frameEnd)
                    reader.position = walked.end - range.entryBytesOffset
                    previous = id
                    continue
                }
                // Something in this group is amiss: walk it again, saying what.
                (id, frameEnd) = try checkGroup(&reader, members: members, id: id, highest: highest, frameEnd: frameEnd,
                                                recordsEnd: recordsEnd, entity: range.entity)
                previous = id
            }
            guard reader.isAtEnd else {
                throw CairnError.corrupt("snapshot index entries of entity \(range.entity) end \(reader.remaining) bytes before the next entity's",
                                         offset: reader.base + reader.position)
            }
        }
        guard recordsEnd - frameEnd < 8 else {
            throw CairnError.corrupt("record frames end at \(frameEnd), \(recordsEnd - frameEnd) bytes before the record area does",
                                     offset: frameEnd)
        }
        for i in frameEnd..<recordsEnd where bytes[i] != 0 {
            throw CairnError.corrupt("record area padding is not zero", offset: i)
        }
    }

    /// Walks one group's entries from `reader`'s position: the group's first record has
    /// ID `id` and its frame starts at `frameEnd`. Every ID delta is ≥ 1 and keeps the ID
    /// at most `highest`; every frame size is at least the minimum and ends inside the
    /// record area. Returns the group's last ID and the end of its last frame.
    static func checkGroup(_ reader: inout ByteReader, members: Int, id firstID: UInt64, highest: UInt64,
                           frameEnd firstFrame: Int, recordsEnd: Int, entity: UInt16) throws -> (id: UInt64, frameEnd: Int) {
        var id = firstID, frameEnd = firstFrame
        for member in 0..<members {
            if member > 0 {
                let deltaAt = reader.base + reader.position
                let delta = try reader.smallVarint("snapshot index ID delta")
                guard delta >= 1, delta <= highest - id else {
                    throw CairnError.corrupt("snapshot index ID delta \(delta) after \(RecordID(rawValue: id)) is zero or leaves entity \(entity)",
                                             offset: deltaAt)
                }
                id += delta
            }
            let sizeAt = reader.base + reader.position
            let size = try reader.smallVarint("snapshot index frame size")
            guard size >= UInt64(SnapshotRecord.minimumCompactSize), size <= UInt64(recordsEnd - frameEnd) else {
                throw CairnError.corrupt("snapshot index frame size \(size) of \(RecordID(rawValue: id)) is too small or runs past the record area",
                                         offset: sizeAt)
            }
            frameEnd += Int(size)
        }
        return (id, frameEnd)
    }

    /// ``checkGroup(_:members:id:highest:frameEnd:recordsEnd:entity:)`` for the common
    /// case, with no error context: every varint of one or two bytes and every check
    /// passing. `start..<end` are file offsets (the group's entries, the end of its
    /// entity's entry bytes). Returns the group's last ID, the end of its last frame and
    /// the end of its entries, or nil if anything is amiss or a varint is longer; the
    /// caller then walks the group with `checkGroup`, which says what. It accepts only
    /// what `checkGroup` accepts, with the same results (`quickGroupAgreesWithCheckGroup`).
    @inline(__always)
    static func quickGroup(_ bytes: UnsafeRawBufferPointer, from start: Int, to end: Int, members: Int,
                           id firstID: UInt64, highest: UInt64, frameEnd firstFrame: Int,
                           recordsEnd: Int) -> (id: UInt64, frameEnd: Int, end: Int)? {
        // (The caller's ranges hold these; they are checked so no input can make a read stray.)
        guard start >= 0, start <= end, end <= bytes.count, firstFrame <= recordsEnd else { return nil }
        if members == SnapshotIndex.groupSize, let full = fullGroupOfSingleBytes(bytes, from: start, to: end),
           full.deltas <= highest &- firstID, full.sizes <= UInt64(recordsEnd &- firstFrame) {
            return (firstID &+ full.deltas, firstFrame &+ Int(full.sizes), start &+ 2 * SnapshotIndex.groupSize &- 1)
        }
        var at = start, id = firstID, frameEnd = firstFrame
        @inline(__always) func varint() -> UInt64? {
            guard at < end else { return nil }
            let low = bytes[at]
            if low < 0x80 { at &+= 1; return UInt64(low) }
            guard at &+ 1 < end, bytes[at &+ 1] < 0x80 else { return nil }
            defer { at &+= 2 }
            return UInt64(low & 0x7F) | UInt64(bytes[at &+ 1]) << 7
        }
        for member in 0..<members {
            if member > 0 {
                guard let delta = varint(), delta >= 1, delta <= highest &- id else { return nil }
                id &+= delta
            }
            guard let size = varint(), size >= UInt64(SnapshotRecord.minimumCompactSize),
                  size <= UInt64(recordsEnd &- frameEnd) else { return nil }
            frameEnd &+= Int(size)
        }
        return (id, frameEnd, at)
    }

    /// A full group (16 records) whose 31 varints are all one byte — the usual group —
    /// read 8 bytes at a time: if no byte has its top bit set, every ID delta (odd
    /// places) is ≥ 1 and every frame size (even places) ≥ the minimum, returns the sum
    /// of the deltas and the sum of the sizes; otherwise nil. (A byte under 0x80 plus
    /// 0x7F, or plus 0x80 − the minimum, sets its top bit exactly when it is ≥ 1, or ≥
    /// the minimum, and never carries into the next byte.) `quickGroup` has checked that
    /// `start...end` lies in `bytes`.
    @inline(__always)
    private static func fullGroupOfSingleBytes(_ bytes: UnsafeRawBufferPointer, from start: Int,
                                               to end: Int) -> (deltas: UInt64, sizes: UInt64)? {
        let count = 2 * SnapshotIndex.groupSize - 1  // 31 bytes: 16 sizes, 15 deltas
        guard count <= end &- start else { return nil }
        @inline(__always) func word(_ offset: Int) -> UInt64 {
            UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: start &+ offset, as: UInt64.self))
        }
        // Places 0–7, 8–15, 16–23, and 24–30 (the last load starts at 23; byte 23 is shifted out).
        let words = (word(0), word(8), word(16), word(23) >> 8)
        let top: UInt64 = 0x8080_8080_8080_8080, even: UInt64 = 0x00FF_00FF_00FF_00FF
        guard (words.0 | words.1 | words.2 | words.3) & top == 0 else { return nil }
        let sizeBias = 0x0101_0101_0101_0101 &* UInt64(0x80 - SnapshotRecord.minimumCompactSize)
        let deltaBias: UInt64 = 0x7F7F_7F7F_7F7F_7F7F
        let sizeTops = top & even, deltaTops = top & ~even
        // The last word has 7 places: its eighth (a delta place) is the zero shifted in.
        let lastDeltaTops = deltaTops & 0x00FF_FFFF_FFFF_FFFF
        var sizesOK = (words.0 &+ sizeBias) & (words.1 &+ sizeBias) & (words.2 &+ sizeBias) & (words.3 &+ sizeBias) & sizeTops
        sizesOK ^= sizeTops
        var deltasOK = (words.0 &+ deltaBias) & (words.1 &+ deltaBias) & (words.2 &+ deltaBias) & deltaTops
        deltasOK ^= deltaTops
        let lastDeltasOK = ((words.3 &+ deltaBias) & lastDeltaTops) ^ lastDeltaTops
        guard sizesOK | deltasOK | lastDeltasOK == 0 else { return nil }
        // Sum of the four 16-bit lanes (each under 4 × 128, so no lane overflows).
        @inline(__always) func lanes(_ value: UInt64) -> UInt64 { (value &* 0x0001_0001_0001_0001) >> 48 }
        let sizes = lanes(words.0 & even) &+ lanes(words.1 & even) &+ lanes(words.2 & even) &+ lanes(words.3 & even)
        let deltas = lanes((words.0 >> 8) & even) &+ lanes((words.1 >> 8) & even) &+ lanes((words.2 >> 8) & even)
            &+ lanes((words.3 >> 8) & even)
        return (deltas, sizes)
    }

    /// Checks the attribute index blocks (FORMAT.md §6.6) lie back to back, each at a
    /// multiple of 8 with zero padding, from the end of the record area to the index, and
    /// index attributes of their entity. Returns the end of the record area. Their
    /// entries are checked when used (``checkAttributeIndex(_:)``).
    private static func checkAttributeIndexBlocks(_ index: SnapshotIndex, entities: [UInt16: EntityDescription],
                                                  file: UnsafeRawBufferPointer,
                                                  recordsStart: Int, indexOffset: Int) throws -> Int {
        guard let first = index.attributeIndexes.first else { return indexOffset }
        var expected = first.blockOffset
        guard expected >= recordsStart, expected % 8 == 0 else {
            throw CairnError.corrupt("attribute index block at \(expected) is not at a multiple of 8 after the schema block",
                                     offset: indexOffset + 8 + index.entities.count * SnapshotIndex.entityHeaderSize)
        }
        for (row, block) in index.attributeIndexes.enumerated() {
            let at = indexOffset + 8 + index.entities.count * SnapshotIndex.entityHeaderSize + row * SnapshotIndex.attributeIndexHeaderSize
            guard let entity = entities[block.entity], block.attribute < entity.attributes.count else {
                throw CairnError.corrupt("attribute index names attribute \(block.attribute) of entity \(block.entity), which the schema lacks",
                                         offset: at)
            }
            guard block.blockOffset == expected, block.paddedLength <= indexOffset - expected else {
                throw CairnError.corrupt("attribute index block of entity \(block.entity), attribute \(block.attribute) (\(block.count) entries at \(block.blockOffset)) does not follow the previous block or runs into the index",
                                         offset: at)
            }
            let end = expected + block.length
            expected += block.paddedLength
            for i in end..<expected where file[i] != 0 {
                throw CairnError.corrupt("attribute index block padding is not zero", offset: i)
            }
        }
        guard expected == indexOffset else {
            throw CairnError.corrupt("attribute index blocks end at \(expected), not at the index (\(indexOffset))", offset: expected)
        }
        return first.blockOffset
    }

    var fileSize: Int { mapping.bytes.count }

    /// Checks an attribute index block's checksum (once, before its entries are trusted).
    func checkAttributeIndex(_ block: SnapshotIndex.AttributeIndex) throws {
        let bytes = UnsafeRawBufferPointer(rebasing: mapping.bytes[block.blockOffset..<(block.blockOffset + block.length)])
        guard CRC32C.masked(bytes) == block.checksum else {
            throw CairnError.corrupt("attribute index of entity \(block.entity), attribute \(block.attribute): checksum mismatch",
                                     offset: block.blockOffset).located(in: path)
        }
    }

    /// Checks all of an attribute index (for `cairn verify`): checksum, every record of the
    /// entity listed exactly once, in value order (FORMAT.md §6.6).
    func verifyAttributeIndex(_ block: SnapshotIndex.AttributeIndex) throws {
        try checkAttributeIndex(block)
        var seen = [Bool](repeating: false, count: block.count)
        var previous: (value: Value, id: RecordID)?
        for i in 0..<block.count {
            let (id, offset) = try record(in: block, at: i)
            let at = block.blockOffset + i * block.entryWidth
            let position = self.position(in: block, at: i)
            guard !seen[position] else {
                throw CairnError.corrupt("attribute index of entity \(block.entity), attribute \(block.attribute) lists \(id) twice",
                                         offset: at).located(in: path)
            }
            seen[position] = true
            let record = try body(at: offset, id: id)
            let value: Value
            do {
                value = try ValueCoding.value(at: block.attribute, in: record) ?? .null
            } catch let error as CairnError {
                throw error.located(in: path, base: Int64(fileOffset(of: record)))
            }
            if let previous {
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

    /// The record at place `i` of an attribute index: its ID and frame offset.
    func record(in block: SnapshotIndex.AttributeIndex, at i: Int) throws -> (id: RecordID, offset: Int) {
        let position = self.position(in: block, at: i)
        guard let range = range(of: block.entity), position < range.count else {
            throw CairnError.corrupt("attribute index entry \(i) of entity \(block.entity) names position \(position), past its records",
                                     offset: block.blockOffset + i * block.entryWidth).located(in: path)
        }
        let (id, offset) = entry(range, position)
        return (RecordID(rawValue: id), Int(clamping: offset))
    }

    func count(of entity: UInt16) -> Int {
        range(of: entity)?.count ?? 0
    }

    @inline(__always) private func range(of entity: UInt16) -> SnapshotIndex.EntityRange? {
        let position = Int(entity) < entityPositions.count ? Int(entityPositions[Int(entity)]) : -1
        return position >= 0 ? index.entities[position] : nil
    }

    /// The ID and frame offset of place `i` of an entity's entries.
    @inline(__always) private func entry(_ range: SnapshotIndex.EntityRange, _ i: Int) -> (id: UInt64, offset: UInt64) {
        let bytes = mapping.bytes
        guard header.version >= 3 else {
            let at = range.entriesOffset + i * SnapshotIndex.entrySize
            return (UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self)),
                    UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self)))
        }
        var walk = GroupWalk(bytes, range, group: i / SnapshotIndex.groupSize)
        for _ in 0..<(i % SnapshotIndex.groupSize) { walk.advance(bytes) }
        return (walk.id, walk.offset)
    }

    /// Version 3: the entries of one group, one by one, from its anchor. The entries were
    /// checked at open, so reads here need no errors; they stay inside the mapping
    /// whatever the bytes say.
    private struct GroupWalk {
        var id: UInt64
        var offset: UInt64
        var size: UInt64
        var at: Int

        @inline(__always) init(_ bytes: UnsafeRawBufferPointer, _ range: SnapshotIndex.EntityRange, group: Int) {
            let anchor = range.entriesOffset + group * SnapshotIndex.anchorSize
            id = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: anchor, as: UInt64.self))
            offset = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: anchor + 8, as: UInt64.self))
            at = range.entryBytesOffset + Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: anchor + 16, as: UInt32.self)))
            size = 0
            size = Self.varint(bytes, &at)
        }

        /// Moves to the group's next entry (the caller knows there is one).
        @inline(__always) mutating func advance(_ bytes: UnsafeRawBufferPointer) {
            offset &+= size
            id &+= Self.varint(bytes, &at)
            size = Self.varint(bytes, &at)
        }

        @inline(__always) static func varint(_ bytes: UnsafeRawBufferPointer, _ at: inout Int) -> UInt64 {
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

    /// The frame offset of `id`, or nil if the snapshot does not hold it.
    ///
    /// Serials are handed out in order and rarely skipped, so an entity's IDs are close
    /// to evenly spread: the first probes interpolate (one or two find the place in a dense
    /// run), and binary search takes over if they do not narrow the range fast. Version 3
    /// searches the anchors, then walks one group.
    func offset(of id: RecordID) -> Int? {
        guard let range = range(of: id.entity) else { return nil }
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
                if walk.id == wanted { return Int(clamping: walk.offset) }
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
            let (candidate, offset) = entry(mid)
            if candidate == wanted { return Int(clamping: offset) }
            if candidate < wanted { low = mid + 1 } else { high = mid }
        }
        return nil
    }

    func contains(_ id: RecordID) -> Bool { offset(of: id) != nil }

    /// The checked body of the record frame at `offset` (valid while `self` is alive).
    func body(at offset: Int, id: RecordID) throws -> UnsafeRawBufferPointer {
        do {
            return try SnapshotRecord.body(in: mapping.bytes, at: offset, limit: recordsEnd, expected: id, version: header.version)
        } catch let error as CairnError {
            throw error.located(in: path)
        }
    }

    /// The checked record frame at `offset` as it is in the file, with its body, if this
    /// file is of the current format version (whose frames a writer may copy as they are);
    /// nil for older versions.
    func currentFrame(at offset: Int, id: RecordID) throws -> (frame: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer)? {
        guard header.version == FileHeader.currentVersion else { return nil }
        let body = try body(at: offset, id: id)
        let end = fileOffset(of: body) + body.count
        return (UnsafeRawBufferPointer(rebasing: mapping.bytes[offset..<end]), body)
    }

    /// Where `body`, a body returned by ``body(at:id:)``, starts in the file.
    func fileOffset(of body: UnsafeRawBufferPointer) -> Int {
        Int(bitPattern: body.baseAddress) - Int(bitPattern: mapping.bytes.baseAddress)
    }

    /// Calls `body` for each record of `entity` in ID order.
    func forEach(entity: UInt16, _ body: (RecordID, Int) throws -> Void) rethrows {
        guard let range = range(of: entity) else { return }
        guard header.version >= 3 else {
            for i in 0..<range.count {
                let (id, offset) = entry(range, i)
                try body(RecordID(rawValue: id), Int(clamping: offset))
            }
            return
        }
        let bytes = mapping.bytes
        for group in 0..<range.groups {
            var walk = GroupWalk(bytes, range, group: group)
            let members = min(SnapshotIndex.groupSize, range.count - group * SnapshotIndex.groupSize)
            for member in 0..<members {
                if member > 0 { walk.advance(bytes) }
                try body(RecordID(rawValue: walk.id), Int(clamping: walk.offset))
            }
        }
    }

    /// Every (ID, offset) of `entity`, in ID order.
    func entries(of entity: UInt16) -> [(id: UInt64, offset: Int)] {
        var result: [(id: UInt64, offset: Int)] = []
        result.reserveCapacity(count(of: entity))
        forEach(entity: entity) { result.append(($0.rawValue, $1)) }
        return result
    }
}
