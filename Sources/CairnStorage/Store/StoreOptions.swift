/// When a commit is made durable.
public enum Durability: Sendable, Hashable {
    /// The commit is synced to disk before the save returns (the default).
    case durable
    /// No sync per commit. After a crash the store still opens to a committed prefix,
    /// but the newest commits may be missing. ``Container/sync()``, a later durable
    /// commit or closing the container makes them durable.
    case deferred
}

/// When the store folds its log into a new snapshot by itself.
public enum CompactionPolicy: Sendable, Hashable {
    /// Only when ``Container/compact()`` is called (or `cairn compact` is run).
    case manual
    /// After a commit, when the log holds more than `minimumLogBytes` and more than
    /// `ratio` times the snapshot's size.
    case automatic(ratio: Double, minimumLogBytes: Int)

    /// Automatic, once the log holds more than 16 MiB and more bytes than the snapshot.
    public static let `default` = CompactionPolicy.automatic(ratio: 1.0, minimumLogBytes: 16 << 20)
}

/// How a ``Coordinator`` opens its store on disk: durability, compaction, log space
/// reserved ahead, and whether to create a missing store. (A ``Container`` takes the
/// durability and compaction itself.)
public struct StoreOptions: Sendable {
    /// The file system the store lives on: ``POSIXFileSystem`` for disk,
    /// ``MemoryFileSystem`` for an in-memory store or a test.
    package var fileSystem: any FileSystem
    /// When a save is made durable (`.durable` unless set).
    public var durability: Durability
    /// When the store folds its log into a new snapshot by itself (`.default` unless set).
    public var compaction: CompactionPolicy
    /// Log space is reserved this many bytes at a time ahead of the tail, so a sync does
    /// not also have to persist a size change.
    public var preallocationBytes: Int
    /// Whether to create the store if the directory holds none (else opening throws
    /// `.notFound`).
    public var createIfMissing: Bool
    /// A snapshot index at least this long has its checksum computed on another thread
    /// while the log is replayed (`SnapshotChecksums`); a shorter one is checksummed in
    /// less time than handing it over takes. Tests lower it to exercise the hand-over.
    var backgroundChecksumMinimum = ChecksumInParts.minimumPerPart
    /// A commit whose frames come to more than this is written frame by frame, each in
    /// pieces of `framePieceBytes` (``LogWriter/appendFrame(sequence:payloadLength:piece:encode:)``),
    /// instead of through one buffer that holds it all. Tests lower both to exercise it.
    var streamedFramesMinimum = 4 << 20
    var framePieceBytes = 1 << 20
    /// The log's frames are grouped for checkpoints (FORMAT.md §12.6): a group takes frames
    /// until they span this many bytes, and an open checks a group a part, on every core.
    /// Tests lower it.
    package var frameGroupBytes = 1 << 20
    /// A checkpoint that covers at least this many bytes of log has its frames' headers
    /// checked by the open and their bytes on first read, or by a thread the open starts
    /// (`CoveredFrameCheck`); a shorter one has every byte checked by the open, in about
    /// a millisecond. Tests lower it to exercise the deferred check.
    package var deferredFrameCheckMinimum = 8 << 20
    /// Record versions kept in a hash table before they move to runs (``VersionRuns``):
    /// 32 MB at most. Tests lower it to exercise the move.
    var recentVersionsLimit = 1 << 20
    /// A stored index whose entity has at most this many records in the log tail is
    /// attached at open, while the snapshot's checksum is taken on another thread; one
    /// over a longer tail, on first use (sorting the tail's values is most of such an
    /// open, which may never look a value up). Tests set it to 0 to exercise the latter.
    var openIndexTailLimit = 1 << 16
    /// A clean close writes a checkpoint (FORMAT.md §12) when the log holds changes to at
    /// least this many records; a shorter log replays about as fast as a checkpoint is
    /// checked. Tests lower it.
    package var checkpointMinimumRecords = 1 << 13
    /// Between commits, a checkpoint is written once the log holds changes to at least
    /// this many records, and twice as many as at its last checkpoint
    /// (``Store/checkpointIfDue()``). Tests lower it.
    package var periodicCheckpointMinimumRecords = 1 << 20
    /// Whether the store keeps history, and how long (nil, the default: it keeps none).
    /// With history, each transaction's frame notes what each change did (an insert, the
    /// properties an update changed, a delete) and the saving context's author, and a
    /// compaction keeps the history the retention allows (FORMAT.md §5.1, §14). Without,
    /// the frames are as before and nothing is kept past a compaction.
    public var history: HistoryRetention?
    /// How the open treats the log (``OpenMode``); `cairn verify` and `cairn repair` set it.
    var openMode = OpenMode.normal

    /// Open as a reader: the store is read as it is, and nothing in its directory changes.
    /// The open takes no lock, so it succeeds while a writer in another process holds
    /// the store, and that writer never waits for it; it creates nothing (not even `LOCK`),
    /// opens every file for reading only (so it works on a store the user may not write),
    /// cuts no torn tail (``RecoveryReport`` says what a writer's open would cut), syncs
    /// and removes nothing, and every write throws. The reader sees the committed state of
    /// its open: while a writer holds the store, the last whole transaction in the log;
    /// a compaction or checkpoint the writer makes later does not change what it reads.
    /// The `cairn` read commands open stores so.
    public var readOnly: Bool {
        get { openMode == .readOnly }
        set { openMode = newValue ? .readOnly : .normal }
    }

