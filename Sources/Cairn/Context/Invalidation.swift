import CairnStorage
import Synchronization

/// Why a managed object is invalidated (see ``ManagedObject/isInvalidated``).
public enum InvalidationReason: Sendable, Equatable, CustomStringConvertible {
    /// Its context was reset, or its record left the context some other way while it
    /// existed (look it up again by its ``ManagedObject/objectID``).
    case contextReset
    /// Its context was released.
    case contextReleased
    /// Its deletion was saved, another context's delete was merged, or a rollback took
    /// back its insert.
    case deleted

    public var description: String {
        switch self {
        case .contextReset: "its context was reset"
        case .contextReleased: "its context was released"
        case .deleted: "its record was deleted"
        }
    }
}

extension ManagedObject {
    /// Why the object is invalidated; nil while it is valid.
    public var invalidationReason: InvalidationReason? {
        guard isInvalidated else { return nil }
        if hadContext { return .contextReleased }
        return exists ? .contextReset : .deleted
    }

    /// Throws `.invalidated`, naming the object and why, if it is invalidated: a check an
    /// app can make before it uses an object it kept (Core Data raises instead).
    public func checkValid() throws {
        guard let reason = invalidationReason else { return }
        throw invalidatedError(reason, doing: "use")
    }

    func invalidatedError(_ reason: InvalidationReason, doing action: String) -> CairnError {
        var error = CairnError(.invalidated, "cannot \(action) \(entity.name) \(recordID): \(reason); look it up again by its objectID")
        error.entityName = entity.name
        error.recordID = recordID
        return error
    }

    /// Reports a write to, or a relationship read of, this invalidated object to
    /// ``invalidAccessHandler`` (a setter and a getter cannot throw). The access itself
    /// changes nothing, and a relationship reads as empty.
    func reportInvalidAccess(_ action: String) {
        guard let reason = invalidationReason else { return }
        let error = invalidatedError(reason, doing: action)
        InvalidAccess.handler.withLock { $0 }(error)
    }

    /// Called with a `.invalidated` error for every write to an invalidated object and
    /// every read of its relationships, on the thread of the access. By default the first
    /// 20 in the process are written to standard error (as a runtime warning); set it to
    /// log them elsewhere, to count them in tests, or to stop in the debugger.
    public static var invalidAccessHandler: @Sendable (CairnError) -> Void {
        get { InvalidAccess.handler.withLock { $0 } }
        set { InvalidAccess.handler.withLock { $0 = newValue } }
    }
}

/// The process's handler of accesses to invalidated objects.
enum InvalidAccess {
    static let handler = Mutex<@Sendable (CairnError) -> Void>(InvalidAccess.warn)
    private static let warned = Atomic<Int>(0)
    private static let warnings = 20

    @Sendable static func warn(_ error: CairnError) {
        let count = warned.add(1, ordering: .relaxed).newValue
        if count <= warnings { writeToStandardError("Cairn warning: \(error.message)") }
        if count == warnings { writeToStandardError("Cairn warning: further uses of invalidated objects are not reported (ManagedObject.invalidAccessHandler)") }
    }
}
