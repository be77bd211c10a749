import CairnStorage

/// Reading and writing an object's properties by name (the dynamic API, for run-time
/// entities and the command line).
extension ManagedObject {
    /// The value of an attribute or relationship by name (`.null` for an unknown key).
    public subscript(key: String) -> Value {
        get { layout.index(of: key).map { read($0) } ?? .null }
        set {
            guard let index = layout.index(of: key) else {
                context?.recordRefusedWrite(CairnError(.invalidArgument, "\(entity.name) has no key '\(key)'"))
                return
            }
            write(index, newValue)
        }
    }

    /// Sets a value by key, checking it against the attribute's type.
    public func setValue(_ value: Value, forKey key: String) throws {
        guard let index = layout.index(of: key) else {
            throw CairnError(.invalidArgument, "\(entity.name) has no key '\(key)'")
        }
        if index < entity.attributes.count {
            let attribute = entity.attributes[index]
            guard value.isNull || attribute.type.accepts(value) else {
                throw CairnError(.invalidArgument, "\(entity.name).\(key) is a \(attribute.type), not \(value)")
            }
        } else {
            let relationship = entity.relationships[index - entity.attributes.count]
            switch (relationship.isToMany, value) {
            case (false, .null), (false, .reference), (true, .references): break
            default: throw CairnError(.invalidArgument, "\(entity.name).\(key) cannot hold \(value)")
            }
        }
        write(index, value)
    }

    /// The value of an attribute or relationship by name (`.null` for an unknown key), as
    /// ``subscript(_:)`` reads it.
    public func value(forKey key: String) -> Value { self[key] }

    /// The objects a relationship points at, by name.
    public func relatedObjects(forKey key: String) -> [ManagedObject] {
        guard let index = layout.index(of: key), index >= entity.attributes.count else { return [] }
        return related(index)
    }
}
