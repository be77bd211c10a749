import Dispatch
import Synchronization

/// The checksums a snapshot's reader needs before it trusts its index (FORMAT.md §6.5
/// step 5) and its attribute index blocks (§6.6), and the check of the index entries'
/// structure (§6.5 step 6), computed on other threads while the opener goes on: opening
/// a store checks megabytes of index, and it can replay its log meanwhile, since every
/// index lookup stays inside the file (and traps on no bytes) whatever the entries say.
/// The opener asks ``indexMatches()`` and ``structureFailure()`` before it acts on what it
/// found (and before it writes anything); a reader asks ``blockMatches(_:)`` before it
/// first uses a block. Each waits for the work if it has not finished.
///
/// The checksums are taken in parts on every core (``ChecksumInParts``), the index's
/// first, and the structure is checked beside them on a thread of its own: the opener
/// waits for the index's checksum and structure, and the longer of the two is what it
/// waits for, not their sum. The blocks are checked ahead of their first use because an
/// open is usually followed by a fetch; the work is bounded by the file (a few bytes a
/// record for each block).
final class SnapshotChecksums: Sendable {
    /// Whether the index matched, and which attribute index blocks did (by row). Written
    /// by the work before it leaves its group, read after waiting on the group.
    private let indexMatched = Atomic(false)
    private let blocksMatched = Mutex<[Bool]>([])
    /// What the check of the index's entries found wrong, if anything (see ``checkStructure(_:)``).
    private let structureFailed = Mutex<CairnError?>(nil)
    private let indexChecked = DispatchGroup()
    private let blocksChecked = DispatchGroup()
    private let structureChecked = DispatchGroup()
    /// Serial, so the checksums are taken index first. Queues of their own are
    /// overcommitting: each gets a thread even when the shared pool's threads are all
    /// busy (or blocked waiting here), so the waits cannot starve.
    private let queue = DispatchQueue(label: "cairn.snapshot-checksums")
    /// The structure's check, beside the checksums.
    private let structureQueue = DispatchQueue(label: "cairn.snapshot-structure")

    /// Starts checking the index: `mapping`'s bytes in `index` against `expected` (masked CRC-32C).
    init(mapping: FileMapping, index: Range<Int>, expected: UInt32) {
        indexChecked.enter()
        queue.async { [self] in
            let bytes = UnsafeRawBufferPointer(rebasing: mapping.bytes[index])
            indexMatched.store(ChecksumInParts.masked(bytes) == expected, ordering: .relaxed)
            indexChecked.leave()
        }
    }

    /// Starts checking `blocks` (whose placement in the mapping has been checked), after the index.
    func checkBlocks(_ blocks: [SnapshotIndex.AttributeIndex], in mapping: FileMapping) {
        blocksChecked.enter()
        queue.async { [self] in
            // (After the index's checksum, on this queue, and its structure's check: the
            // opener waits for those two, and the blocks would slow them.)
            structureChecked.wait()
            let matches = blocks.map { ChecksumInParts.masked(UnsafeRawBufferPointer(rebasing: mapping.bytes[$0.entryBytes])) == $0.checksum }
            blocksMatched.withLock { $0 = matches }
            blocksChecked.leave()
        }
    }

    /// Runs `check`, the check of the index entries' structure, beside the checksums (the
    /// opener replays its log meanwhile). A structure that does not hold is an error to
    /// report, after a checksum that does not match (see ``SnapshotReader/awaitIndexChecksum()``).
    func checkStructure(_ check: @escaping @Sendable () throws -> Void) {
        structureChecked.enter()
        structureQueue.async { [self] in
            do {
                try check()
            } catch let error as CairnError {
                structureFailed.withLock { $0 = error }
            } catch {
                structureFailed.withLock { $0 = CairnError.corrupt("snapshot index entries do not check: \(error)") }
            }
            structureChecked.leave()
        }
    }

    /// What the check of the index entries' structure found wrong, if it ran (waiting
    /// for it); nil if it passed, or none was started.
    func structureFailure() -> CairnError? {
        structureChecked.wait()
        return structureFailed.withLock { $0 }
    }

    /// Whether the index's checksum matched (waiting for it).
    func indexMatches() -> Bool {
        indexChecked.wait()
        return indexMatched.load(ordering: .relaxed)
    }

    /// Whether attribute index block `row` was checked and matched (waiting for the
    /// blocks' check, if ``checkBlocks(_:in:)`` started one). False means: check it now.
    func blockMatches(_ row: Int) -> Bool {
        blocksChecked.wait()
        return blocksMatched.withLock { row < $0.count && $0[row] }
    }
}
