/// The checks a snapshot's index passes at open (FORMAT.md §6.3, §6.6): entries in
/// order and inside the record area, groups and frames back to back, attribute index
/// blocks in place. Record frames themselves are checked when read.
extension SnapshotReader {
    /// Versions 1–2: every entry's ID is of its row's entity, IDs strictly ascend within a
    /// row, and the frame offset is a multiple of 8 with the frame header inside the
    /// record area. One pass over the index only. Returns each entity's lowest and highest
    /// record ID, in table order.
    static func checkFixedEntries(_ bytes: UnsafeRawBufferPointer, _ index: SnapshotIndex,
                                  recordsStart: Int, recordsEnd: Int) throws -> [IDSpan] {
        var spans: [IDSpan] = []
        for range in index.entities {
            var previous: UInt64? = nil
            var first: UInt64 = 0
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
                if previous == nil { first = id }
                previous = id
            }
            spans.append(IDSpan(first: first, last: previous ?? 0, count: range.count))
        }
        return spans
    }

    /// Version 3: walks every entity's anchors and entry bytes once. IDs are of the row's
    /// entity, serial ≥ 1, strictly ascending; each group's entry bytes start where the
    /// previous group's end and the last end with the entity's; frames follow one another
    /// from the start of the record area, each at least 7 bytes, the last ending inside
    /// it, followed by fewer than 8 bytes of zero padding. The record frames themselves
    /// are not read. Returns each entity's lowest and highest record ID, in table order.
    static func checkCompactEntries(_ bytes: UnsafeRawBufferPointer, _ index: SnapshotIndex,
                                    recordsStart: Int, recordsEnd: Int) throws -> [IDSpan] {
        var frameEnd = recordsStart
        var spans: [IDSpan] = []
        spans.reserveCapacity(index.entities.count)
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
            let first = range.count > 0 ? UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: range.entriesOffset, as: UInt64.self)) : 0
            spans.append(IDSpan(first: first, last: previous, count: range.count))
        }
        guard recordsEnd - frameEnd < 8 else {
            throw CairnError.corrupt("record frames end at \(frameEnd), \(recordsEnd - frameEnd) bytes before the record area does",
                                     offset: frameEnd)
        }
        for i in frameEnd..<recordsEnd where bytes[i] != 0 {
            throw CairnError.corrupt("record area padding is not zero", offset: i)
        }
        return spans
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
                let delta = try reader.varint("snapshot index ID delta")
                guard delta >= 1, delta <= highest - id else {
                    throw CairnError.corrupt("snapshot index ID delta \(delta) after \(RecordID(rawValue: id)) is zero or leaves entity \(entity)",
                                             offset: deltaAt)
                }
                id += delta
            }
            let sizeAt = reader.base + reader.position
            let size = try reader.varint("snapshot index frame size")
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
    static func fullGroupOfSingleBytes(_ bytes: UnsafeRawBufferPointer, from start: Int,
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
    static func checkAttributeIndexBlocks(_ index: SnapshotIndex, entities: [UInt16: EntityDescription],
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
}
