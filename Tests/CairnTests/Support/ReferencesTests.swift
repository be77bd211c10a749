import CairnCollections
import Testing

/// The collections the fetch layer uses in place of raw memory: `FixedArray`,
/// `GatheredReferences` and `ReferenceAddresses`.
@Suite struct ReferencesTests {
    class Animal { let name: String; init(_ name: String) { self.name = name } }
    final class Dog: Animal {}

    @Test func aFixedArrayHoldsWhatItWasGivenAndTakesWrites() {
        let numbers = FixedArray([3, 1, 4, 1, 5])
        let (count, isEmpty) = (numbers.count, numbers.isEmpty)
        #expect(count == 5 && !isEmpty)
        numbers[2] = 9
        #expect(numbers.array == [3, 1, 9, 1, 5])
        let strings = FixedArray(repeating: "x", count: 3)
        strings[0] = String(repeating: "y", count: 100)  // a value with storage of its own, released at deinit
        #expect(strings.array == [String(repeating: "y", count: 100), "x", "x"])
        let none = FixedArray([Int]()).isEmpty
        #expect(none)
    }

    @Test func gatheredReferencesMoveIntoAnArrayOfTheSubclass() {
        let gathered = GatheredReferences<Animal>()
        #expect(gathered.take(as: Dog.self).isEmpty)
        var dogs: [Dog] = []
        for index in 0..<100 {  // past several doublings of the first 16
            let dog = Dog("d\(index)")
            dogs.append(dog)
            gathered.append(dog)
        }
        #expect(gathered.gathered == 100)
        let taken = gathered.take(as: Dog.self)
        #expect(taken.count == 100 && zip(taken, dogs).allSatisfy { $0 === $1 })
        #expect(gathered.gathered == 0)
        // Each object is owned once by the taken array: dropping the others frees them.
        weak let first = taken.first
        dogs.removeAll()
        #expect(first != nil)
        _ = consume taken
        #expect(first == nil)
    }

    @Test func addressesCompareIdentityInOrder() {
        let objects = (0..<10).map { Animal("a\($0)") }
        var addresses: [UInt] = []
        ReferenceAddresses.append(objects[..<4], to: &addresses)
        ReferenceAddresses.append(objects[4...], to: &addresses)
        #expect(ReferenceAddresses.starts(objects, with: addresses))
        #expect(ReferenceAddresses.starts(objects + [Animal("more")], with: addresses))
        #expect(!ReferenceAddresses.starts(Array(objects.dropLast()), with: addresses))
        #expect(!ReferenceAddresses.starts(objects.reversed(), with: addresses))
        #expect(!ReferenceAddresses.starts((0..<10).map { Animal("a\($0)") }, with: addresses))  // equal names, other objects
        #expect(ReferenceAddresses.starts(objects, with: Array(objects[..<3])))
        #expect(ReferenceAddresses.starts(objects, with: [Animal]()))
        #expect(!ReferenceAddresses.starts(objects, with: [objects[1]]))
    }
}
