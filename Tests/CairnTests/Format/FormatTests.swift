import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

@Suite struct CRCAndVarintTests {
    /// The word-at-a-time zero check finds a non-zero byte at every place, at every
    /// length and start (unaligned starts included).
    @Test func isAllZeroFindsEveryNonZeroByte() {
        for length in 0..<80 {  // the 32-byte steps, the words after them, the bytes after those
            for start in 0..<3 {
                var bytes = [UInt8](repeating: 0, count: start + length)
                #expect(bytes.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[start...]).isAllZero })
                for i in start..<(start + length) {
                    bytes[i] = 0x40
                    #expect(!bytes.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[start...]).isAllZero }, "\(length) \(start) \(i)")
                    bytes[i] = 0
                }
            }
        }
    }

    /// `varint` (in place, then the general path on failure) reads what its general path
    /// reads, to the same position, and fails where it fails: inputs of up to 12 bytes.
    @Test func varintAgreesWithItsGeneralPath() {
        var random = SplitMix64(seed: 11)
        for _ in 0..<5_000 {
            let bytes = (0..<Int(random.next() % 13)).map { _ in UInt8(truncatingIfNeeded: random.next() >> (random.next() % 2 == 0 ? 0 : 57)) }
            bytes.withUnsafeBytes { buffer in
                var a = ByteReader(buffer), b = ByteReader(buffer)
                let x = try? a.varint(), y = try? b.generalVarint()
                #expect(x == y && a.position == b.position, "\(bytes)")
            }
        }
    }

    /// `Varint.read` (in place, no errors) reads what `generalVarint` reads and fails where
    /// it fails, at any limit: lengths up to 12 bytes, the 10-byte overflow edge included.
    @Test func inPlaceVarintAgreesWithVarint() {
        var random = SplitMix64(seed: 19)
        var samples: [[UInt8]] = [[0x7F], [0x80, 0x01], [UInt8](repeating: 0xFF, count: 9) + [0x01],
                                  [UInt8](repeating: 0xFF, count: 9) + [0x02], [UInt8](repeating: 0x80, count: 11)]
        for _ in 0..<5_000 {
            samples.append((0..<Int(random.next() % 13)).map { _ in
                UInt8(truncatingIfNeeded: random.next() | (random.next() % 4 == 0 ? 0 : 0x80))
            })
        }
        for bytes in samples {
            bytes.withUnsafeBytes { buffer in
                for limit in 0...bytes.count {
                    var reader = ByteReader(UnsafeRawBufferPointer(rebasing: buffer[..<limit]))
                    var at = 0
                    let expected = try? reader.generalVarint(), found = Varint.read(buffer, &at, limit: limit)
                    #expect(expected == found && (found == nil || at == reader.position), "\(bytes) limit \(limit)")
                }
            }
        }
    }

    /// `count`'s one-byte fast path answers as the general path: the same count, position
    /// and refusals, for counts near each maximum and item sizes 0, 1 and 8.
    @Test func countFastPathAgreesWithTheGeneralPath() {
        var random = SplitMix64(seed: 13)
        for _ in 0..<5_000 {
            let bytes = (0..<Int(random.next() % 12)).map { _ in UInt8(truncatingIfNeeded: random.next() >> (random.next() % 2 == 0 ? 0 : 57)) }
            let maximum = Int(random.next() % 140), itemSize = [0, 1, 8][Int(random.next() % 3)]
            bytes.withUnsafeBytes { buffer in
                var a = ByteReader(buffer), b = ByteReader(buffer)
                let x = try? a.count("count", maximum: maximum, minimumItemSize: itemSize)
                let y = try? b.generalCount("count", maximum: maximum, minimumItemSize: itemSize)
                #expect(x == y && a.position == b.position, "\(bytes) max \(maximum) size \(itemSize)")
            }
        }
    }

