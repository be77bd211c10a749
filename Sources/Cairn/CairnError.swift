/// The one error type Cairn throws.
///
/// Match on ``code`` in a `catch`; show ``description`` to a person. Where the error
/// concerns bytes in a file, ``path`` and ``offset`` say where; where it comes from
/// the operating system, ``errno`` holds the underlying error number.
///
/// ```swift
/// do { let store = try Store.open(at: path) }
/// catch let error as CairnError where error.code == .locked { print(error) }
/// ```
public struct CairnError: Error, Sendable, CustomStringConvertible, Equatable {
    /// What went wrong, as a value to match on. Extensible: new codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
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
    }

    public var code: Code
    /// A sentence a person can act on.
    public var message: String
    /// The file concerned, if any.
    public var path: String?
    /// The byte offset in ``path`` concerned, if any.
    public var offset: Int64?
    /// The operating system's error number, if the error came from a system call.
    public var errno: Int32?

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

    static func corrupt(_ message: String, offset: Int? = nil) -> CairnError {
        CairnError(.corrupt, message, offset: offset.map { Int64($0) })
    }
}

extension CairnError.Code {
    /// Lets `catch let e as CairnError` be matched as `case .locked` against a code.
    public static func ~= (pattern: CairnError.Code, value: CairnError) -> Bool {
        pattern == value.code
    }
}
