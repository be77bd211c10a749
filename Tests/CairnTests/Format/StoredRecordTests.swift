import Testing
@testable import CairnStorage

/// `StoredRecord`, the view of a record body that scans lend to the layers above: each
/// of its reads gives what decoding the whole body gives, and a damaged body is an
/// error, not a wrong value.
@Suite struct StoredRecordTests {
    static let values: [Value] = [.int64(7), .string("a string long enough to skip"), .null, .int32(-3),
                                  .double(2.5), .references([1, 2, 3]), .int16(12)]

    @Test func readsWhatADecodeReads() throws {
        let body = ValueCoding.encode(Self.values)
        try StoredRecord.lending(body) { record in
            let size = record.byteCount, all = try record.values()
            #expect(size == body.count)
            #expect(all == Self.values)
            var reused: [Value] = [.bool(true)]
            try record.decode(into: &reused)
            #expect(reused == Self.values)
            let each = try (0...Self.values.count).map { try record.value(at: $0) }
            #expect(each == Self.values.map { $0 } + [nil])
            let count = record.shortValueCount
            #expect(count == Self.values.count)
        }
    }

    @Test func stepsValueByValueAsTheReaderDoes() throws {
        try StoredRecord.lending(ValueCoding.encode(Self.values)) { record in
            // Step over the first six values by their ends, then read the int16 in place.
            var at = 1
            for _ in 0..<6 {
                let end = record.end(ofValueAt: at)
                let next = try #require(end)
                #expect(next > at)
                at = next
            }
            let read = record.integer(tagged: Value.Tag.int16.rawValue, at: at), size = record.byteCount
            #expect(read?.0 == 12 && read?.1 == size)
            // A tag that is not the stored one reads nothing.
            let misread = record.integer(tagged: Value.Tag.int64.rawValue, at: at)
            #expect(misread == nil)
            let first = try record.reading { cursor in
                try cursor.valueCount(maximum: 100) == Self.values.count && cursor.commonInt64() == 7
            }
            #expect(first)
        }
    }

    @Test func aCutBodyIsAnErrorNotAValue() throws {
        let body = ValueCoding.encode(Self.values)
        for cut in [1, 5, body.count / 2, body.count - 1] {
            try StoredRecord.lending(Array(body[..<cut])) { record in
                var failures = 0
                do { _ = try record.values() } catch is CairnError { failures += 1 }
                do { _ = try record.value(at: Self.values.count - 1) } catch is CairnError { failures += 1 }
                #expect(failures == 2, "cut at \(cut)")
            }
        }
        let empty = StoredRecord.lending([]) { $0.shortValueCount }
        #expect(empty == nil)
    }
}
