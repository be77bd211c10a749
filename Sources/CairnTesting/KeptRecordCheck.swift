import CairnStorage

/// The promise of a ``RecordArena``, checked on one record: a record it keeps reads back,
/// value by value and whole, exactly as the store's decode reads it (so a fetched object
/// that reads its values in place sees what one decoded up front would), and a record the
/// decode takes whose values all decode in place is kept. Used by the value fuzz target
/// and the property tests.
package enum KeptRecordCheck {
    /// The first broken promise for `bytes` as a record of `entity`; nil if none.
    package static func mismatch(_ bytes: [UInt8], entity: EntityDescription) -> String? {
        let arena = RecordArena()
        let kept = StoredRecord.lending(bytes) { arena.keep($0, entity: entity) }
        let decoded = try? StoredRecord.lending(bytes) { try Store.decodeRecord($0, id: RecordID(entity: entity.number, serial: 1), entity: entity) }
        guard let kept else {
            // (Kept: a count stated in one byte, as a writer writes fewer than 128; a longer
            // varint of the same count decodes, and is left to the decode.)
            guard let decoded, !decoded.isEmpty, let first = bytes.first, first < 0x80,
                  decoded.allSatisfy(decodesInPlace), bytes.count + 8 + 2 * decoded.count <= RecordChunk.largestKept else { return nil }
            return "a record of in-place values that decodes (\(decoded)) was not kept"
        }
        guard let decoded else { return "a record the decode refuses was kept" }
        let all = StoredRow.kept(kept).values
        guard Value.sameValues(all, decoded) else { return "kept values \(all) differ from the decoded \(decoded)" }
        for slot in -1...decoded.count {
            let read = withExtendedLifetime(kept.owner) { kept.values.value(at: slot) }
            let expected = decoded.indices.contains(slot) ? decoded[slot] : .null
            guard Value.same(read, expected) else { return "slot \(slot) reads \(read) kept, \(expected) decoded" }
        }
        let fits = entity.firstValueOfWrongKind(in: decoded) == nil
        guard kept.values.fitsRequiredKinds == fits else {
            return "kept as \(fits ? "not " : "")fitting the required kinds, which \(decoded) do\(fits ? "" : " not")"
        }
        return nil
    }

    /// An entity that takes `values` in order, each optional: an attribute of each value's
    /// type, then a relationship for each reference or list of references (one to itself).
    /// Nil where an attribute's value follows a relationship's.
    package static func entity(taking values: [Value]) -> EntityDescription? {
        var attributes: [AttributeDescription] = [], relationships: [RelationshipDescription] = []
        for (index, value) in values.enumerated() {
            let type: AttributeType
            switch value {
            case .null where !relationships.isEmpty, .reference:
                relationships.append(RelationshipDescription(name: "r\(index)", destination: "Kept"))
                continue
            case .references:
                relationships.append(RelationshipDescription(name: "r\(index)", destination: "Kept", isToMany: true))
                continue
            case _ where !relationships.isEmpty: return nil
            case .null, .int64: type = .int64
            case .bool: type = .bool
            case .int8: type = .int8
            case .int16: type = .int16
            case .int32: type = .int32
            case .float: type = .float
            case .double: type = .double
            case .string: type = .string
            case .bytes: type = .binary
            case .date: type = .date
            case .uuid: type = .uuid
            case .url: type = .url
            case .decimal: type = .decimal
            case .archived: type = .archived
            }
            // (Every third attribute required: a nil there is stored, but not saved again.)
            attributes.append(AttributeDescription(name: "a\(index)", type: type, isOptional: index % 3 != 1))
        }
        return EntityDescription(name: "Kept", number: 1, attributes: attributes, relationships: relationships)
    }

    /// Whether `value` decodes without allocating, and so is read in place from a kept record.
    package static func decodesInPlace(_ value: Value) -> Bool {
        switch value {
        case .null, .bool, .int8, .int16, .int32, .int64, .float, .double, .date, .uuid, .reference: return true
        case .string, .bytes, .url, .decimal, .archived, .references: return false
        }
    }
}
