/// The one error type Cairn throws.
///
/// Match on ``code`` in a `catch`; show ``description`` to a person. Where the error
/// concerns bytes in a file, ``path`` and ``offset`` say where; where it comes from
/// the operating system, ``errno`` holds the underlying error number.
///
/// ```swift
/// do { let container = try Container(entities: [Person.self], storage: .onDisk(url)) }
/// catch let error as CairnError where error.code == .locked { print(error) }
/// ```
public struct CairnError: Error, Sendable, CustomStringConvertible, Equatable {
    /// What went wrong, as a value to match on. Extensible: new codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name: `"locked"` for ``locked``.
        public let name: String
        /// The code named `name`; codes of one name are equal.
        public init(_ name: String) { self.name = name }
        public var description: String { name }

        /// Bytes on disk are damaged: a checksum, a length or a field failed validation.
        public static let corrupt = Code("corrupt")
        /// A file was written by a format version this build does not read.
        public static let unsupportedVersion = Code("unsupportedVersion")
        /// An operating-system call failed (see ``CairnError/errno``).
        public static let io = Code("io")
        /// The store directory is locked by another opener.
        public static let locked = Code("locked")
        /// An earlier write or sync failed; the store refuses writes until reopened.
        public static let poisoned = Code("poisoned")
        /// The store was closed.
        public static let closed = Code("closed")
        /// The model given does not match the schema stored in the files.
        public static let schemaMismatch = Code("schemaMismatch")
        /// A record, entity or file that was asked for does not exist.
        public static let notFound = Code("notFound")
        /// An argument was out of range or inconsistent.
        public static let invalidArgument = Code("invalidArgument")
        /// A value or transaction exceeds a fixed limit of the format.
        public static let tooLarge = Code("tooLarge")
        /// A save failed validation (required value missing, delete rule `deny`, ...).
        public static let validation = Code("validation")
        /// Concurrent changes to the same object could not be merged.
        public static let conflict = Code("conflict")
        /// A managed object was used after it left its context (see ``ManagedObject/isInvalidated``).
        public static let invalidated = Code("invalidated")
        /// History after a token is no longer held: the store's history retention (or a
        /// compaction, in a store that keeps none) let it go. Start again from a full read.
        public static let historyExpired = Code("historyExpired")
    }

    /// What went wrong, to match on.
    public var code: Code
    /// A sentence a person can act on.
    public var message: String
    /// The file concerned, if any.
    public var path: String?
    /// The byte offset in ``path`` concerned, if any.
    public var offset: Int64?
    /// The operating system's error number, if the error came from a system call.
    public var errno: Int32?
    /// For an error about one record (a validation failure): its entity (see ``objectID``).
    public var entityName: String?
    /// For an error about one record (a validation failure): its ID (see ``objectID``).
    public var recordID: RecordID?
    /// For an error about one record, the property concerned, if one is (nil when the
    /// record failed as a whole: a `deny` rule, a validation hook's error).
    public var key: String?
    /// Every failure of a save that failed validation, one per record and property, so a
    /// form can mark every invalid field at once (Core Data's `NSDetailedErrorsKey`).
    /// Empty for other errors.
    public var details: [CairnError] = []
    /// For a `.conflict` a merge policy did not resolve: each record changed here and
    /// elsewhere, with the values read, the values to save and the values stored.
    public var conflicts: [MergeConflict] = []

    /// An error of `code` with `message`; `path` and `offset` say where in a file, `errno`
    /// gives the operating system's error number.
    public init(_ code: Code, _ message: String, path: String? = nil, offset: Int64? = nil, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.offset = offset
        self.errno = errno
    }

    public var description: String {
        var text = "\(code): \(message)"
        if let path {
            text += " (\(path)"
            if let offset { text += " at offset \(offset)" }
            text += ")"
        } else if let offset {
            text += " (at offset \(offset))"
        }
        if let errno { text += " [errno \(errno)]" }
        return text
    }

    /// The same error, placed in a file at a base offset (decoders report offsets
    /// relative to the buffer they were given).
    func located(in path: String, base: Int64 = 0) -> CairnError {
        var copy = self
        if copy.path == nil { copy.path = path }
        if let offset = copy.offset { copy.offset = offset + base } else { copy.offset = nil }
        return copy
    }

    /// A `.validation` failure of one property, for a validation hook to throw (alone, or
    /// several at once through ``validationFailed(_:)``): the save names the object.
    public static func invalid(_ key: String, _ message: String) -> CairnError {
        var error = CairnError(.validation, message)
        error.key = key
        return error
    }

    /// One error for several validation failures: the failure itself if there is one,
    /// else a `.validation` error listing them. Either way ``details`` holds them all
    /// (a failure that lists others is replaced by them).
    public static func validationFailed(_ failures: [CairnError]) -> CairnError {
        let failures = failures.flatMap { $0.details.isEmpty ? [$0] : $0.details }
        var error: CairnError
        if failures.count == 1 {
            error = failures[0]
        } else {
            let shown = failures.prefix(5).map(\.message).joined(separator: "; ")
            error = CairnError(.validation, "\(failures.count) validation failures: \(shown)\(failures.count > 5 ? "; and \(failures.count - 5) more" : "")")
        }
        error.details = failures
        return error
    }

    package static func corrupt(_ message: String, offset: Int? = nil) -> CairnError {
        CairnError(.corrupt, message, offset: offset.map { Int64($0) })
    }
}

extension CairnError.Code {
    /// Lets `catch let e as CairnError` be matched as `case .locked` against a code.
    public static func ~= (pattern: CairnError.Code, value: CairnError) -> Bool {
        pattern == value.code
    }
}

/// A record changed both here and in the store since it was read, as a `.conflict` error
/// reports it (Core Data's `NSMergeConflict`): enough to resolve the conflict in code.
/// Values are by property name; relationships hold `.reference`/`.references` IDs.
public struct MergeConflict: Sendable, Equatable {
    /// The record's entity.
    public var entityName: String
    /// The record's ID (see ``objectID``).
    public var recordID: RecordID
    /// The values this context read, at ``cachedVersion``.
    public var cachedValues: [String: Value]
    /// The values this context would save; nil if it deleted the record.
    public var newValues: [String: Value]?
    /// The values the store holds now, at ``storedVersion``; nil if deleted there.
    public var storedValues: [String: Value]?
    /// The record's version when this context read it.
    public var cachedVersion: UInt64
    /// The record's version in the store now.
    public var storedVersion: UInt64
    /// The properties changed here since the record was read.
    public var changedHere: [String]
    /// The properties changed in the store since the record was read.
    public var changedElsewhere: [String]

    /// A conflict of the record `recordID` with the values, versions and changed properties given.
    public init(entityName: String, recordID: RecordID, cachedValues: [String: Value], newValues: [String: Value]?,
                storedValues: [String: Value]?, cachedVersion: UInt64, storedVersion: UInt64,
                changedHere: [String], changedElsewhere: [String]) {
        self.entityName = entityName
        self.recordID = recordID
        self.cachedValues = cachedValues
        self.newValues = newValues
        self.storedValues = storedValues
        self.cachedVersion = cachedVersion
        self.storedVersion = storedVersion
        self.changedHere = changedHere
        self.changedElsewhere = changedElsewhere
    }
}
