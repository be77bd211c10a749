import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// An object keeps its saved values as the difference from its current ones. Checked
/// against a model that keeps both arrays whole (as objects did before): after every
/// step of a random mix of loads, single writes, whole-array assignments, saved-value
/// assignments and saves, the object's values, saved values, change flag and changed-slot
/// mask must be the model's, value for value and byte for byte.
/// A reading that can be NaN.
final class Measured: ManagedObject {
    @Attribute var reading: Double = 0
    @Attribute var note: String = ""
}

@Suite struct SavedValuesTests {
    /// Values that are `==` but not the same bytes are among them (0.0 and -0.0, two
    /// spellings of "é"), so a difference kept too loosely shows as a wrong saved value.
    static let pool: [Value] = [
        .null, .int64(1), .int64(2), .double(0.0), .double(-0.0), .double(.nan),
        .string("\u{E9}"), .string("e\u{301}"), .string("x"), .bool(true), .references([1, 2]),
    ]

    /// Equal and encoded alike.
    static func exactlyEqual(_ a: [Value]?, _ b: [Value]?) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        guard a.count == b.count else { return false }
        return zip(a, b).allSatisfy { x, y in
            switch (x, y) {
            case (.double(let p), .double(let q)): return p.bitPattern == q.bitPattern
            case (.string(let p), .string(let q)): return Array(p.utf8) == Array(q.utf8)
            default: return x == y
            }
        }
    }

    @Test(arguments: Seeds.list())
    func theDifferenceKeepsWhatTheWholeArraysHeld(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        func any() -> Value { Self.pool[Int(random.next() % UInt64(Self.pool.count))] }
        func row(_ count: Int) -> [Value] { (0..<count).map { _ in any() } }

        let object = Sited()
        object.inStore = true  // exists == inStore: only the values decide hasUnsavedChanges
        var values = object.values
        var base: [Value]? = nil
        for step in 0..<4_000 {
            switch random.next() % 10 {
            case 0:
                let loaded = row(5)
                object.setLoaded(loaded)
                (values, base) = (loaded, loaded)
            case 1, 2, 3, 4:
                guard !values.isEmpty else { continue }
                let slot = Int(random.next() % UInt64(values.count)), value = any()
                object.setValue(value, at: slot)
                values[slot] = value
            case 5:
                // Another count now and then (a fault's empty values, say).
                let whole = random.next() % 4 == 0 ? row(Int(random.next() % 3)) : row(5)
                object.values = whole
                values = whole
            case 6:
                let saved = random.next() % 5 == 0 ? nil : row(random.next() % 4 == 0 ? 3 : 5)
                object.base = saved
                base = saved
            case 7:
                object.markSaved()
                base = values
            default:
                // A write back to the saved value: no longer a change.
                guard let saved = base, saved.count == values.count, !values.isEmpty else { continue }
                let slot = Int(random.next() % UInt64(values.count))
                object.setValue(saved[slot], at: slot)
                values[slot] = saved[slot]
            }
            #expect(Self.exactlyEqual(object.values, values), "step \(step): values")
            #expect(Self.exactlyEqual(object.base, base), "step \(step): saved values")
            let changed = base.map { !Value.sameValues($0, values) } ?? false
            #expect(object.hasUnsavedChanges == changed, "step \(step): hasUnsavedChanges")
            if let mask = object.changedSlotMask, let base {
                let expected = values.indices.reduce(UInt64(0)) { !Value.same(base[$1], values[$1]) ? $0 | 1 << UInt64($1) : $0 }
                #expect(mask == expected, "step \(step): changed slots")
            }
        }
    }

    @Test func aFirstWriteCopiesNothingAndASaveFreesOnlyTheList() throws {
        let object = Sited()
        object.inStore = true
        object.setLoaded([.int64(1), .int64(2), .int64(3), .int64(4), .int64(5)])
        let before = object.values.withUnsafeBufferPointer { $0.baseAddress }
        object.setValue(.int64(30), at: 2)
        object.setValue(.int64(31), at: 2)
        // The values were written where they lay; the saved one is the first replaced.
        #expect(object.values.withUnsafeBufferPointer { $0.baseAddress } == before)
        #expect(object.base == [.int64(1), .int64(2), .int64(3), .int64(4), .int64(5)])
        #expect(object.changedSlotMask == 1 << 2)
        object.markSaved()
        #expect(object.base == object.values && !object.hasUnsavedChanges && object.changedSlotMask == 0)
    }

    /// A write of a value `==` to the one held but spelled otherwise (-0.0 over 0.0, a
    /// decomposed "é" over a composed one, a date at -0.0 s) is a change: saved, and read
    /// back as written, byte for byte. Taking it for no change had dropped the write. A
    /// unique key respelled so collides with nothing, its own old claim included.
    @Test func aRespelledValueIsAChangeAndReadsBackAsWritten() throws {
        final class Spelled: ManagedObject {
            @Attribute var reading: Double = 0
            @Attribute var when = Date(timeIntervalSinceReferenceDate: 0)
            @Attribute var name: String = "\u{E9}"
            @Attribute var key: String = "k\u{E9}"
            override class var uniqueness: [[String]] { [["key"]] }
        }
        let stack = try Stack(model: try Model(Spelled.self))
        let context = stack.context()
        _ = Spelled(context: context)
        try context.save()

        let other = stack.context()
        let fetched = try #require(try other.fetch(FetchQuery(Spelled.self)).first)
        fetched.reading = -0.0
        fetched.when = Date(timeIntervalSinceReferenceDate: -0.0)
        fetched.name = "e\u{301}"
        fetched.key = "ke\u{301}"
        #expect(fetched.changedKeys == ["reading", "when", "name", "key"])
        #expect(other.hasChanges)
        try other.save()

        let third = stack.context()
        let read = try #require(try third.fetch(FetchQuery(Spelled.self)).first)
        #expect(read.reading.sign == .minus)
        #expect(read.when.timeIntervalSinceReferenceDate.sign == .minus)
        #expect(Array(read.name.utf8) == Array("e\u{301}".utf8))
        #expect(Array(read.key.utf8) == Array("ke\u{301}".utf8))
        // Written back as they were: a change again.
        read.reading = 0
        read.name = "\u{E9}"
        #expect(read.changedKeys == ["reading", "name"])

        // Through a child context: a respelled value reaches the parent, and the store
        // (for an object the child changed, and one it inserted over the defaults).
        let parent = stack.context()
        let child = Context(parent: parent)
        let inChild = try #require(try child.fetch(FetchQuery(Spelled.self)).first)
        inChild.reading = 0
        inChild.when = Date(timeIntervalSinceReferenceDate: 0)
        inChild.name = "\u{E9}"
        inChild.key = "k\u{E9}"
        let inserted = Spelled(context: child)
        inserted.reading = -0.0
        inserted.name = "e\u{301}"
        inserted.key = "other"
        try child.save()
        try parent.save()
        let last = try stack.context().fetch(FetchQuery(Spelled.self))
        #expect(last.count == 2)
        let changed = try #require(last.first { $0.key != "other" }), added = try #require(last.first { $0.key == "other" })
        #expect(changed.reading.sign == .plus && changed.when.timeIntervalSinceReferenceDate.sign == .plus)
        #expect(Array(changed.name.utf8) == Array("\u{E9}".utf8) && Array(changed.key.utf8) == Array("k\u{E9}".utf8))
        #expect(added.reading.sign == .minus && Array(added.name.utf8) == Array("e\u{301}".utf8))
    }

    @Test func aNaNLeftAsItWasIsNoChange() throws {
        let stack = try Stack(model: try Model(Measured.self))
        let context = stack.context()
        Measured(context: context).reading = .nan
        try context.save()
        let other = stack.context()
        let fetched = try #require(try other.fetch(FetchQuery(Measured.self)).first)
        fetched.note = "n"
        // NaN == NaN is false, yet the reading is what was read: not a changed key.
        #expect(fetched.changedKeys == ["note"])
        fetched.reading = .nan
        #expect(fetched.changedKeys == ["note"])
        try other.save()
        fetched.reading = .nan
        #expect(!fetched.hasChanges && !other.hasChanges)
        let third = stack.context()
        #expect(try #require(try third.fetch(FetchQuery(Measured.self)).first).reading.isNaN)
    }
}
