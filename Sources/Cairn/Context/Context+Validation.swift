import CairnStorage
/// Validating an object for a save: required values and their types, relationships that
/// must not be empty or point at deleted objects, `deny` rules, and the object's own
/// hooks. Every failure is reported, each naming its object and property.
extension Context {
    /// Every reason `object` cannot be saved as it is (none: it can).
    func validationFailures(of object: ManagedObject) -> [CairnError] {
        // Built only for a message: formatting it for every object would slow every save.
        let label = { "\(object.entity.name) \(object.recordID)" }
        var failures = object.isDeletedHere ? denyFailures(object, label) : valueFailures(object, label)
        do {
            if object.isDeletedHere {
                try object.validateForDelete()
            } else if object.isNewHere {
                try object.validateForInsert()
            } else {
                try object.validateForUpdate()
            }
        } catch let error as CairnError {
            // (A hook may throw several failures at once, through `CairnError.validationFailed`.)
            failures += error.details.isEmpty ? [naming(error, object, key: error.key)] : error.details.map { naming($0, object, key: $0.key) }
        } catch {
            failures.append(naming(CairnError(.validation, "\(label()) failed validation: \(error)"), object))
        }
        return failures
    }

    /// Throws every reason `object` cannot be saved, as one error (see ``CairnError/details``).
    func validate(_ object: ManagedObject) throws {
        let failures = validationFailures(of: object)
        if !failures.isEmpty { throw CairnError.validationFailed(failures) }
    }

    /// `error` about `object` (and its property `key`), unless it names one already.
    private func naming(_ error: CairnError, _ object: ManagedObject, key: String? = nil) -> CairnError {
        guard error.recordID == nil else { return error }
        var named = error
        named.entityName = object.entity.name
        named.recordID = object.recordID
        named.key = key
        return named
    }

    private func valueFailures(_ object: ManagedObject, _ label: () -> String) -> [CairnError] {
        let entity = object.entity
        // A kept record (and what was written over it) is read slot by slot, undecoded; of
        // one whose values all fit their properties, only the values written over it are
        // checked. Decoded values are checked in place in their array.
        let kept = object.keptFitAndWrittenMask
        let values = kept == nil ? object.values : []
        let count = kept == nil ? values.count : object.valueCount
        let written = kept.flatMap { $0.fitsRequiredKinds ? $0.written : nil }
        func read(_ slot: Int) -> Value { kept == nil ? values[slot] : object.currentValue(at: slot) }
        func firstWrong(from start: Int) -> Int? {
            kept == nil ? entity.firstValueOfWrongKind(in: values, from: start)
                : entity.firstValueOfWrongKind(count: count, from: start, onlySlots: written, value: object.currentValue(at:))
        }
        var failures: [CairnError] = []
        var invalid = firstWrong(from: 0)
        if invalid != nil {
            let attributes = entity.attributes
            while let index = invalid {
                defer { invalid = firstWrong(from: index + 1) }
                let value = read(index), name = attributes[index].name
                if value.isNull {
                    let why = object.layout.initialValueProblems[index].map { " (\($0))" } ?? ""
                    failures.append(naming(CairnError(.validation, "\(label()): '\(name)' is required but has no value\(why)"), object, key: name))
                } else {
                    failures.append(naming(CairnError(.validation, "\(label()): '\(name)' must be a \(attributes[index].type), not \(value)"),
                                           object, key: name))
                }
            }
        }
        for (offset, relationship) in entity.relationships.enumerated() where entity.attributes.count + offset < count {
            let raws = read(entity.attributes.count + offset).referencedIDs
            if raws.isEmpty && !relationship.isOptional && !relationship.isToMany {
                failures.append(naming(CairnError(.validation, "\(label()): relationship '\(relationship.name)' is required but empty"),
                                       object, key: relationship.name))
            }
            for raw in raws {
                if let target = registered[RecordID(rawValue: raw)], !target.exists,
                   !linkAwaitsMerge(object, slot: entity.attributes.count + offset, to: target) {
                    failures.append(naming(CairnError(.validation,
                        "\(label()): relationship '\(relationship.name)' points at deleted \(target.entity.name) \(target.recordID)"),
                        object, key: relationship.name))
                    break
                }
            }
        }
        return failures
    }

    /// Whether the link in `slot` of `object` to `target`, an object deleted here, is one
    /// the store made (it was there when `object` was read) that another save may have
    /// made or undone meanwhile: the store changed `object`'s record, or `target`'s, after
    /// this context read it. The save then conflicts, and the merge by the policy settles
    /// the link (or the save fails as a conflict); the validation after the merge refuses
    /// it if it stays. (A merge keeps a changed object's list as it is here until its
    /// save, and an object read after another save moved `target` to it names `target`.)
    private func linkAwaitsMerge(_ object: ManagedObject, slot: Int, to target: ManagedObject) -> Bool {
        guard parent == nil, object.inStore, let base = object.base, slot < base.count,
              base[slot].referencedIDs.contains(target.recordID.rawValue) else { return false }
        return coordinator.version(of: object.recordID) != object.baseVersion
            || (target.inStore && coordinator.version(of: target.recordID) != target.baseVersion)
    }

    private func denyFailures(_ object: ManagedObject, _ label: () -> String) -> [CairnError] {
        let entity = object.entity
        var failures: [CairnError] = []
        for (offset, relationship) in entity.relationships.enumerated() where relationship.deleteRule == .deny {
            let live = relatedObjects(of: object, slot: entity.attributes.count + offset)
            if !live.isEmpty {
                failures.append(naming(CairnError(.validation,
                    "cannot delete \(label()): relationship '\(relationship.name)' is not empty (\(live.count) object(s)) and its delete rule is deny"),
                    object, key: relationship.name))
            }
        }
        return failures
    }
}
