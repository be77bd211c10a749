import Dispatch
import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

@Suite struct LockTests {
    /// Record counts and existence follow every kind of change — put new, put again,
    /// delete, delete twice, delete a record never stored, put a deleted one back — with
    /// records in the snapshot and in the log, several to a transaction, across compactions
    /// and a reopen (a commit applies its operations entity run by entity run).
    @Test func countsFollowEveryKindOfChange() throws {
        let fs = MemoryFileSystem()
        let options = memoryOptions(fs)
        var store = try Store.open(at: "/db", schema: TestSchemas.people, options: options)
        var random = SplitMix64(seed: 41)
        var ids: [RecordID] = []
        var live = Set<RecordID>()
        for round in 0..<40 {
            var changes: [Change] = []
            for _ in 0..<Int(random.next() % 6) {
                let pick = random.next() % 4
                if pick == 0 || ids.isEmpty {
                    let id = try store.allocateID(entity: 1)
                    ids.append(id)
                    changes.append(.put(id, [.string("p\(round)"), .int64(Int64(round)), .references([])]))
                } else {
                    let id = ids[Int(random.next() % UInt64(ids.count))]
                    changes.append(pick == 1 ? .put(id, [.string("again"), .int64(1), .references([])]) : .delete(id))
                }
            }
            if round % 7 == 3 { changes.append(.delete(RecordID(entity: 1, serial: 900_000 + UInt64(round)))) }
            try store.commit(changes)
            for change in changes {
                switch change {
                case .put(let id, _): live.insert(id)
                case .delete(let id): live.remove(id)
                }
            }
            #expect(store.count(entity: 1) == live.count, "round \(round)")
            for id in ids { #expect(store.contains(id) == live.contains(id), "round \(round), \(id)") }
            if round % 10 == 9 { try store.compact() }
            if round % 13 == 12 {
                try store.close()
                store = try Store.open(at: "/db", options: options)
                #expect(store.count(entity: 1) == live.count, "reopened after round \(round)")
            }
        }
        #expect(try Set(store.records(entity: 1).map(\.id)) == live)
        try store.close()
    }

    @Test func aSecondOpenerInTheSameProcessIsRefused() throws {
        let fs = MemoryFileSystem()
        let first = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs))
        #expect { try Store.open(at: "/db", options: memoryOptions(fs)) } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .locked && error.message.hasPrefix("store at /db is locked by pid \(getpid())")
        }
        try first.close()
        let second = try Store.open(at: "/db", options: memoryOptions(fs))
        try second.close()
    }

    @Test func aSecondOpenerOnDiskIsRefusedWithThePid() throws {
        let path = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let first = try Store.open(at: path, schema: TestSchemas.blobs)
        #expect { try Store.open(at: path) } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .locked && error.description.contains("store at \(path) is locked by pid \(getpid())")
        }
        try first.close()
        try Store.open(at: path).close()
    }

    /// The holder's pid is written padded to 12 bytes, in place; a longer file is cut to
    /// it. A close blanks it in place, so the file names no process that has let go.
    @Test func theLockHoldsThePidPaddedToTwelveBytes() throws {
        let path = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let first = try Store.open(at: path, schema: TestSchemas.blobs)
        let lock = URL(fileURLWithPath: path + "/LOCK")
        let expected = "\(getpid())".padding(toLength: 11, withPad: " ", startingAt: 0) + "\n"
        #expect(String(decoding: try Data(contentsOf: lock), as: UTF8.self) == expected)
        #expect(POSIXFileSystem().lockHolder(lock.path) == getpid())
        try first.close()
        #expect(String(decoding: try Data(contentsOf: lock), as: UTF8.self) == String(repeating: " ", count: 11) + "\n")
        #expect(POSIXFileSystem().lockHolder(lock.path) == nil)
        // A holder that died keeps its pid there, and is seen to have ended.
        let ended = Process()
        ended.executableURL = URL(fileURLWithPath: "/bin/sh")
        ended.arguments = ["-c", "exit 0"]
        try ended.run()
        ended.waitUntilExit()
        try Data("\(ended.processIdentifier)\n".utf8).write(to: lock)
        #expect(POSIXFileSystem().lockHolder(lock.path) == nil)
        try Data(repeating: UInt8(ascii: "9"), count: 40).write(to: lock)
        let store = try Store.open(at: path)
        #expect(String(decoding: try Data(contentsOf: lock), as: UTF8.self) == expected)
        try store.close()
    }

    /// Another process holds the lock (flock(1), as a second Cairn process would).
    @Test func anotherProcessHoldingTheLockIsNamed() throws {
        let path = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Store.open(at: path, schema: TestSchemas.blobs).close()
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/bin/sh")
        holder.arguments = ["-c", "exec 9>>'\(path)/LOCK'; flock 9; echo $$ > '\(path)/LOCK'; exec sleep 30"]
        try holder.run()
        defer { holder.terminate(); holder.waitUntilExit() }
        // Wait until the lock is taken.
        var refused: CairnError?
        // Until the holder has taken the lock and written its pid.
        for _ in 0..<500 {
            do { try Store.open(at: path).close() } catch let error as CairnError {
                refused = error
                if error.message.hasSuffix("pid \(holder.processIdentifier)") { break }
            }
            Thread.sleep(forTimeInterval: 0.01)
        }
        #expect(refused?.code == .locked)
        #expect(refused?.message == "store at \(path) is locked by pid \(holder.processIdentifier)")
    }
}

