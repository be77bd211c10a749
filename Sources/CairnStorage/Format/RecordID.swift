import CairnCollections

/// A record's permanent identity (FORMAT.md §2.3 "Record IDs"): 64 bits, the entity
/// number in the top 16 and a store-wide serial number in the low 48. Serials are
/// never reused, so an ID names one record for the life of the store.
public struct RecordID: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    @inlinable public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// How many low bits of an ID hold the serial: 48.
    public static let serialBits = 48
    /// The largest serial an ID can hold: 2^48 − 1.
    public static let maxSerial: UInt64 = (1 << 48) - 1
    /// The highest serial a record brought in with its ID (`cairn import`) may keep
    /// (FORMAT.md §2.3): 2^40, past what any store hands out, and 255/256 of the serials
    /// above it left for later inserts.
    public static let maxImportedSerial: UInt64 = 1 << 40

    /// Bits of `serial` above the low 48 are ignored; the store never hands out such serials.
    @inlinable public init(entity: UInt16, serial: UInt64) {
        rawValue = UInt64(entity) << 48 | (serial & RecordID.maxSerial)
    }

    /// The entity number (FORMAT.md §3: numbers start at 1).
    @inlinable public var entity: UInt16 { UInt16(truncatingIfNeeded: rawValue >> 48) }
    /// The serial number, unique in the store (the low 48 bits).
    @inlinable public var serial: UInt64 { rawValue & RecordID.maxSerial }

    @inlinable public static func < (a: RecordID, b: RecordID) -> Bool { a.rawValue < b.rawValue }

    /// `E<entity>-<serial>`, e.g. `E2-17`.
    public var description: String { "E\(entity)-\(serial)" }

    /// Parses the form printed by ``description``.
    public init?(_ text: String) {
        guard text.hasPrefix("E"), let dash = text.firstIndex(of: "-"),
              let entity = UInt16(text[text.index(after: text.startIndex)..<dash]),
              let serial = UInt64(text[text.index(after: dash)...]), serial <= RecordID.maxSerial
        else { return nil }
        rawValue = UInt64(entity) << 48 | serial
    }
}

// Record IDs key the tables every object and record passes through (`rawValue` is the key).
extension RecordID: IDMapKey {}

/// A record body's fingerprint (FORMAT.md §2.2 bytes): its CRC-32C and length, never 0,
/// so that 0 can stand for no record. Kept undo compares records by it
/// (`Context.keepUndo(named:)`).
package enum RecordFingerprint {
    package static func of(_ body: UnsafeRawBufferPointer) -> UInt64 {
        UInt64(CRC32C.checksum(body)) << 32 | UInt64(truncatingIfNeeded: body.count) & 0x7FFF_FFFF | 1 << 31
    }

    package static func of(_ body: [UInt8]) -> UInt64 { body.withUnsafeBytes(of) }

    package static func of(_ body: RecordBody) -> UInt64 { body.withUnsafeBytes(of) }
}

extension RecordOperation {
    /// The fingerprint of what the operation leaves: its body's, or 0 for a delete.
    package var fingerprint: UInt64 {
        switch self {
        case .put(_, let body): RecordFingerprint.of(body)
        case .delete: 0
        }
    }
}

