import Testing
@testable import Cairn

/// `IDMap` against `Dictionary` as the reference: seeded random inserts, overwrites,
/// removals (which shift probe runs back) and lookups, with key 0, keys that collide in
/// one bucket, and growth; after every step the two agree on count, and periodically on
/// every entry.
@Suite struct IDMapTests {
    @Test(arguments: Seeds.list())
    func agreesWithDictionary(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var map = IDMap<UInt64, Int>()
        var reference: [UInt64: Int] = [:]
        // A small key space forces overwrites, removals of present keys and long runs;
        // multiples of 2^61 all land in bucket 0 of a small table.
        func key() -> UInt64 {
            switch random.next() % 4 {
            case 0: return 0
            case 1: return (random.next() % 8) << 61
            default: return random.next() % 600
            }
        }
        for step in 0..<20_000 {
            let k = key()
            switch random.next() % 5 {
            case 0, 1:
                let v = Int(truncatingIfNeeded: random.next())
                map[k] = v
                reference[k] = v
            case 2:
                #expect(map.removeValue(forKey: k) == reference.removeValue(forKey: k))
            case 3:
                map[k] = nil
                reference[k] = nil
            default:
                #expect(map[k] == reference[k])
            }
            #expect(map.count == reference.count)
            if step % 997 == 0 {
                #expect(Dictionary(uniqueKeysWithValues: map.map { ($0.key, $0.value) }) == reference)
                for (k, v) in reference { #expect(map[k] == v) }
            }
        }
        #expect(Dictionary(uniqueKeysWithValues: map.map { ($0.key, $0.value) }) == reference)
        #expect(map.values.sorted() == reference.values.sorted())
    }

    @Test func growsAndEmptiesCompletely() {
        var map = IDMap<RecordID, Int>(minimumCapacity: 10)
        let ids = (1...50_000).map { RecordID(entity: UInt16($0 % 3 + 1), serial: UInt64($0)) }
        for (index, id) in ids.enumerated() { map[id] = index }
        #expect(map.count == ids.count)
        for (index, id) in ids.enumerated() { #expect(map[id] == index) }
        for id in ids.reversed() { map[id] = nil }
        var iterator = map.makeIterator()
        #expect(map.isEmpty && iterator.next() == nil)
        #expect(map[ids[0], default: -1] == -1)
        map.removeAll()
        #expect(map.isEmpty)
    }

    /// Copying one table into another in its iteration order (which is bucket order) must
    /// not pile keys into one run: with one unseeded hash for all tables it did, and a
    /// 200,000-record commit took seconds.
    @Test func copyingInIterationOrderKeepsProbesShort() {
        var source = IDMap<RecordID, Int>()
        for serial in 1...100_000 { source[RecordID(entity: 1, serial: UInt64(serial))] = serial }
        var copy = IDMap<UInt64, Int>()
        var longest = 0
        for (id, value) in source {
            copy[id.rawValue] = value
            if copy.count % 1_000 == 0 { longest = max(longest, copy.longestProbe) }
        }
        #expect(copy.count == source.count)
        #expect(source.longestProbe < 200 && longest < 200, "longest probes \(source.longestProbe), \(longest) while copying")
    }

    /// Copies share buckets until one writes (then they part); values are released once,
    /// whether they were moved by a resize, shifted by a removal or dropped with the map.
    @Test func copiesAreIndependentAndValuesAreReleasedOnce() {
        final class Tracked {
            static let live = Protected(0)
            let number: Int
            init(_ number: Int) { self.number = number; Self.live.withLock { $0 += 1 } }
            deinit { Self.live.withLock { $0 -= 1 } }
        }
        do {
            var original = IDMap<UInt64, Tracked>()
            for key in 1...1_000 as ClosedRange<UInt64> { original[key] = Tracked(Int(key)) }
            var copy = original
            for key in 1...500 as ClosedRange<UInt64> { copy[key] = nil }        // removal on a shared map
            copy[7] = Tracked(-7)
            for key in 1_001...3_000 as ClosedRange<UInt64> { copy[key] = Tracked(Int(key)) }  // resize
            #expect(original.count == 1_000 && (1...1_000 as ClosedRange<UInt64>).allSatisfy { original[$0]?.number == Int($0) })
            #expect(copy.count == 2_501 && copy[7]?.number == -7 && copy[8] == nil && copy[600]?.number == 600)
            let snapshot = copy
            copy.removeAll()
            #expect(snapshot.count == 2_501 && copy.isEmpty)
        }
        #expect(Tracked.live.withLock { $0 } == 0, "every value released once")
    }
}

/// `EntityMap` against `Dictionary`: reads, writes through optional chaining and the
/// `default:` subscript (which must modify in place), removal by assigning nil.
@Suite struct EntityMapTests {
    @Test(arguments: Seeds.list())
    func agreesWithDictionary(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var map = EntityMap<[Int]>()
        var reference: [UInt16: [Int]] = [:]
        for _ in 0..<5_000 {
            let number = UInt16(random.next() % 6)
            let value = Int(random.next() % 100)
            switch random.next() % 5 {
            case 0: map[number] = [value]; reference[number] = [value]
            case 1: map[number, default: []].append(value); reference[number, default: []].append(value)
            case 2: map[number]?.append(value); reference[number]?.append(value)
            case 3: map[number] = nil; reference[number] = nil
            default: #expect(map[number] == reference[number])
            }
            #expect(map.count == reference.count)
        }
        #expect(Dictionary(uniqueKeysWithValues: map.map { ($0.key, $0.value) }) == reference)
    }
}