@Suite struct StoreBehaviourTests {
    @Test func opensAndCreatesWithClearErrors() throws {
        let fs = MemoryFileSystem()
        #expect { try Store.open(at: "/nothing", options: memoryOptions(fs)) } throws: {
            ($0 as? CairnError)?.code == .notFound
        }
        try fs.createDirectory("/full")
        let stranger = try fs.open("/full/notes.txt", create: true, truncate: false)
        try stranger.write(Array("mine".utf8), at: 0)
        #expect { try Store.open(at: "/full", schema: TestSchemas.blobs, options: memoryOptions(fs)) } throws: {
            ($0 as? CairnError)?.message.contains("notes.txt") == true
        }
        let store = try Store.open(at: "/db", schema: TestSchemas.people, options: memoryOptions(fs))
        try store.close()
        #expect { try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs)) } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .schemaMismatch && error.message.contains("migrate")
        }
        let reopened = try Store.open(at: "/db", options: memoryOptions(fs))
        #expect(reopened.schema == TestSchemas.people)
    }

    @Test func valuesAreCheckedAgainstTheSchema() throws {
        let store = try Store.open(at: "/db", schema: TestSchemas.people, options: memoryOptions(MemoryFileSystem()))
        let id = try store.allocateID(entity: 1)
        let cases: [[Change]] = [
            [.put(id, [.string("a")])],
            [.put(id, [.int64(1), .int64(2), .references([])])],
            [.put(id, [.string("a"), .int64(2), .reference(1)])],
            [.put(RecordID(entity: 9, serial: 1), [])],
            [.delete(RecordID(entity: 9, serial: 1))],
        ]
        for changes in cases {
            #expect(throws: CairnError.self, "\(changes)") { try store.commit(changes) }
        }
        #expect(store.lastSequence == 0)
        #expect(throws: CairnError.self) { try store.allocateID(entity: 3) }
    }


    /// Every kind of value in every kind of slot: the store takes exactly what the slot
    /// declares (or null, where a to-many's list is not required), and a save's validation
    /// takes null only where the attribute is optional. The rules are written out here,
    /// case by case, apart from the kind masks the checks use.
    @Test func recordChecksTakeExactlyTheKindsTheSlotDeclares() throws {
        let samples: [Value] = [
            .null, .bool(true), .int8(1), .int16(1), .int32(1), .int64(1), .float(1), .double(1), .string("s"),
            .bytes(Data([1])), .date(Date(timeIntervalSince1970: 1)), .uuid(UUID()), .url(URL(fileURLWithPath: "/u")),
            .decimal(1), .archived(Data([2])), .reference(1), .references([1]),
        ]
        func fits(_ value: Value, _ type: AttributeType) -> Bool {
            switch (type, value) {
            case (.bool, .bool), (.int8, .int8), (.int16, .int16), (.int32, .int32), (.int64, .int64), (.float, .float),
                 (.double, .double), (.string, .string), (.binary, .bytes), (.date, .date), (.uuid, .uuid), (.url, .url),
                 (.decimal, .decimal), (.archived, .archived): return true
            default: return false
            }
        }
        for type in AttributeType.allCases {
            for isOptional in [false, true] {
                let entity = EntityDescription(name: "E", number: 1, attributes: [AttributeDescription(name: "a", type: type, isOptional: isOptional)],
                                               relationships: [RelationshipDescription(name: "one", destination: "E"),
                                                               RelationshipDescription(name: "many", destination: "E", isToMany: true)])
                for value in samples {
                    let stored = (try? Store.check([value, .null, .references([])], of: RecordID(entity: 1, serial: 1), entity: entity)) != nil
                    #expect(stored == (value.isNull || fits(value, type)), "\(type) \(value)")
                    let required = entity.kinds.required[0] & value.kindBit != 0
                    #expect(required == (value.isNull ? isOptional : fits(value, type)), "\(type) optional \(isOptional) \(value)")
                    let toOne = (try? Store.check([.null, value, .references([])], of: RecordID(entity: 1, serial: 1), entity: entity)) != nil
                    let toMany = (try? Store.check([.null, .null, value], of: RecordID(entity: 1, serial: 1), entity: entity)) != nil
                    switch value {
                    case .null: #expect(toOne && !toMany)
                    case .reference: #expect(toOne && !toMany)
                    case .references: #expect(!toOne && toMany)
                    default: #expect(!toOne && !toMany, "\(value)")
                    }
                }
            }
        }
        // The masks follow a change to the entity's properties.
        var entity = EntityDescription(name: "E", number: 1, attributes: [AttributeDescription(name: "a", type: .int64)])
        let id = RecordID(entity: 1, serial: 1)
        #expect(throws: CairnError.self) { try Store.check([.string("s")], of: id, entity: entity) }
        entity.attributes[0].type = .string
        _ = try Store.check([.string("s")], of: id, entity: entity)
        entity.relationships.append(RelationshipDescription(name: "r", destination: "E", isToMany: true))
        #expect(throws: CairnError.self) { try Store.check([.string("s"), .null], of: id, entity: entity) }
        _ = try Store.check([.string("s"), .references([])], of: id, entity: entity)
    }
    @Test func idsAreNeverReusedAcrossCompactionAndReopen() throws {
        let fs = MemoryFileSystem()
        var seen = Set<RecordID>()
        for _ in 0..<3 {
            let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs))
            for _ in 0..<5 {
                let id = try store.allocateID(entity: 1)
                #expect(seen.insert(id).inserted)
                try store.commit([.put(id, [.string("x"), .bytes(Data())])])
                try store.commit([.delete(id)])
            }
            try store.compact()
            try store.close()
        }
    }

    /// A snapshot answers whether it holds an ID from its entities' ID spans: outside the
    /// span no, inside a dense span yes, inside a gapped one by search. Asked of dense and
    /// gapped snapshots of two entities, for every ID around their spans, and through a
    /// log replayed at open, whose puts count as new only for IDs the snapshot lacks.
    @Test func snapshotsKnowTheirIDsBySpanAndSearch() throws {
        let fs = MemoryFileSystem()
        var store = try Store.open(at: "/db", schema: TestSchemas.people, options: memoryOptions(fs))
        var people: [RecordID] = [], dvds: [RecordID] = []
        for i in 0..<40 {
            let person = try store.allocateID(entity: 1), dvd = try store.allocateID(entity: 2)
            people.append(person)
            dvds.append(dvd)
            try store.commit([.put(person, [.string("p\(i)"), .int64(Int64(i)), .references([])]),
                              .put(dvd, [.string("d\(i)"), .null, .null])])
        }
        func check(_ live: Set<RecordID>, _ label: String) throws {
            for entity: UInt16 in [1, 2] {
                for serial: UInt64 in 0...45 {
                    let id = RecordID(entity: entity, serial: serial)
                    #expect(store.contains(id) == live.contains(id), "\(label): \(id)")
                }
            }
        }
        try store.compact()
        try check(Set(people + dvds), "dense")
        // Gaps at the start, in the middle and at the end of each span.
        let gone = [people[0], people[17], people[39], dvds[0], dvds[1], dvds[20]]
        try store.commit(gone.map { .delete($0) })
        try store.compact()
        let live = Set(people + dvds).subtracting(gone)
        try check(live, "gapped")
        // Replayed at the next open: a put of a held ID replaces it, one of a deleted ID
        // adds it back, a delete of a held ID removes it.
        try store.commit([.put(people[1], [.string("again"), .int64(1), .references([])]),
                          .put(people[17], [.string("back"), .int64(17), .references([])]),
                          .delete(people[2])])
        try store.close()
        store = try Store.open(at: "/db", options: memoryOptions(fs))
        #expect(store.count(entity: 1) == 37)
        #expect(store.count(entity: 2) == 37)
        try store.close()
    }

    @Test func automaticCompactionFoldsTheLog() throws {
        let fs = MemoryFileSystem()
        let options = StoreOptions(fileSystem: fs, compaction: .automatic(ratio: 1.0, minimumLogBytes: 8192),
                                   preallocationBytes: 4096)
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: options)
        var workload = BlobWorkload(seed: 4)
        for _ in 0..<400 { try store.commit(workload.nextTransaction(maxBlob: 64)) }
        let statistics = store.statistics
        #expect(statistics.logBytes < 2 * 8192 + 4096, "log was folded: \(statistics)")
        #expect(statistics.snapshotRecords > 0)
        #expect(try contents(of: store) == workload.model)
        try store.close()
        let logs = try fs.listDirectory("/db").filter { $0.hasSuffix(".log") }
        #expect(logs.count == 1, "old logs retired: \(logs)")
        #expect(try contents(of: Store.open(at: "/db", options: options)) == workload.model)
    }

    /// The log's record versions in the statistics are its puts, as reading the log
    /// counts them: after commits, after a replay, and none after a compaction.
    @Test func logRecordVersionsAreTheLogsPuts() throws {
        let fs = MemoryFileSystem()
        var store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs))
        defer { try? store.close() }
        func logPuts() throws -> Int {
            try store.history().reduce(0) { total, transaction in total + transaction.changes.values.reduce(0) { $0 + $1.inserts + $1.updates } }
        }
        var workload = BlobWorkload(seed: 9)
        for round in 0..<3 {
            for _ in 0..<40 { try store.commit(workload.nextTransaction(maxBlob: 32)) }
            #expect(store.statistics.logRecordVersions == (try logPuts()), "round \(round)")
            #expect(store.statistics.logRecordVersions > 0)
            try store.close()
            store = try Store.open(at: "/db", options: memoryOptions(fs))
            #expect(store.statistics.logRecordVersions == (try logPuts()), "round \(round), reopened")
            if round == 1 {
                try store.compact()
                #expect(store.statistics.logRecordVersions == 0)
            }
        }
    }

    /// The snapshot records the statistics call shadowed are those the overlay holds, as
    /// a walk over it counts them: after puts and deletes of snapshot and log records,
    /// after a replay, after a checkpoint's open, and none after a compaction.
    @Test func shadowedSnapshotRecordsAreTheOverlaysSnapshotRecords() throws {
        let fs = MemoryFileSystem()
        var options = memoryOptions(fs)
        options.checkpointMinimumRecords = 1
        var store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: options)
        defer { try? store.close() }
        func walked() -> Int {
            store.state.withLock { state in
                state.overlay.reduce(0) { total, entity in
                    total + entity.value.keys.filter { state.snapshot.contains(RecordID(rawValue: $0)) }.count
                }
            }
        }
        var workload = BlobWorkload(seed: 10)
        for round in 0..<4 {
            for _ in 0..<40 { try store.commit(workload.nextTransaction(maxBlob: 32)) }
            #expect(store.statistics.shadowedSnapshotRecords == walked(), "round \(round)")
            try store.close()
            store = try Store.open(at: "/db", options: options)
            #expect(store.recovery.usedCheckpoint)
            #expect(store.statistics.shadowedSnapshotRecords == walked(), "round \(round), reopened")
            if round == 0 {
                try fs.remove("/db/" + StoreFileName.checkpoint(2))
                try store.close()
                store = try Store.open(at: "/db", options: options)
                #expect(!store.recovery.usedCheckpoint)
                #expect(store.statistics.shadowedSnapshotRecords == walked(), "round \(round), replayed")
            }
            if round == 1 {
                try store.compact()
                #expect(store.statistics.shadowedSnapshotRecords == 0)
            }
        }
        #expect(walked() > 0)
    }

    @Test func closedStoreRefusesWrites() throws {
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(MemoryFileSystem()))
        try store.close()
        try store.close()
        #expect { try store.commit([.delete(RecordID(entity: 1, serial: 1))]) } throws: { ($0 as? CairnError)?.code == .closed }
        #expect(store.isClosed)
    }

    /// The same workload on disk through POSIX calls: commits, compaction, reopen.
    @Test func onDiskRoundTrip() throws {
        let path = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        var workload = BlobWorkload(seed: 8)
        do {
            let store = try Store.open(at: path, schema: TestSchemas.blobs,
                                       options: StoreOptions(compaction: .manual, preallocationBytes: 64 << 10))
            for index in 0..<200 {
                try store.commit(workload.nextTransaction(maxBlob: 300), durability: index % 2 == 0 ? .durable : .deferred)
                if index == 120 { try store.compact() }
            }
            try store.close()
        }
        let store = try Store.open(at: path)
        #expect(try contents(of: store) == workload.model)
        #expect(store.recovery.truncatedBytes == 0)
        let names = try FileManager.default.contentsOfDirectory(atPath: path).sorted()
        #expect(names == ["000003.snapshot", "000004.log", "LOCK", "MANIFEST"])
    }
}