    /// Options for a store on disk.
    public init(durability: Durability = .durable, compaction: CompactionPolicy = .default,
                preallocationBytes: Int = 4 << 20, createIfMissing: Bool = true) {
        self.init(fileSystem: POSIXFileSystem(), durability: durability, compaction: compaction,
                  preallocationBytes: preallocationBytes, createIfMissing: createIfMissing)
    }

    package init(fileSystem: any FileSystem, durability: Durability = .durable,
                 compaction: CompactionPolicy = .default, preallocationBytes: Int = 4 << 20,
                 createIfMissing: Bool = true) {
        self.fileSystem = fileSystem
        self.durability = durability
        self.compaction = compaction
        self.preallocationBytes = max(4096, preallocationBytes)
        self.createIfMissing = createIfMissing
    }
}

/// How an open treats what it finds in the log (FORMAT.md §9).
enum OpenMode: Sendable, Equatable {
    /// Cut a torn tail; refuse damage followed by a durable frame.
    case normal
    /// A reader's open (``StoreOptions/readOnly``): no lock, files opened for reading, no
    /// cut, no sync, no file removed, and writes refused. The recovery report says what a
    /// normal open would cut, unless a writer holds the store (its tail is then its own).
    case readOnly
    /// Replay up to the first damage whatever follows it, changing nothing; the frames
    /// valid past it are reported dropped, and their record serials are not handed out
    /// again. Only for `cairn repair`, which then compacts the replayed prefix into a new
    /// snapshot and log.
    case salvage
}

/// A record as the store keeps it: its ID and its values in schema order.
package struct Record: Sendable, Hashable {
    package var id: RecordID
    package var values: [Value]

    package init(id: RecordID, values: [Value]) {
        self.id = id
        self.values = values
    }
}

/// One change in a transaction given to ``Store/commit(_:durability:)``.
package enum Change: Sendable, Hashable {
    /// Insert the record, or replace all its values.
    case put(RecordID, [Value])
    /// Delete the record (no effect if it does not exist).
    case delete(RecordID)
}

/// What recovery found and did when the store was opened.
public struct RecoveryReport: Sendable, Equatable {
    /// Transactions replayed from the log.
    public var replayedTransactions: Int = 0
    /// Bytes of a torn or damaged log tail that were cut off (0 if none).
    public var truncatedBytes: Int = 0
    /// Why the tail was cut, if it was.
    public var truncationReason: String?
    /// Offset in the log where the tail was cut (in a read-only open: would be cut).
    public var truncatedAt: Int64?
    /// Valid transactions past the damage that were not replayed (only an open for
    /// `cairn repair` goes on past damage followed by such frames).
    public var droppedTransactions: [UInt64] = []
    /// Files no manifest names (left by an interrupted compaction) that were removed.
    public var removedFiles: [String] = []
    /// Whether the open started from the log's checkpoint (FORMAT.md §12), replaying
    /// only the transactions after it.
    public var usedCheckpoint = false
    /// Why a checkpoint of the log was not used, if there was one: damaged, or not of
    /// this log. The open replayed the whole log instead, as if there were none.
    public var ignoredCheckpoint: String?
}

/// Sizes and counts (``Container/statistics``, `cairn stats`), for compaction decisions
/// among others.
public struct StoreStatistics: Sendable, Equatable {
    /// How many records each entity has, by entity name.
    public var recordCounts: [String: Int]
    /// The snapshot file's size, in bytes.
    public var snapshotBytes: Int
    /// How many bytes of the log are written (space reserved ahead of them not counted).
    public var logBytes: Int
    /// The sequence number of the last transaction committed (0 for a store that never
    /// committed one).
    public var lastSequence: UInt64
    /// When the last transaction was committed, in milliseconds since 1970; nil when the log
    /// holds none (none since the last compaction).
    public var lastCommitMilliseconds: UInt64?
    /// How many records the snapshot holds, some of which the log may have replaced or
    /// deleted since (``shadowedSnapshotRecords``).
    public var snapshotRecords: Int
    /// Snapshot records replaced or deleted by the log.
    public var shadowedSnapshotRecords: Int
    /// Record versions the log holds: its puts since the snapshot, each a record's new
    /// version (all but each record's last are garbage a compaction drops).
    public var logRecordVersions: Int = 0
    /// The format version of the current snapshot (FORMAT.md §1.1): older than the
    /// version this build writes until a compaction rewrites a store written by an
    /// earlier version.
    public var snapshotFormatVersion: UInt32 = FileHeader.currentVersion
    /// Attribute indexes the snapshot stores that lookups read (FORMAT.md §6.6).
    public var storedIndexes: Int = 0
    /// Attribute indexes the snapshot stores in an older order that lookups do not read
    /// (of reals, decimals and dates, before format version 4: FORMAT.md §6.6): built in
    /// memory on first use instead, until a compaction writes them anew.
    public var storedIndexesInOlderOrder: Int = 0
}