    /// `commonInt64` (short varints inline, longer ones eight bytes at once) reads an int64
    /// where `value()` reads one, the same value to the same position, and nothing else;
    /// it leaves to `value()` only a 10-byte varint. `commonValue` answers as it does for
    /// int64s. Encoded integers of every length, cut short, and random bytes after a tag.
    @Test func commonInt64AgreesWithCommonValue() {
        var random = SplitMix64(seed: 23)
        var samples: [[UInt8]] = []
        for shift in 0..<64 {
            for value in [Int64(1) << shift, 0 &- (Int64(1) << shift), (Int64(1) << shift) &- 1] {
                var bytes = ValueCoding.encode([.int64(value), .bool(true)])
                bytes.removeFirst()
                samples.append(bytes)
                samples.append(Array(bytes.dropLast(Int(random.next() % UInt64(bytes.count)))))
            }
        }
        for _ in 0..<3_000 {
            samples.append([Value.Tag.int64.rawValue] + (0..<Int(random.next() % 14)).map { _ in
                UInt8(truncatingIfNeeded: random.next() | (random.next() % 3 == 0 ? 0 : 0x80))
            })
            samples.append([UInt8(truncatingIfNeeded: random.next())] + (0..<Int(random.next() % 10)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        }
        for bytes in samples {
            bytes.withUnsafeBytes { buffer in
                var a = ByteReader(buffer), b = ByteReader(buffer), c = ByteReader(buffer)
                let fast = a.commonInt64()
                let general: Int64?
                if case .int64(let x)? = try? b.value() { general = x } else { general = nil }
                if let fast {
                    #expect(fast == general && a.position == b.position, "\(bytes)")
                } else {
                    #expect(a.position == 0, "\(bytes)")
                    #expect(general == nil || b.position == 11, "\(bytes): only a 10-byte varint is left to value()")
                }
                if case .int64(let x)? = c.commonValue() {
                    #expect(x == fast && c.position == a.position, "\(bytes)")
                } else if buffer.first == Value.Tag.int64.rawValue {
                    #expect(fast == nil && c.position == 0, "\(bytes)")
                }
            }
        }
    }

    /// Where `value()` reads a value, `skipValue()` steps over the same bytes; where
    /// `skipValue()` fails, so does `value()` (it checks more: UTF-8, ranges, parses).
    @Test func skipValueStepsOverWhatValueReads() {
        var random = SplitMix64(seed: 17)
        let samples: [Value] = [.null, .bool(true), .bool(false), .int8(-3), .int16(300), .int32(-70_000), .int64(0),
                                .int64(.max), .int64(.min), .int64(-1), .float(1.5), .double(.nan), .double(-2), .string(""),
                                .string("héllo"), .bytes(Data([1, 2, 3])), .date(Date(timeIntervalSinceReferenceDate: 5)),
                                .uuid(UUID()), .url(URL(string: "https://example.com/a")!), .decimal(Decimal(string: "1.25")!),
                                .archived(Data([9])), .reference(42), .references([1, 2, 3])]
        for round in 0..<3_000 {
            var bytes = ValueCoding.encode((0..<Int(random.next() % 4 + 1)).map { _ in samples[Int(random.next() % UInt64(samples.count))] })
            bytes.removeFirst()  // the value count: the rest is one value after another
            if round % 2 == 1, !bytes.isEmpty {  // damage: a changed byte, or a cut
                if random.next() % 2 == 0 {
                    bytes[Int(random.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: random.next())
                } else {
                    bytes.removeLast(Int(random.next() % UInt64(bytes.count)) + 1)
                }
            }
            bytes.withUnsafeBytes { buffer in
                var reading = ByteReader(buffer), skipping = ByteReader(buffer)
                while !reading.isAtEnd {
                    let read = (try? reading.value()) != nil
                    let skipped = (try? skipping.skipValue()) != nil
                    if read {
                        #expect(skipped && skipping.position == reading.position, "\(bytes)")
                    }
                    if !skipped { #expect(!read, "\(bytes)") }
                    if !read || !skipped { break }
                }
            }
        }
    }

    @Test func crc32cKnownVectors() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum(Array(0..<32)) == 0x46DD_794E)
        #expect(CRC32C.checksum([]) == 0)
    }

    @Test func crcIncrementalEqualsWhole() {
        var random = SplitMix64(seed: 7)
        let bytes = (0..<1000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        for split in [0, 1, 7, 8, 9, 500, 999, 1000] {
            let first = bytes[..<split].withUnsafeBytes { CRC32C.update(0, $0) }
            let whole = bytes[split...].withUnsafeBytes { CRC32C.update(first, $0) }
            #expect(whole == CRC32C.checksum(bytes), "split \(split)")
        }
    }

    /// Two pieces' checksums combine into the checksum of the whole, for pieces of any
    /// length (empty, short, and long enough for the three-stream path).
    @Test func crcOfTwoPiecesCombinesIntoTheWhole() {
        var random = SplitMix64(seed: 13)
        let bytes = (0..<(4 * CRC32C.streamBlock + 77)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        var splits = [0, 1, 2, 7, 8, 9, 4096, bytes.count - 1, bytes.count]
        splits += (0..<40).map { _ in Int(random.next() % UInt64(bytes.count + 1)) }
        for split in splits {
            let first = CRC32C.checksum(bytes[..<split]), second = CRC32C.checksum(bytes[split...])
            #expect(CRC32C.combine(first, second, secondLength: bytes.count - split) == CRC32C.checksum(bytes), "split \(split)")
        }
    }

    /// A checksum taken in parts on several threads is the checksum of the whole, however
    /// the buffer divides (lengths not a multiple of the parts, parts of one page more).
    @Test func aChecksumInPartsIsTheWholeChecksum() {
        var random = SplitMix64(seed: 17)
        let bytes = (0..<(3 * ChecksumInParts.minimumPerPart + 4_099)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        for count in [ChecksumInParts.minimumPerPart - 1, 2 * ChecksumInParts.minimumPerPart, 2 * ChecksumInParts.minimumPerPart + 5, bytes.count] {
            let whole = bytes[..<count].withUnsafeBytes { CRC32C.masked($0) }
            for parts in 1...4 {
                #expect(bytes[..<count].withUnsafeBytes { ChecksumInParts.masked($0, parts: parts) } == whole, "\(count) bytes, \(parts) parts")
            }
        }
    }

    /// Inputs of three stream blocks or more take the three-stream path; every length
    /// around its edges, from any starting CRC and split anywhere, must give the CRC of
    /// the plain bit-at-a-time definition.
    @Test func longInputsGiveTheBitwiseCRC() {
        func bitwise(_ crc: UInt32, _ bytes: ArraySlice<UInt8>) -> UInt32 {
            var c = ~crc
            for byte in bytes {
                c ^= UInt32(byte)
                for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
            }
            return ~c
        }
        var random = SplitMix64(seed: 11)
        let block = CRC32C.streamBlock
        let bytes = (0..<(7 * block + 21)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        var lengths = [3 * block - 1, 3 * block, 3 * block + 1, 3 * block + 8, 6 * block, 6 * block + 7, bytes.count]
        lengths += (0..<6).map { _ in Int(random.next() % UInt64(bytes.count)) }
        for length in lengths {
            let start = UInt32(truncatingIfNeeded: random.next())
            let expected = bitwise(start, bytes[..<length])
            #expect(bytes[..<length].withUnsafeBytes { CRC32C.update(start, $0) } == expected, "length \(length)")
            let split = Int(random.next() % UInt64(length + 1))
            let first = bytes[..<split].withUnsafeBytes { CRC32C.update(start, $0) }
            #expect(bytes[split..<length].withUnsafeBytes { CRC32C.update(first, $0) } == expected, "length \(length), split \(split)")
        }
    }

    @Test func maskRoundTrips() {
        var random = SplitMix64(seed: 9)
        for _ in 0..<1000 {
            let crc = UInt32(truncatingIfNeeded: random.next())
            #expect(CRC32C.unmask(CRC32C.mask(crc)) == crc)
            #expect(CRC32C.mask(crc) != crc || crc == 0x4D58_4E0C || true)
        }
        #expect(CRC32C.mask(0) == 0xA282_EAD8)
    }

    /// Strings are read from raw bytes by decoding and comparing (``String/init(validating:as:)``
    /// for a raw buffer): it accepts exactly the bytes the library's validating initializer
    /// accepts, with the same string, over well-formed text of every length (small and
    /// native strings), and ill-formed bytes of every kind (overlong forms, surrogates,
    /// code points past U+10FFFF, truncated sequences whose replacement is as long as they
    /// are, lone continuation bytes, 0xFE and 0xFF), alone and inside text, and random bytes.
    @Test func stringsAreValidatedAsTheLibraryValidatesThem() {
        var inputs: [[UInt8]] = [[], Array("k12345".utf8), Array("shared-prefix-number-1234567".utf8),
                                 Array("héllo wörld 漢字 🏔️ e\u{301}".utf8), Array("a\0b".utf8), [0xEF, 0xBF, 0xBD]]
        let bad: [[UInt8]] = [[0xF0, 0x90, 0x80], [0xE0, 0x80, 0x80], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
                              [0x80], [0xBF], [0xFE], [0xFF], [0xC3], [0xE2, 0x82], [0xF8, 0x88, 0x80, 0x80, 0x80]]
        for piece in bad {
            inputs.append(piece)
            inputs.append(Array("abc".utf8) + piece)
            inputs.append(piece + Array("xyz".utf8))
            inputs.append(Array(String(repeating: "long text ", count: 4).utf8) + piece + Array("é".utf8))
        }
        var random = SplitMix64(seed: 41)
        for _ in 0..<20_000 {
            let count = Int(random.next() % 24)
            var bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            // Mostly text, with a stray byte now and then: ill-formed in many ways.
            if random.next() % 2 == 0 { bytes = bytes.map { $0 & 0x7F | (random.next() % 6 == 0 ? 0x80 : 0) } }
            inputs.append(bytes)
        }
        var valid = 0
        for bytes in inputs {
            let expected = bytes.withUnsafeBufferPointer { String(validating: $0, as: UTF8.self) }
            let read = bytes.withUnsafeBytes { String(validating: $0, as: UTF8.self) }
            #expect(read == expected && read.map { Array($0.utf8) == bytes } ?? true, "\(bytes)")
            if expected != nil { valid += 1 }
        }
        #expect(valid > 1_000 && valid < inputs.count - 1_000)
    }

    @Test func varintsRoundTripAndRejectOverflow() throws {
        let values: [UInt64] = [0, 1, 127, 128, 255, 300, 16383, 16384, UInt64(UInt32.max), UInt64.max - 1, UInt64.max]
        var writer = ByteWriter()
        for v in values { writer.varint(v) }
        for v in [Int64.min, -1, 0, 1, Int64.max] { writer.signedVarint(v) }
        try writer.bytes.withUnsafeBytes { buffer throws in
            var reader = ByteReader(buffer)
            for v in values { let read = try reader.varint(); #expect(read == v) }
            for v in [Int64.min, -1, 0, 1, Int64.max] { let read = try reader.signedVarint(); #expect(read == v) }
            #expect(reader.isAtEnd)
        }
        // Eleven continuation bytes, or a tenth byte above 1: overflow, not a trap.
        for bad in [[UInt8](repeating: 0xFF, count: 11), [UInt8](repeating: 0x80, count: 9) + [0x02], [0x80, 0x80]] {
            bad.withUnsafeBytes { buffer in
                var reader = ByteReader(buffer, base: 100)
                #expect(throws: CairnError.self) { try reader.varint() }
            }
        }
    }

    /// `varintSize` and `TransactionCoding.encodedSize` (a commit reserves its buffer by
    /// them) give what the writers write, at every varint length's edges.
    @Test func encodedSizesAreWhatIsWritten() {
        for bits in 0...64 {
            for v in [bits == 0 ? 0 : (UInt64(1) << (bits - 1)), bits == 64 ? .max : (UInt64(1) << bits) &- 1] {
                var writer = ByteWriter()
                writer.varint(v)
                #expect(ByteWriter.varintSize(v) == writer.count, "\(v)")
            }
        }
        let operations: [RecordOperation] = [.put(RecordID(rawValue: 1), body: []), .delete(RecordID(rawValue: 2)),
                                       .put(RecordID(rawValue: 3), body: [UInt8](repeating: 7, count: 127)),
                                       .put(RecordID(rawValue: 4), body: [UInt8](repeating: 7, count: 128)),
                                       .put(RecordID(rawValue: .max), body: [UInt8](repeating: 1, count: 20_000))]
        for count in 0...operations.count {
            var writer = ByteWriter()
            TransactionCoding.encode(Array(operations.prefix(count)), timestamp: 99, into: &writer)
            #expect(TransactionCoding.encodedSize(Array(operations.prefix(count))) == writer.count)
        }
    }

    /// The decoder's fast path for common values (`ByteReader.commonValue`) agrees with the
    /// general one on every input: random bytes led by the tags it handles — values, short
    /// and overlong varints, 9- and 10-byte varints, truncated payloads — give the same
    /// value and the same position, or it declines and the general path decides.
    @Test func commonValueFastPathAgreesWithTheGeneralDecoder() throws {
        var random = SplitMix64(seed: 5)
        var decoded = 0
        for _ in 0..<20_000 {
            let tags: [UInt8] = [0, 1, 2, 6, 8, 5, 9]
            var bytes = [tags[Int(random.next() % UInt64(tags.count))]]
            let length = Int(random.next() % 12)
            for _ in 0..<length {
                // Mostly continuation bytes, so long varints come up often.
                bytes.append(random.next() % 3 == 0 ? UInt8(truncatingIfNeeded: random.next() & 0x7F) : UInt8(truncatingIfNeeded: random.next()) | 0x80)
            }
            if random.next() % 2 == 0 { bytes.append(0x01) }
            try bytes.withUnsafeBytes { buffer in
                var reader = ByteReader(buffer)
                let expected = Result { try reader.value() }
                var fast = ByteReader(buffer)
                if let value = fast.commonValue() {
                    decoded += 1
                    let general = try expected.get()
                    #expect(general == value || (value.isNaN && general.isNaN), "\(bytes)")
                    #expect(fast.position == reader.position, "\(bytes)")
                } else {
                    #expect(fast.position == 0, "\(bytes)")
                }
            }
        }
        #expect(decoded > 5_000)
    }

    /// What `Value.same` answers: `==`, except that reals and dates are compared by their
    /// bits (a NaN is the same as the same NaN; -0.0 is not 0.0) and strings by their UTF-8.
    static func sameByDefinition(_ a: Value, _ b: Value) -> Bool {
        switch (a, b) {
        case (.double(let x), .double(let y)): return x.bitPattern == y.bitPattern
        case (.float(let x), .float(let y)): return x.bitPattern == y.bitPattern
        case (.date(let x), .date(let y)):
            return x.timeIntervalSinceReferenceDate.bitPattern == y.timeIntervalSinceReferenceDate.bitPattern
        case (.string(let x), .string(let y)): return Array(x.utf8) == Array(y.utf8)
        default: return a == b
        }
    }

    /// `Value.same`, the copy-free check of writes and changed keys, answers as
    /// ``sameByDefinition(_:_:)``, and two values it takes for the same encode alike (a
    /// write it drops loses nothing): random pairs of every kind, equal pairs, NaNs, both
    /// zeros, and strings equal by `==` but spelled otherwise.
    @Test func sameAnswersAsItsDefinitionAndEncodesAlike() {
        var generator = ValueGenerator(random: SplitMix64(seed: 17))
        var pairs: [(Value, Value)] = [(.double(.nan), .double(.nan)), (.double(-0.0), .double(0)), (.null, .null),
                                       (.double(.nan), .double(-.nan)), (.float(.nan), .float(.nan)), (.float(.nan), .float(.signalingNaN)),
                                       (.float(-0.0), .float(0)),
                                       (.int64(1), .int32(1)), (.reference(3), .references([3])), (.bool(true), .int8(1)),
                                       (.date(Date(timeIntervalSinceReferenceDate: .nan)), .date(Date(timeIntervalSinceReferenceDate: .nan))),
                                       (.date(Date(timeIntervalSinceReferenceDate: .nan)), .date(Date(timeIntervalSinceReferenceDate: -.nan))),
                                       (.date(Date(timeIntervalSinceReferenceDate: -0.0)), .date(Date(timeIntervalSinceReferenceDate: 0))),
                                       (.string("\u{E9}"), .string("e\u{301}")), (.string("a\u{301}\u{323}"), .string("a\u{323}\u{301}")),
                                       (.string(""), .string("")), (.string("x"), .string("")),
                                       (.string(String(repeating: "\u{E9}", count: 40)), .string(String(repeating: "e\u{301}", count: 40))),
                                       (.decimal(Decimal(string: "1.00") ?? 0), .decimal(1))]
        for _ in 0..<5_000 {
            let a = generator.value(), b = generator.value()
            pairs.append((a, b))
            pairs.append((a, a))
        }
        for (a, b) in pairs {
            #expect(Value.same(a, b) == Self.sameByDefinition(a, b), "\(a) vs \(b)")
            if Value.same(a, b) {
                #expect(ValueCoding.encode([a]) == ValueCoding.encode([b]), "\(a) vs \(b)")
            }
        }
    }

    /// `Value.sameValues`, how a save tells a changed object from an unchanged one, answers
    /// as the arrays' `==` of ``sameByDefinition(_:_:)``: equal arrays, arrays one value
    /// apart (each kind, NaN included), different lengths, and arrays sharing storage.
    @Test func sameValuesAnswersAsItsDefinition() {
        var generator = ValueGenerator(random: SplitMix64(seed: 23))
        var random = SplitMix64(seed: 37)
        var pairs: [([Value], [Value])] = [([], []), ([.null], []), ([.double(.nan)], [.double(.nan)]),
                                           ([.double(.nan)], [.double(-.nan)])]
        for _ in 0..<2_000 {
            let a = (0..<Int(random.next() % 8)).map { _ in generator.value() }
            var b = Value.uniqueCopy(of: a)
            pairs.append((a, b))
            pairs.append((a, a))
            if !b.isEmpty {
                b[Int(random.next() % UInt64(b.count))] = generator.value()
                pairs.append((a, b))
            }
            pairs.append((a, a + [generator.value()]))
        }
        for (a, b) in pairs {
            let expected = a.count == b.count && zip(a, b).allSatisfy { Self.sameByDefinition($0, $1) }
            #expect(Value.sameValues(a, b) == expected, "\(a) vs \(b)")
        }
    }

    /// `Value.uniqueCopy` (bytes moved at once when no value holds a reference, value by
    /// value otherwise) gives equal values in storage of its own, for arrays of only
    /// plain kinds, of mixed kinds, and empty ones.
    @Test func uniqueCopiesAreEqualAndOwnTheirStorage() {
        var generator = ValueGenerator(random: SplitMix64(seed: 29))
        var random = SplitMix64(seed: 31)
        let plain: [Value] = [.null, .bool(true), .int8(-3), .int16(300), .int32(-70_000), .int64(.min), .float(1.5),
                              .double(-0.0), .date(Date(timeIntervalSinceReferenceDate: 12.5)), .reference(99)]
        var arrays: [[Value]] = [[], plain]
        for _ in 0..<300 {
            let count = Int(random.next() % 12)
            arrays.append((0..<count).map { _ in random.next() % 2 == 0 ? plain[Int(random.next() % 10)] : generator.value() })
            arrays.append((0..<count).map { _ in plain[Int(random.next() % 10)] })
        }
        for values in arrays {
            var copy = Value.uniqueCopy(of: values)
            #expect(copy == values)
            let shared = copy.withUnsafeBufferPointer { a in values.withUnsafeBufferPointer { b in a.baseAddress == b.baseAddress } }
            #expect(!shared || values.isEmpty)
            if !copy.isEmpty {
                copy[0] = .string("changed")
                #expect(values.first != .string("changed"))
            }
        }
    }

    /// The schema check's kind bits agree with `AttributeType.accepts` for every type and
    /// random values of every kind, and null is its own kind.
    @Test func kindBitsAnswerAsAccepts() {
        var generator = ValueGenerator(random: SplitMix64(seed: 23))
        var values: [Value] = [.null, .bool(false), .bool(true), .reference(1), .references([])]
        for _ in 0..<2_000 { values.append(generator.value()) }
        for value in values {
            #expect((value.kindBit == Value.nullKindBit) == value.isNull, "\(value)")
            for type in AttributeType.allCases {
                #expect((value.kindBit & type.acceptedKinds != 0) == type.accepts(value), "\(type) \(value)")
            }
        }
    }

    @Test func countsAreCheckedBeforeAllocating() {
        var writer = ByteWriter()
        writer.u8(Value.Tag.references.rawValue)
        writer.varint(1 << 25)  // claims 32 M references with 0 bytes behind it
        writer.bytes.withUnsafeBytes { buffer in
            var reader = ByteReader(buffer)
            do {
                _ = try reader.value()
                Issue.record("a hostile count was accepted")
            } catch let error as CairnError {
                #expect(error.code == .corrupt)
                #expect(error.offset == 1)
                #expect(error.message.contains("reference count"))
            } catch { Issue.record("unexpected \(error)") }
        }
    }
}

/// Generates random values of every type, seeded.
struct ValueGenerator {
    var random: SplitMix64

    mutating func int(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }

    mutating func string() -> String {
        let alphabet = Array("aZé漢字🙂 \u{0} \"\\\n-_.İıß")
        return String((0..<int(20)).map { _ in alphabet[int(alphabet.count)] })
    }

    mutating func value() -> Value {
        switch int(17) {
        case 0: return .null
        case 1: return .bool(random.next() % 2 == 0)
        case 2: return .int8(Int8(truncatingIfNeeded: random.next()))
        case 3: return .int16(Int16(truncatingIfNeeded: random.next()))
        case 4: return .int32(Int32(truncatingIfNeeded: random.next()))
        case 5: return .int64(Int64(bitPattern: random.next() >> UInt64(int(64))))
        case 6: return .float(Float(bitPattern: UInt32(truncatingIfNeeded: random.next())))
        case 7: return .double(Double(bitPattern: random.next()))
        case 8: return .string(string())
        case 9: return .bytes(Data((0..<int(40)).map { _ in UInt8(truncatingIfNeeded: random.next()) }))
        case 10: return .date(Date(timeIntervalSinceReferenceDate: Double(Int64(bitPattern: random.next()) % 10_000_000_000) / 1000))
        case 11: return .uuid(UUID(uuid: withUnsafeBytes(of: (random.next(), random.next())) { $0.load(as: uuid_t.self) }))
        case 12: return .url(URL(string: "https://example.com/\(int(1000))/p?q=\(int(99))#f")!)
        case 13:
            let text = "\(random.next() % 2 == 0 ? "-" : "")\(int(1_000_000)).\(int(1000))"
            return .decimal(Decimal(string: text)!)
        case 14: return .archived(Data((0..<int(40)).map { _ in UInt8(truncatingIfNeeded: random.next()) }))
        case 15: return .reference(random.next())
        default: return .references((0..<int(6)).map { _ in random.next() })
        }
    }
}

@Suite struct ValueDescriptionTests {
    /// Every value describes itself without trapping, dates that are NaN, infinite or far
    /// out too (a record may hold them, and error messages and `description`s show values).
    @Test func datesOfEveryKindAreDescribed() {
        let times: [Double] = [.nan, -.nan, .infinity, -.infinity, 1e300, -1e300, 9.1e15, -9.1e15, 8.9e15, -8.9e15, 0, -0.0, 1e-300]
        for t in times {
            let text = Value.date(Date(timeIntervalSinceReferenceDate: t)).description
            #expect(!text.isEmpty, "\(t)")
        }
        #expect(Value.date(Date(timeIntervalSinceReferenceDate: .nan)).description == "date(nan s since 2001)")
        #expect(Value.date(Date(timeIntervalSinceReferenceDate: 0)).description == Date(timeIntervalSinceReferenceDate: 0).description)
    }
}

@Suite struct NaNOrderTests {
    /// A NaN real, decimal or date orders with no value (so it equals none and lies in no
    /// range), as predicates test it, while the index order and a sort put it after every
    /// other value, the same as another NaN. (A NaN date or decimal, compared by < and >
    /// alone, was the same as every date or number: a scan found it equal to all of them,
    /// an index lookup to some.)
    @Test func aNaNOrdersWithNothingAndSortsLast() {
        let nans: [Value] = [.double(.nan), .float(.nan), .decimal(.nan), .date(Date(timeIntervalSinceReferenceDate: .nan))]
        let others: [Value] = [.double(1), .float(-2), .decimal(Decimal(3)), .int64(4), .date(Date(timeIntervalSinceReferenceDate: 5)),
                               .double(.infinity), .date(Date(timeIntervalSinceReferenceDate: -.infinity))]
        for nan in nans {
            for other in others + nans {
                #expect(ValueOrder.order(nan, other, []) == nil, "\(nan) against \(other)")
                #expect(ValueOrder.order(other, nan, []) == nil, "\(other) against \(nan)")
                #expect(!ValueOrder.equal(nan, other, []), "\(nan) == \(other)")
                #expect(!SecondaryIndex.matches(other, .equal([nan])))
                #expect(!SecondaryIndex.matches(nan, .range(lower: other, lowerInclusive: true, upper: nil, upperInclusive: false)))
                #expect(!SecondaryIndex.matches(nan, .range(lower: nil, lowerInclusive: false, upper: other, upperInclusive: true)))
            }
            for other in others + [.null] {
                #expect(IndexOrder.compare(nan, other) == .orderedDescending, "\(nan) after \(other)")
                #expect(IndexOrder.compare(other, nan) == .orderedAscending)
            }
            for second in nans { #expect(IndexOrder.compare(nan, second) == .orderedSame) }
        }
        // Reals against decimals, by value: infinite ones, and ones beyond a decimal's
        // exponent, large and small (`Decimal(_:)` traps on infinity, and makes NaN of those).
        for (real, expected) in [(Double.infinity, ComparisonResult.orderedDescending), (-.infinity, .orderedAscending),
                                 (1e300, .orderedDescending), (-1e300, .orderedAscending), (2.5, .orderedDescending), (-0.0, .orderedAscending),
                                 (1e-200, .orderedAscending), (-1e-200, .orderedAscending), (1.0, .orderedSame)] {
            #expect(ValueOrder.order(.double(real), .decimal(Decimal(1)), []) == expected, "\(real)")
            #expect(ValueOrder.order(.decimal(Decimal(1)), .double(real), []) == expected.reversed, "\(real)")
        }
        #expect(ValueOrder.decimal(.nan).isNaN && ValueOrder.decimal(.infinity).isNaN && ValueOrder.decimal(2.5) == Decimal(2.5))
    }
}

@Suite struct ValueRoundTripTests {
    /// Encode → decode → encode gives the same bytes, and equal values where equality is defined.
    @Test(arguments: Seeds.list())
    func everyValueTypeRoundTrips(seed: UInt64) throws {
        var generator = ValueGenerator(random: SplitMix64(seed: seed))
        var seenTags = Set<UInt8>()
        for round in 0..<2000 {
            let values = (0..<generator.int(8)).map { _ in generator.value() }
            let encoded = ValueCoding.encode(values)
            let decoded = try ValueCoding.decode(encoded)
            #expect(ValueCoding.encode(decoded) == encoded, "seed \(seed) round \(round): \(values)")
            for (a, b) in zip(values, decoded) {
                if case .double(let x) = a, x.isNaN { continue }
                if case .float(let x) = a, x.isNaN { continue }
                #expect(a == b, "seed \(seed) round \(round)")
            }
            for v in values { seenTags.insert(ValueCoding.encode([v])[1]) }
        }
        #expect(seenTags.count == Value.Tag.allCases.count, "every tag exercised")
    }

    /// The commit path's scratch-buffer encoder writes the same bytes as ``ByteWriter``,
    /// including for bodies larger than its buffer (which it must grow, not truncate).
    @Test(arguments: Seeds.list())
    func scratchEncoderMatchesTheArrayEncoder(seed: UInt64) throws {
        var generator = ValueGenerator(random: SplitMix64(seed: seed))
        let encoder = RecordEncoder(capacity: 16)
        for round in 0..<2000 {
            var values = (0..<generator.int(12)).map { _ in generator.value() }
            if round % 100 == 0 { values.append(.string(String(repeating: "é", count: 3000 + generator.int(5000)))) }
            let expected = ValueCoding.encode(values)
            #expect(try encoder.encode(values).bytes == expected, "seed \(seed) round \(round): \(values.prefix(4))")
        }
    }

    @Test func specialValues() throws {
        let values: [Value] = [.decimal(.nan), .decimal(Decimal(string: "-0.000000000000000000001")!),
                               .decimal(Decimal(string: "12345678901234567890123456789012345678")!),
                               .double(.infinity), .double(-0.0), .float(.nan), .string(""), .bytes(Data()),
                               .references([]), .int64(.min), .int16(.min), .int32(.max), .date(.distantPast),
                               .url(URL(string: "file:///tmp/a%20b")!)]
        let decoded = try ValueCoding.decode(ValueCoding.encode(values))
        #expect(ValueCoding.encode(decoded) == ValueCoding.encode(values))
        guard case .decimal(let nan) = decoded[0] else { Issue.record("not a decimal"); return }
        #expect(nan.isNaN)
    }

    /// Random bytes never trap the value decoder; any failure is a `.corrupt` error with an offset.
    @Test(arguments: Seeds.list())
    func randomBytesNeverTrap(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        for _ in 0..<5000 {
            let bytes = (0..<Int(random.next() % 48)).map { _ in UInt8(truncatingIfNeeded: random.next() % 24) }
            do { _ = try ValueCoding.decode(bytes) } catch let error as CairnError {
                #expect(error.code == .corrupt && error.offset != nil, "seed \(seed)")
            } catch { Issue.record("unexpected \(error)") }
        }
    }

    @Test func outOfRangeNarrowIntegersAreCorrupt() {
        var writer = ByteWriter()
        writer.u8(Value.Tag.int16.rawValue)
        writer.signedVarint(70_000)
        #expect(throws: CairnError.self) { try ValueCoding.decode(writer.bytes) }
        var bad = ByteWriter()
        bad.u8(Value.Tag.string.rawValue)
        bad.varint(2)
        bad.append([0xC3, 0x28])  // invalid UTF-8
        #expect(throws: CairnError.self) { try ValueCoding.decode(bad.bytes) }
    }
}

/// Random schemas, seeded.
struct SchemaGenerator {
    var values: ValueGenerator

    mutating func name(_ prefix: String, _ n: Int) -> String { "\(prefix)\(n)_\(values.string().filter(\.isLetter).prefix(5))" }

    mutating func schema() -> Schema {
        let entityCount = 1 + values.int(5)
        var entities: [EntityDescription] = []
        for e in 0..<entityCount {
            var entity = EntityDescription(name: "Entity\(e)", number: UInt16(e + 1 + values.int(3) * 100))
            for a in 0..<values.int(8) {
                let type = AttributeType.allCases[values.int(AttributeType.allCases.count)]
                var attribute = AttributeDescription(name: name("a", a), type: type, isOptional: values.int(2) == 0,
                                                     isIndexed: values.int(3) == 0,
                                                     renamingIdentifier: values.int(4) == 0 ? "old\(a)" : nil)
                if values.int(3) == 0 {
                    var candidate = values.value()
                    for _ in 0..<200 where !type.accepts(candidate) { candidate = values.value() }
                    if type.accepts(candidate) { attribute.defaultValue = candidate }
                }
                entity.attributes.append(attribute)
            }
            if let first = entity.attributes.first, values.int(2) == 0 { entity.uniqueness = [[first.name]] }
            if entity.attributes.count > 1, values.int(2) == 0 { entity.indexes = [entity.attributes.prefix(2).map(\.name)] }
            entity.renamingIdentifier = values.int(3) == 0 ? "Old\(e)" : nil
            entities.append(entity)
        }
        // Pair up relationships with inverses.
        for i in 0..<entities.count where values.int(2) == 0 {
            let j = values.int(entities.count)
            let forward = "to\(j)_\(i)", backward = "from\(i)_\(j)"
            guard i != j else { continue }
            entities[i].relationships.append(RelationshipDescription(
                name: forward, destination: entities[j].name, isToMany: values.int(2) == 0, inverse: backward,
                deleteRule: DeleteRule.allCases[values.int(4)], isOptional: values.int(2) == 0))
            entities[j].relationships.append(RelationshipDescription(
                name: backward, destination: entities[i].name, isToMany: values.int(2) == 0, inverse: forward))
        }
        var numbers = Set<UInt16>()
        entities = entities.filter { numbers.insert($0.number).inserted }
        return Schema(version: UInt32(values.int(100)), entities: entities.filter { entity in
            entity.relationships.allSatisfy { r in entities.contains { $0.name == r.destination } }
        })
    }
}

@Suite struct SchemaCodingTests {
    @Test(arguments: Seeds.list())
    func schemaRoundTrips(seed: UInt64) throws {
        var generator = SchemaGenerator(values: ValueGenerator(random: SplitMix64(seed: seed)))
        for round in 0..<300 {
            let schema = generator.schema()
            guard (try? schema.validate()) != nil else { continue }
            let bytes = SchemaCoding.encode(schema)
            let decoded = try bytes.withUnsafeBytes { try SchemaCoding.decode($0) }
            #expect(SchemaCoding.encode(decoded) == bytes, "seed \(seed) round \(round)")
            #expect(decoded.versionHash == schema.versionHash, "seed \(seed) round \(round)")
            #expect(decoded.entities.map(\.name) == schema.entities.map(\.name))
        }
    }

    @Test func hashIgnoresVersionAndRenamingButNotLayout() {
        var schema = TestSchemas.people
        let hash = schema.versionHash
        schema.version = 9
        schema.entities[0].renamingIdentifier = "Human"
        #expect(schema.versionHash == hash)
        schema.entities[0].attributes[1].type = .int32
        #expect(schema.versionHash != hash)
    }

    @Test func everyTruncationOfASchemaIsRejected() {
        let bytes = SchemaCoding.encode(TestSchemas.people)
        for cut in 0..<bytes.count {
            #expect(throws: CairnError.self, "cut \(cut)") {
                try bytes[..<cut].withUnsafeBytes { try SchemaCoding.decode($0) }
            }
        }
    }

    @Test func invalidSchemasAreRefusedWithTheirReason() {
        var schema = TestSchemas.people
        schema.entities[1].relationships[0].inverse = "nothing"
        #expect { try schema.validate() } throws: { ($0 as? CairnError)?.message.contains("DVD.owner") == true }
        schema = TestSchemas.people
        schema.entities[1].number = 1
        #expect { try schema.validate() } throws: { ($0 as? CairnError)?.message.contains("number 1") == true }
    }
}

@Suite struct HeaderTests {
    let header = FileHeader(kind: .log, storeID: UUID(), fileNumber: 7, baseSequence: 42, createdMilliseconds: 1)

    @Test func roundTrips() throws {
        let bytes = header.encoded()
        #expect(bytes.count == FileHeader.size)
        #expect(try bytes.withUnsafeBytes { try FileHeader.decode($0, expected: .log) } == header)
    }

    @Test func validationOrderNamesWhatFailed() {
        func error(_ bytes: [UInt8], _ kind: FileHeader.Kind = .log) -> CairnError? {
            do { _ = try bytes.withUnsafeBytes { try FileHeader.decode($0, expected: kind) }; return nil }
            catch { return error as? CairnError }
        }
        #expect(error(header.encoded(), .snapshot)?.message.contains("found a log file") == true)
        var bytes = header.encoded()
        bytes[0] ^= 1
        #expect(error(bytes)?.message.contains("magic") == true)
        bytes = header.encoded()
        bytes[8] = UInt8(FileHeader.readableVersions.upperBound + 1)
        #expect(error(bytes)?.code == .unsupportedVersion)
        #expect(error(bytes)?.message.contains("version \(FileHeader.readableVersions.upperBound + 1)") == true)
        bytes[8] = 0
        #expect(error(bytes)?.code == .unsupportedVersion)
        bytes = header.encoded()
        bytes[20] ^= 4
        #expect(error(bytes)?.message.contains("checksum") == true)
        #expect(error(Array(header.encoded().prefix(10)))?.message.contains("too short") == true)
    }
}

private extension Value {
    var isNaN: Bool { if case .double(let x) = self { return x.isNaN } else { return false } }
}

@Suite struct StringOrderTests {
    /// Strings compare as one strict total order, by scalars after canonical composition
    /// (FORMAT.md §6.6): each pair exactly one of before, after or the same, the same only
    /// for equal strings, and transitive, over text in both normal forms with shared
    /// prefixes. (Swift's `<` on Linux answers neither way for "e\u{301}" against "é0",
    /// which had made them the same, and puts a decomposed "éé" after "éé1"; its order was
    /// not transitive.) The index order sorts them the same way.
    @Test func stringsCompareAsOneTotalOrder() throws {
        var texts: [String] = []
        for base in ["", "a", "B", "e", "é", "e\u{301}", "ö", "o\u{308}", "z", "日本"] {
            texts.append(base)
            for tail in ["0", "1", "e", "é", "e\u{301}", "é1", "e\u{301}1"] { texts.append(base + tail) }
        }
        func order(_ a: String, _ b: String) -> ComparisonResult { ValueOrder.sortOrder(.string(a), .string(b), localizedCaseInsensitive: false) }
        var problems: [String] = []
        for a in texts {
            for b in texts {
                let ab = order(a, b), ba = order(b, a)
                if (ab == .orderedSame) != (a == b) { problems.append("\(a.unicodeScalars.map(\.value)) vs \(b.unicodeScalars.map(\.value)): \(ab.rawValue)") }
                if ab.rawValue != -ba.rawValue { problems.append("\(a.unicodeScalars.map(\.value)) vs \(b.unicodeScalars.map(\.value)) not antisymmetric") }
                guard ab == .orderedAscending else { continue }
                for c in texts where order(b, c) == .orderedAscending && order(a, c) != .orderedAscending {
                    problems.append("not transitive: \([a, b, c].map { $0.unicodeScalars.map(\.value) })")
                }
            }
        }
        #expect(problems.isEmpty, "\(problems.prefix(5))")
        // The index order of these strings sorts them as pairwise comparison does.
        let positions = IndexOrder.sortedPositions(texts.map { .string($0) })
        for (i, j) in zip(positions, positions.dropFirst()) {
            #expect(order(texts[i], texts[j]) != .orderedDescending, "\(texts[i]) before \(texts[j])")
        }
    }
}

extension StringOrderTests {
    /// An index run of strings (``IndexOrder/sortedPositions(_:)``, which compares the
    /// strings' first eight bytes before the strings) is the order of comparing them two by
    /// two, equal strings by position: strings that share their first eight bytes or
    /// differ only past them, proper prefixes, NUL bytes against a shorter string's end,
    /// text in both normal forms (whose bytes differ in the first eight), repeats, nils.
    @Test func anIndexRunOfStringsIsTheirPairwiseOrder() {
        var texts: [String] = ["", "\0", "a", "a\0", "a\0\0b", "abcdefg", "abcdefgh", "abcdefgh\0", "abcdefgh0", "abcdefgh1",
                               "abcdefgi", "abcdefg\u{FF}", "abcdefgé", "abcdefge\u{301}", "abcdefgh" + String(repeating: "z", count: 40),
                               "ééééé", "e\u{301}ééé", "ééée\u{301}é", "ééééé0", "日本語のテキスト", "日本語", "\u{10FFFF}", "zzzzzzzzz"]
        texts += texts.reversed()  // each string twice: ties go by position
        var random = SplitMix64(seed: 17)
        for _ in 0..<300 {
            let length = Int(random.next() % 12)
            texts.append(String((0..<length).map { _ in Character(UnicodeScalar(UInt8(97 + random.next() % 3))) }))
        }
        var values: [Value] = texts.map { .string($0) }
        values.insert(.null, at: 7)
        values.append(.null)
        let expected = values.indices.sorted { i, j in
            switch IndexOrder.compare(values[i], values[j]) {
            case .orderedAscending: return true
            case .orderedDescending: return false
            case .orderedSame: return i < j
            }
        }
        #expect(IndexOrder.sortedPositions(values) == expected)
    }
}

@Suite struct UUIDOrderTests {
    /// UUIDs compare by their bytes in the order of their upper-case strings (the order
    /// FORMAT.md §6.6 gives stored indexes): random pairs, and pairs that differ in one
    /// byte at each position, in either nibble, across the digit/letter boundary.
    @Test func bytesOrderAsTheUpperCaseStrings() {
        var random = SplitMix64(seed: 41)
        func uuid(_ bytes: [UInt8]) -> UUID {
            UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                        bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
        }
        func randomBytes() -> [UInt8] { (0..<16).map { _ in UInt8(truncatingIfNeeded: random.next()) } }
        var pairs: [(UUID, UUID)] = (0..<5_000).map { _ in (uuid(randomBytes()), uuid(randomBytes())) }
        for position in 0..<16 {
            for (a, b) in [(0x09, 0x0A), (0x90, 0xA0), (0x0F, 0x10), (0x00, 0xFF), (0x7F, 0x80), (0x3C, 0x3C)] as [(UInt8, UInt8)] {
                var x = randomBytes(), y = x
                x[position] = a; y[position] = b
                pairs.append((uuid(x), uuid(y)))
            }
        }
        var mismatches = 0
        for (x, y) in pairs {
            let strings: ComparisonResult = x.uuidString == y.uuidString ? .orderedSame
                : (x.uuidString < y.uuidString ? .orderedAscending : .orderedDescending)
            if ValueOrder.order(.uuid(x), .uuid(y), []) != strings { mismatches += 1 }
            if ValueOrder.order(.uuid(y), .uuid(x), []) != strings.reversed { mismatches += 1 }
        }
        #expect(mismatches == 0)
    }
}

private extension ComparisonResult {
    var reversed: ComparisonResult {
        switch self {
        case .orderedAscending: return .orderedDescending
        case .orderedDescending: return .orderedAscending
        case .orderedSame: return .orderedSame
        }
    }
}

@Suite struct LocalizedOrderTests {
    /// In every language the fast path is taken for, strings of ASCII letters, digits and
    /// spaces (random, with long shared prefixes and case changes) order as Foundation's
    /// locale-aware case-insensitive comparison orders them, and so do strings with other
    /// characters (which go through it); locales that reorder ASCII letters take no fast path.
    @Test func theFastPathOrdersAsFoundationDoes() {
        var random = SplitMix64(seed: 5)
        let plain = Array("aAbBzZ09 mM")
        let other = Array("aé-_.Ä,ß")
        func string(_ alphabet: [Character], _ length: Int) -> String {
            String((0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
        }
        for identifier in ["en_US", "en_GB", "de_DE", "fr_FR", "it_IT", "pt_BR", "nl_NL", "es_ES"] {
            let locale = Locale(identifier: identifier)
            let order = LocalizedOrder(locale: locale)
            #expect(order.foldsASCII, "\(identifier)")
            var mismatches: [String] = []
            for round in 0..<4_000 {
                let prefix = string(plain, Int(random.next() % 6))
                let x = prefix + string(round % 4 == 0 ? other : plain, Int(random.next() % 5))
                let y = prefix + string(round % 5 == 0 ? other : plain, Int(random.next() % 5))
                let expected = x.compare(y, options: [.caseInsensitive], range: nil, locale: locale)  // (Foundation itself, not foundationOrder)
                if order.compare(x, y) != expected { mismatches.append("'\(x)' '\(y)'") }
            }
            #expect(mismatches.isEmpty, "\(identifier): \(mismatches.prefix(5))")
        }
        for identifier in ["da_DK", "cs_CZ", "en_US_POSIX", "en_US@colNumeric=yes", "en-US-u-kn-true", "ja_JP"] {
            #expect(!LocalizedOrder(locale: Locale(identifier: identifier)).foldsASCII, "\(identifier)")
        }
        #expect(LocalizedOrder.foldedASCIIOrder("abc", "abé") == nil && LocalizedOrder.foldedASCIIOrder("a-b", "ab") == nil)
        #expect(LocalizedOrder.foldedASCIIOrder("Apple pie", "apple Pie") == .orderedSame)
        #expect(LocalizedOrder.foldedASCIIOrder("ab", "abc") == .orderedAscending)
    }
}