/// Records checked and encoded ahead of a commit (as a context's save makes them) are
/// written only into a store whose schema they were checked against.
@Suite struct PreparedCommitTests {
    @Test func preparedRecordsCommitUnderTheirSchemaAndAreRefusedUnderAnother() throws {
        let store = try Store.open(at: "/db", schema: TestSchemas.people, options: memoryOptions(MemoryFileSystem()))
        defer { try? store.close() }
        let id = try store.allocateID(entity: 1)
        let values: [Value] = [.string("ann"), .int64(3), .references([])]
        var preparer = Store.Preparer(schema: store.schema)
        let operation = try preparer.put(id, values)
        // Another schema with the same entity numbers: the record fits its own entity there
        // too, but it was not checked against this store's.
        var other = TestSchemas.people
        other.entities[0] = EntityDescription(name: "Person", number: 1,
                                              attributes: [AttributeDescription(name: "username", type: .string)],
                                              relationships: [])
        #expect { try store.commit(prepared: [operation], for: other, expecting: [], durability: nil) } throws: {
            ($0 as? CairnError)?.code == .schemaMismatch
        }
        #expect(!store.contains(id), "nothing was written")
        // An equal schema that is not the store's own copy passes, by comparison.
        let equal = Schema(version: store.schema.version, entities: store.schema.entities.map { $0 })
        _ = try store.commit(prepared: [operation], for: equal, expecting: [], durability: nil)
        #expect(try store.get(id)?.values == values)
        // A preparer checks what a commit of changes checks.
        #expect { try preparer.put(id, [.int64(1)]) } throws: { ($0 as? CairnError)?.code == .invalidArgument }
        #expect { try preparer.delete(RecordID(entity: 9, serial: 1)) } throws: { ($0 as? CairnError)?.code == .invalidArgument }
    }
}

