import Foundation
import Testing
@testable import CairnStorage

/// Record bodies share chunks of memory (``RecordBodies``): each must keep its own bytes
/// however many follow it, across chunk boundaries, for bodies small and large.
@Suite struct RecordBodyTests {
    @Test(arguments: [1, 2, 3])
    func eachBodyKeepsItsBytesWhateverFollows(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var bodies = RecordBodies()
        var made: [(RecordBody, [UInt8])] = []
        for _ in 0..<3_000 {
            // Mostly small, some past a quarter of a chunk, some empty.
            let count = switch random.next() % 20 {
            case 0: Int(random.next() % 40_000)
            case 1: 0
            default: Int(random.next() % 300)
            }
            let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let body = bytes.withUnsafeBytes { bodies.body(copying: $0) }
            made.append((body, bytes))
        }
        for (index, (body, bytes)) in made.enumerated() {
            #expect(body.count == bytes.count && body.bytes == bytes, "body \(index) of \(made.count)")
            #expect(body == RecordBody(bytes) && RecordFingerprint.of(body) == RecordFingerprint.of(bytes))
        }
        let encoded = ValueCoding.encode([.int64(7), .string("seven")])
        let large = bodies.body(capacity: encoded.count + 10) { base in
            encoded.withUnsafeBytes { base.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            return encoded.count
        }
        #expect(large.bytes == encoded && large.count == encoded.count)
    }

    /// A record that would encode past a transaction's limit is refused before it is
    /// encoded, named; one just under a value's limit is encoded. (One 256 MiB value shared
    /// by five slots: counted, never copied.)
    @Test func aRecordPastATransactionsLimitIsRefusedNamed() throws {
        let big = Data(count: FormatLimits.maxValueBytes)
        let encoder = RecordEncoder()
        #expect { try encoder.encode(Array(repeating: .bytes(big), count: 5), of: "Blob E3-7") } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .tooLarge && error.message.contains("Blob E3-7")
        }
        let small = try encoder.encode([.bytes(Data(count: 10)), .int64(1)])
        #expect(small.bytes == ValueCoding.encode([.bytes(Data(count: 10)), .int64(1)]))
    }
}
