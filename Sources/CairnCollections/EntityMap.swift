/// A map keyed by entity number, for the per-entity tables on a store's commit path.
///
/// A model has a handful of entities, so a linear search of a small array of numbers
/// beats hashing them (`Dictionary` runs SipHash on every lookup, several per record
/// committed). Entries stay in insertion order.
public struct EntityMap<Value> {
    @usableFromInline var numbers: [UInt16] = []
    /// Parallel to `numbers`; an entry is nil only while `_modify` has its value out.
    @usableFromInline var entries: [Value?] = []

    @inlinable public init() {}

    @inlinable public var isEmpty: Bool { numbers.isEmpty }
    @inlinable public var count: Int { numbers.count }

    @inline(__always) @inlinable func position(of number: UInt16) -> Int? {
        numbers.withUnsafeBufferPointer { numbers in
            for index in numbers.indices where numbers[index] == number { return index }
            return nil
        }
    }

    @inlinable public subscript(number: UInt16) -> Value? {
        get { position(of: number).flatMap { entries[$0] } }
        _modify {
            if let index = position(of: number) {
                // Move the value out so the caller's changes do not copy it (copy on write).
                var value = entries[index]
                entries[index] = nil
                defer {
                    if let value {
                        entries[index] = value
                    } else {
                        numbers.remove(at: index)
                        entries.remove(at: index)
                    }
                }
                yield &value
            } else {
                var value: Value? = nil
                defer {
                    if let value {
                        numbers.append(number)
                        entries.append(value)
                    }
                }
                yield &value
            }
        }
    }

    /// `body` of the value for `number`, or nil if there is none. (Looking a record up
    /// through the subscript, `map[entity]?[id]`, makes an optional copy of the value and
    /// destroys it through the generic optional witness, for each record a context reads
    /// from the store.)
    @inline(__always)
    @inlinable public func lookup<Result>(_ number: UInt16, _ body: (Value) -> Result?) -> Result? {
        guard let index = position(of: number), let value = entries[index] else { return nil }
        return body(value)
    }

    @inlinable public subscript(number: UInt16, default defaultValue: @autoclosure () -> Value) -> Value {
        get { self[number] ?? defaultValue() }
        _modify {
            let index: Int
            if let found = position(of: number) {
                index = found
            } else {
                numbers.append(number)
                entries.append(defaultValue())
                index = numbers.count - 1
            }
            var value = entries[index] ?? defaultValue()
            entries[index] = nil
            defer { entries[index] = value }
            yield &value
        }
    }

    /// Every value, in insertion order.
    @inlinable public var values: [Value] { entries.compactMap { $0 } }
}

extension EntityMap: Sequence {
    @inlinable public func makeIterator() -> AnyIterator<(key: UInt16, value: Value)> {
        var index = 0
        let numbers = self.numbers, entries = self.entries
        return AnyIterator {
            while index < numbers.count {
                defer { index += 1 }
                if let value = entries[index] { return (numbers[index], value) }
            }
            return nil
        }
    }
}

extension EntityMap: ExpressibleByDictionaryLiteral {
    @inlinable public init(dictionaryLiteral elements: (UInt16, Value)...) {
        for (number, value) in elements { self[number] = value }
    }
}

extension EntityMap: Sendable where Value: Sendable {}