@Suite struct ConcurrencyTests {
    /// Eight threads commit durably at once; syncs are shared (group commit) and every
    /// commit is present after a reopen.
    @Test func concurrentCommitsShareSyncs() throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs))
        fs.onSync = { _, _ in Thread.sleep(forTimeInterval: 0.002) }  // a slow disk
        let before = fs.syncCount
        let threads = 8, perThread = 25
        // Real threads (concurrentPerform would run only as many as there are cores).
        let done = DispatchGroup()
        for thread in 0..<threads {
            done.enter()
            Thread.detachNewThread {
                for i in 0..<perThread {
                    let id = RecordID(entity: 1, serial: UInt64(thread * 1000 + i + 1))
                    _ = try? store.commit([.put(id, [.string("t\(thread)"), .bytes(Data([UInt8(i)]))])])
                }
                done.leave()
            }
        }
        done.wait()
        let syncs = fs.syncCount - before
        #expect(store.lastSequence == UInt64(threads * perThread))
        #expect(syncs < threads * perThread, "group commit: \(syncs) syncs for \(threads * perThread) commits")
        try store.close()
        let reopened = try Store.open(at: "/db", options: memoryOptions(fs))
        #expect(reopened.count(entity: 1) == threads * perThread)
    }

    /// A reader is not blocked while a commit waits for its sync.
    @Test func readersAreNotBlockedBySync() throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs))
        let id = RecordID(entity: 1, serial: 1)
        try store.commit([.put(id, [.string("first"), .bytes(Data())])])
        let readDuringSync = Locked<[Value]?>(nil)
        fs.onSync = { _, _ in
            let done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                let values = try? store.get(id)?.values
                readDuringSync.withLock { $0 = values }
                done.signal()
            }
            _ = done.wait(timeout: .now() + 10)
        }
        try store.commit([.put(id, [.string("second"), .bytes(Data())])])
        fs.onSync = nil
        // The reader finished during the sync, and saw the state before the commit.
        #expect(readDuringSync.value == [.string("first"), .bytes(Data())])
        #expect(try store.get(id)?.values.first == .string("second"))
    }

    /// Readers on other threads never see half a transaction.
    @Test func readersSeeWholeTransactions() throws {
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs,
                                   options: memoryOptions(MemoryFileSystem(), durability: .deferred))
        let a = RecordID(entity: 1, serial: 1), b = RecordID(entity: 1, serial: 2)
        try store.commit([.put(a, [.string("0"), .bytes(Data())]), .put(b, [.string("0"), .bytes(Data())])])
        let torn = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 3) { worker in
            if worker == 0 {
                for i in 1...300 {
                    let text = Value.string(String(i))
                    _ = try? store.commit([.put(a, [text, .bytes(Data())]), .put(b, [text, .bytes(Data())])])
                }
            } else {
                for _ in 0..<300 {
                    let records = (try? store.records(entity: 1)) ?? []
                    if records.count != 2 || records[0].values != records[1].values { torn.withLock { $0 += 1 } }
                }
            }
        }
        #expect(torn.value == 0)
    }
}

@Suite struct OptimisticLockingTests {
    @Test func staleVersionsAreRefusedAtomically() throws {
        let store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(MemoryFileSystem()))
        let a = RecordID(entity: 1, serial: 1), b = RecordID(entity: 1, serial: 2)
        #expect(store.version(of: a) == 0)
        let first = try store.commit([.put(a, [.string("a1"), .bytes(Data())])], expecting: [a: 0])
        #expect(store.version(of: a) == first)
        let (record, version) = try #require(try store.getVersioned(a))
        #expect(record.values.first == .string("a1") && version == first)
        try store.commit([.put(a, [.string("a2"), .bytes(Data())])], expecting: [a: version])
        // A writer that read version `first` is now stale: nothing of its transaction lands.
        #expect {
            try store.commit([.put(a, [.string("lost"), .bytes(Data())]), .put(b, [.string("b"), .bytes(Data())])],
                             expecting: [a: version])
        } throws: { error in
            guard let error = error as? CairnError else { return false }
            return error.code == .conflict && error.message.contains(a.description)
        }
        #expect(try store.get(a)?.values.first == .string("a2"))
        #expect(try store.get(b) == nil)
        try store.commit([.delete(a)], expecting: [a: store.version(of: a)])
        #expect(try store.getVersioned(a) == nil)
    }
}

@Suite struct VerifyTests {
    /// The schema of the differential test: people with a to-many and a required to-one
    /// (no inverse), DVDs pointing back, and tags nothing points at, two uniqueness groups.
    static let schema = Schema(entities: [
        EntityDescription(name: "DVD", number: 2,
                          attributes: [AttributeDescription(name: "title", type: .string)],
                          relationships: [RelationshipDescription(name: "owner", destination: "Person", inverse: "dvds")],
                          uniqueness: [["title"]]),
        EntityDescription(name: "Person", number: 1,
                          attributes: [AttributeDescription(name: "name", type: .string), AttributeDescription(name: "age", type: .int64, isOptional: true)],
                          relationships: [RelationshipDescription(name: "dvds", destination: "DVD", isToMany: true, inverse: "owner"),
                                          RelationshipDescription(name: "favourite", destination: "DVD", isOptional: false)],
                          uniqueness: [["name"], ["name", "age"]]),
        EntityDescription(name: "Tag", number: 3, attributes: [AttributeDescription(name: "label", type: .string)],
                          uniqueness: [["label"]]),
    ])

    /// What verify reports about references and uniqueness, worked out from every
    /// record's values held at once (as verify did before it kept only what it needs).
    static func expectedProblems(_ records: [RecordID: [Value]], schema: Schema) -> [String] {
        var problems: [String] = []
        for (id, values) in records.sorted(by: { $0.key < $1.key }) {
            guard let entity = schema.entity(number: id.entity) else { continue }
            for (offset, relationship) in entity.relationships.enumerated() {
                let targets = values[entity.attributes.count + offset].referencedIDs
                if !relationship.isToMany && !relationship.isOptional && targets.isEmpty {
                    problems.append("\(id): \(entity.name).\(relationship.name) is required but empty")
                }
                guard let destination = schema.entity(named: relationship.destination) else { continue }
                for raw in targets {
                    let target = RecordID(rawValue: raw)
                    guard target.entity == destination.number, let targetValues = records[target] else {
                        problems.append("\(id): \(entity.name).\(relationship.name) points at \(target), which does not exist")
                        continue
                    }
                    guard let inverse = relationship.inverse,
                          let index = destination.relationships.firstIndex(where: { $0.name == inverse }) else { continue }
                    if !targetValues[destination.attributes.count + index].referencedIDs.contains(id.rawValue) {
                        problems.append("\(id): \(entity.name).\(relationship.name) points at \(target), but its \(inverse) does not point back")
                    }
                }
            }
        }
        for entity in schema.entities {
            var seen = [[[Value]: RecordID]](repeating: [:], count: entity.uniqueness.count)
            for (id, values) in records.sorted(by: { $0.key < $1.key }) where id.entity == entity.number {
                for (index, group) in entity.uniqueness.enumerated() {
                    let key = group.compactMap { name in entity.attributes.firstIndex { $0.name == name } }.map { values[$0] }
                    if key.contains(where: \.isNull) { continue }
                    if let other = seen[index][key] {
                        problems.append("\(id): \(entity.name) (\(group.joined(separator: ", "))) = \(key) is also used by \(other)")
                    } else {
                        seen[index][key] = id
                    }
                }
            }
        }
        return problems
    }

    /// Random stores whose references point at records that exist, that never did, that
    /// were deleted, or at the wrong entity, whose inverses agree or not, and whose
    /// uniqueness groups repeat: verify reports exactly what the whole-store oracle finds,
    /// in its order, from the log and again from a snapshot.
    @Test(arguments: [1, 2, 3, 4, 5, 6])
    func verifyReportsWhatTheWholeStoreShows(seed: UInt64) throws {
        var generator = ValueGenerator(random: SplitMix64(seed: seed))
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: Self.schema, options: memoryOptions(fs))
        let people = (1...30).map { RecordID(entity: 1, serial: UInt64($0)) }
        let dvds = (1...40).map { RecordID(entity: 2, serial: UInt64($0)) }
        let tags = (1...10).map { RecordID(entity: 3, serial: UInt64($0)) }
        func someDVD() -> UInt64 {
            switch generator.int(10) {
            case 0: return RecordID(entity: 2, serial: 500 + UInt64(generator.int(5))).rawValue  // never existed
            case 1: return people[generator.int(people.count)].rawValue  // the wrong entity
            default: return dvds[generator.int(dvds.count)].rawValue
            }
        }
        var records: [RecordID: [Value]] = [:]
        for dvd in dvds {
            let owner: Value = generator.int(4) == 0 ? .null : .reference(people[generator.int(people.count)].rawValue)
            records[dvd] = [.string("t\(generator.int(30))"), owner]
        }
        for person in people {
            // Mostly the DVDs that name this person, sometimes another, sometimes none.
            var owned = dvds.filter { records[$0]?[1] == .reference(person.rawValue) }.map(\.rawValue)
            if generator.int(3) == 0 { owned.append(someDVD()) }
            if generator.int(5) == 0 { owned.removeAll() }
            let age: Value = generator.int(3) == 0 ? .null : .int64(Int64(generator.int(3)))
            records[person] = [.string("n\(generator.int(20))"), age, .references(owned), generator.int(6) == 0 ? .null : .reference(someDVD())]
        }
        for tag in tags { records[tag] = [.string("l\(generator.int(6))")] }
        // Written past the writers' checks (which refuse a reference to another entity's
        // record, and repeated unique values), as a crafted or older file could hold them.
        _ = try store.commit(operations: records.map { .put($0.key, body: ValueCoding.encode($0.value)) }, durable: true,
                             checkingUniqueness: false)
        var deleted = Set<RecordID>()
        for _ in 0..<5 { deleted.insert(dvds[generator.int(dvds.count)]) }
        try store.commit(deleted.map { .delete($0) })
        for id in deleted { records[id] = nil }

        let expected = Self.expectedProblems(records, schema: Self.schema)
        #expect(!expected.isEmpty)
        #expect(store.verify().map(\.description) == expected)
        try store.compact()
        #expect(store.verify().map(\.description) == expected)
    }

    @Test func verifyFindsBrokenReferencesInversesAndDamage() throws {
        let fs = MemoryFileSystem()
        let store = try Store.open(at: "/db", schema: TestSchemas.people, options: memoryOptions(fs))
        let person = RecordID(entity: 1, serial: 1), dvd = RecordID(entity: 2, serial: 2), ghost = RecordID(entity: 2, serial: 99)
        try store.commit([
            .put(person, [.string("p"), .int64(1), .references([dvd.rawValue, ghost.rawValue])]),
            .put(dvd, [.string("d"), .null, .null]),  // does not point back
        ])
        #expect(store.verify().isEmpty == false)
        let messages = store.verify().map(\.description)
        #expect(messages.contains { $0.contains("\(ghost), which does not exist") })
        #expect(messages.contains { $0.contains("does not point back") })
        try store.commit([.put(person, [.string("p"), .int64(1), .references([dvd.rawValue])]),
                          .put(dvd, [.string("d"), .null, .reference(person.rawValue)])])
        #expect(store.verify().isEmpty)
        try store.compact()
        try store.close()
        // A flipped byte in a record of the snapshot is reported with file and offset.
        let manifest = try Store.readManifest(in: "/db", fileSystem: fs)
        let snapshot = "/db/" + StoreFileName.snapshot(manifest.snapshotNumber)
        var bytes = fs.contents(of: snapshot)!
        let at = bytes.count - SnapshotFooter.size - 40 - 64  // inside the record area, before the index
        bytes[at] ^= 0x01
        try fs.setContents(of: snapshot, to: bytes)
        let damaged = try Store.open(at: "/db", options: memoryOptions(fs))
        let problems = damaged.verify()
        #expect(problems.contains { $0.path == snapshot && $0.offset != nil }, "\(problems)")
    }

    /// Bodies larger than the encoder's scratch buffer and than the snapshot writer's
    /// (measured, then encoded at their size; written to the file from where they lie),
    /// among small ones: a compaction from the log, and one that copies the snapshot's
    /// frames as they are, keep every record byte for byte.
    @Test func largeBodiesAreEncodedAndCompactedWhole() throws {
        let fs = MemoryFileSystem()
        var store = try Store.open(at: "/db", schema: TestSchemas.blobs, options: memoryOptions(fs))
        var model: Contents = [:]
        // (The last: a long string, then a value of a byte or two.)
        for (serial, size) in [(1, 3), (2, 5_000), (3, 2 << 20), (4, 0), (5, (1 << 20) - 7), (6, 30_000)] {
            let bytes = Data((0..<(serial == 6 ? 0 : size)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ serial) })
            let id = RecordID(entity: 1, serial: UInt64(serial))
            model[id] = [.string(String(repeating: "n", count: size / 3)), .bytes(bytes)]
            try store.commit([.put(id, model[id]!)])
        }
        for round in 0..<2 {
            try store.compact()
            try store.close()
            store = try Store.open(at: "/db", options: memoryOptions(fs))
            #expect(try contents(of: store) == model, "round \(round)")
            #expect(store.verify().isEmpty, "round \(round)")
        }
        try store.close()
    }
}
