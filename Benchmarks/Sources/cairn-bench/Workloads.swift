import Cairn
import Dispatch
import Foundation

final class Row: ManagedObject {
    @Attribute var a0: Int64 = 0
    @Attribute(indexed: true) var a1: Int64 = 0
    @Attribute var a2: Int64 = 0
    @Attribute var a3: Int64 = 0
    @Attribute var a4: Int64 = 0
    @Attribute var a5: Int64 = 0
    @Attribute var a6: Int64 = 0
    @Attribute var a7: Int64 = 0
    @Attribute var a8: Int64 = 0
    @Attribute var a9: Int64 = 0
}

final class Mixed: ManagedObject {
    @Attribute var flag: Bool = false
    @Attribute var small: Int32 = 0
    @Attribute var big: Int64 = 0
    @Attribute var real: Double = 0
    @Attribute var text: String = ""
    @Attribute var blob: Data = Data()
}

final class Parent: ManagedObject {
    @Attribute var name: String = ""
    @ToMany(inverse: "parent") var children: [Child]
}

final class Child: ManagedObject {
    @Attribute var value: Int64 = 0
    @ToOne(inverse: "children") var parent: Parent?
}

/// insert_unique's entity: a key every object must have its own of.
final class Keyed: ManagedObject {
    @Attribute var key: String = ""
    @Attribute var value: Int64 = 0
    override class var uniqueness: [[String]] { [["key"]] }
}

/// insert_unique's keys, made before either engine's timed part: `k` and a permutation
/// of 0..<n, so that keys do not arrive in order.
func uniqueKeys(_ n: Int) -> [String] { (0..<n).map { "k\(($0 &* 7_919) % n)" } }

/// What one timed run measured.
struct Measurement: Codable {
    var seconds: Double
    var operations: Int
    var extra: [String: Double] = [:]
}

enum Engine: String, CaseIterable, Codable { case cairn, sqlite }

/// A deterministic value for row `i`, column `c`, in 0..<1000.
@inline(__always) func cell(_ i: Int, _ c: Int) -> Int64 { Int64((i &* 2_654_435_761 &+ c &* 40_503) % 1000) }

/// insert_mixed's strings, 0 to 100 characters, made before either engine's timed part:
/// made inside it, `String(repeating:count:)` was half of Cairn's instructions there, and
/// as much of SQLite's time, which measured Swift's strings rather than either engine.
func mixedTexts() -> [String] { (0...100).map { String(repeating: "x", count: $0) } }

/// The timed part of a workload, in a function of its own so that a profiler can count
/// it alone: `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*timedRegion*'
/// cairn-bench --child NAME cairn SCALE DIR`. With `CAIRN_BENCH_PERF_CONTROL` naming the
/// control FIFO of `perf record --delay=-1 --control fifo:FIFO`, perf samples it alone too.
@inline(never) func timedRegion<T>(_ body: () throws -> T) rethrows -> T {
    perfControl?.write(Data("enable\n".utf8))
    defer { perfControl?.write(Data("disable\n".utf8)) }
    return try body()
}

/// The FIFO through which ``timedRegion(_:)`` turns perf's sampling on and off, if any.
let perfControl: FileHandle? = ProcessInfo.processInfo.environment["CAIRN_BENCH_PERF_CONTROL"]
    .flatMap { FileHandle(forWritingAtPath: $0) }

/// Starts a workload's timed part: the clock, and a new window for its peak resident
/// memory (``resetPeakResident()``), so that the peak reported for a workload is that of
/// its timed part, not of the setup that built its store.
func startTimedPart() -> UInt64 {
    _ = perfControl  // opened here, not on the timed part's first use (it reads the environment)
    resetPeakResident()
    return now()
}

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
func seconds(since start: UInt64) -> Double { Double(now() - start) / 1e9 }

/// The Cairn side: the public object API, as users take it.
struct CairnSide {
    let path: String
    let durability: Durability
    let coordinator: Coordinator
    let model: Model

    init(path: String, durability: Durability = .durable) throws {
        self.path = path
        self.durability = durability
        model = try Model(Row.self, Mixed.self, Parent.self, Child.self, Keyed.self)
        var options = StoreOptions(durability: durability, compaction: .default)
        options.history = CairnSide.history
        coordinator = try Coordinator(path: path, schema: model.schema, options: options)
    }

    /// The history every store of this process keeps (the `…_history` workloads set it).
    nonisolated(unsafe) static var history: HistoryRetention?  // one thread: the child's main

    /// A context with undo off (as Core Data's on iOS): SQLite keeps no undo history.
    /// insert_bulk_undo measures the default, undo on.
    func context(undo: Bool = false) -> Context {
        let context = Context(coordinator: coordinator, model: model)
        context.undoManager.isEnabled = undo
        return context
    }

    func close() { try? coordinator.close() }

    func insertRows(_ count: Int, batch: Int = 100_000, undo: Bool = false) throws {
        var done = 0
        while done < count {
            let context = self.context(undo: undo)
            for i in done..<min(count, done + batch) { fillRow(i, in: context) }
            try context.save()
            done = min(count, done + batch)
        }
    }
}

/// Sets row `i`'s ten values (``cell(_:_:)``) on a new object in `context`.
func fillRow(_ i: Int, in context: Context) {
    let row = Row.create(in: context)
    row.a0 = cell(i, 0); row.a1 = cell(i, 1); row.a2 = cell(i, 2); row.a3 = cell(i, 3); row.a4 = cell(i, 4)
    row.a5 = cell(i, 5); row.a6 = cell(i, 6); row.a7 = cell(i, 7); row.a8 = cell(i, 8); row.a9 = cell(i, 9)
}

/// The query workloads' ten range queries on `column`, each of a tenth of the values
/// (round r: r·10 ≤ value < r·10 + 100): the rows matched, each one's a0 read.
func rangeQueries(_ context: Context, column: String) throws -> Int {
    var matched = 0
    for round in 0..<10 {
        let rows = try context.fetch(FetchQuery(Row.self, format: "\(column) >= %@ AND \(column) < %@", Int64(Int64(round * 10)), Int64(Int64(round * 10 + 100))))
        for row in rows { matched += row.a0 >= 0 ? 1 : 0 }
    }
    return matched
}

/// ``rangeQueries(_:column:)`` in SQL.
func rangeQueries(_ db: SQLiteDB, column: String) throws -> Int {
    let select = try db.prepare("SELECT a0 FROM row WHERE \(column) >= ? AND \(column) < ?")
    var matched = 0
    for round in 0..<10 {
        select.bind(1, Int64(round * 10)); select.bind(2, Int64(round * 10 + 100))
        while try select.step() { matched += select.int(0) >= 0 ? 1 : 0 }
        select.reset()
    }
    return matched
}

/// The SQLite side: WAL, prepared statements, one transaction for bulk work.
struct SQLiteSide {
    let db: SQLiteDB

    init(path: String, durability: Durability = .durable) throws {
        db = try SQLiteDB(path: path + ".sqlite", synchronous: durability == .durable ? "FULL" : "NORMAL")
        try db.exec("""
            CREATE TABLE IF NOT EXISTS row (id INTEGER PRIMARY KEY, a0 INT, a1 INT, a2 INT, a3 INT, a4 INT, a5 INT, a6 INT, a7 INT, a8 INT, a9 INT);
            CREATE INDEX IF NOT EXISTS row_a1 ON row(a1);
            CREATE TABLE IF NOT EXISTS mixed (id INTEGER PRIMARY KEY, flag INT, small INT, big INT, real REAL, text TEXT, blob BLOB);
            CREATE TABLE IF NOT EXISTS parent (id INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE IF NOT EXISTS child (id INTEGER PRIMARY KEY, value INT, parent INT REFERENCES parent(id));
            CREATE INDEX IF NOT EXISTS child_parent ON child(parent);
            CREATE TABLE IF NOT EXISTS keyed (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, value INT);
            """)
    }

    func insertRows(_ count: Int) throws {
        try db.exec("BEGIN")
        try insertRowsInTransaction(count)
        try db.exec("COMMIT")
    }

    /// ``insertRows(_:)`` in the open transaction.
    func insertRowsInTransaction(_ count: Int) throws {
        let insert = try db.prepare("INSERT INTO row (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9) VALUES (?,?,?,?,?,?,?,?,?,?)")
        for i in 0..<count {
            for c in 0..<10 { insert.bind(Int32(c + 1), cell(i, c)) }
            try insert.step()
            insert.reset()
        }
    }
}

/// Runs one repetition of a workload on one engine, in this process, in `directory`.
func runWorkload(_ name: String, engine: Engine, scale: Int, directory: String) throws -> Measurement {
    let path = directory + "/store"
    if name.hasSuffix("_history") {
        // The workload with history kept (FORMAT.md §5.1): its notes, and a history file per compaction.
        CairnSide.history = .unlimited
        return try runWorkload(String(name.dropLast("_history".count)), engine: engine, scale: scale, directory: directory)
    }
    if let (workload, readers) = Followers.split(name) {
        // The store first, for the readers to open; then the workload beside them.
        switch engine {
        case .cairn: try CairnSide(path: path).close()
        case .sqlite: _ = try SQLiteSide(path: path)
        }
        let followers = try Followers.start(readers, engine: engine, path: path)
        defer { followers.stop() }
        return try runWorkload(workload, engine: engine, scale: scale, directory: directory)
    }
    switch (name, engine) {
    case ("insert_bulk", .cairn), ("insert_bulk_batch", .cairn), ("insert_bulk_undo", .cairn):
        // insert_bulk_batch: the same rows through a batch insert (Context.batchInsert), one
        // transaction filled in through one object that holds each new record in turn.
        let side = try CairnSide(path: path)
        let n = 200_000 / scale
        let start = startTimedPart()
        try timedRegion {
            guard name == "insert_bulk_batch" else { return try side.insertRows(n, batch: n, undo: name == "insert_bulk_undo") }
            let ids = try side.context().batchInsert(Row.self, count: n) { row, i in
                row.a0 = cell(i, 0); row.a1 = cell(i, 1); row.a2 = cell(i, 2); row.a3 = cell(i, 3); row.a4 = cell(i, 4)
                row.a5 = cell(i, 5); row.a6 = cell(i, 6); row.a7 = cell(i, 7); row.a8 = cell(i, 8); row.a9 = cell(i, 9)
            }
            guard ids.count == n else { throw BenchError("\(name) inserted \(ids.count) of \(n) rows") }
        }
        let time = seconds(since: start)
        side.close()
        return Measurement(seconds: time, operations: n)
    case ("insert_bulk", .sqlite), ("insert_bulk_batch", .sqlite), ("insert_bulk_undo", .sqlite):
        let side = try SQLiteSide(path: path)
        let n = 200_000 / scale
        let start = startTimedPart()
        try side.insertRows(n)
        return Measurement(seconds: seconds(since: start), operations: n)

    case ("insert_mixed", .cairn):
        let side = try CairnSide(path: path)
        let n = 100_000 / scale
        let texts = mixedTexts()
        let start = startTimedPart()
        try timedRegion {
            let context = side.context()
            for i in 0..<n {
                let object = Mixed.create(in: context)
                object.flag = i % 2 == 0
                object.small = Int32(i % 100_000)
                object.big = Int64(i) * 1_000_003
                object.real = Double(i) * 0.5
                object.text = texts[i % 101]
                object.blob = Data(repeating: UInt8(i % 256), count: i % 100)
            }
            try context.save()
        }
        let time = seconds(since: start)
        side.close()
        return Measurement(seconds: time, operations: n)
    case ("insert_mixed", .sqlite):
        let side = try SQLiteSide(path: path)
        let n = 100_000 / scale
        let texts = mixedTexts()
        let start = startTimedPart()
        try side.db.exec("BEGIN")
        let insert = try side.db.prepare("INSERT INTO mixed (flag, small, big, real, text, blob) VALUES (?,?,?,?,?,?)")
        for i in 0..<n {
            insert.bind(1, Int64(i % 2 == 0 ? 1 : 0)); insert.bind(2, Int64(i % 100_000)); insert.bind(3, Int64(i) * 1_000_003)
            insert.bind(4, Double(i) * 0.5); insert.bind(5, texts[i % 101])
            insert.bind(6, [UInt8](repeating: UInt8(i % 256), count: i % 100))
            try insert.step(); insert.reset()
        }
        try side.db.exec("COMMIT")
        return Measurement(seconds: seconds(since: start), operations: n)

    case ("insert_unique", .cairn):
        // 100k objects with a unique key, saved 1,000 at a time: each save checks every new
        // key against the stored ones (an index lookup each), as SQLite's UNIQUE index does.
        let side = try CairnSide(path: path)
        let n = 100_000 / scale
        let keys = uniqueKeys(n)
        let start = startTimedPart()
        try timedRegion {
            var done = 0
            while done < n {
                let context = side.context()
                for i in done..<min(n, done + 1_000) {
                    let object = Keyed.create(in: context)
                    object.key = keys[i]
                    object.value = Int64(i)
                }
                try context.save()
                done += 1_000
            }
        }
        let time = seconds(since: start)
        side.close()
        return Measurement(seconds: time, operations: n)
    case ("insert_unique", .sqlite):
        let side = try SQLiteSide(path: path)
        let n = 100_000 / scale
        let keys = uniqueKeys(n)
        let start = startTimedPart()
        let insert = try side.db.prepare("INSERT INTO keyed (key, value) VALUES (?, ?)")
        var done = 0
        while done < n {
            try side.db.exec("BEGIN")
            for i in done..<min(n, done + 1_000) {
                insert.bind(1, keys[i]); insert.bind(2, Int64(i))
                _ = try insert.step(); insert.reset()
            }
            try side.db.exec("COMMIT")
            done += 1_000
        }
        return Measurement(seconds: seconds(since: start), operations: n)

    case ("commit_single", .cairn):
        let side = try CairnSide(path: path)
        let n = 2_000 / scale
        let context = side.context()
        let start = startTimedPart()
        for i in 0..<n {
            let row = Row.create(in: context)
            row.a0 = Int64(i)
            try context.save()
        }
        let time = seconds(since: start)
        side.close()
        return Measurement(seconds: time, operations: n)
    case ("commit_single", .sqlite):
        let side = try SQLiteSide(path: path)
        let n = 2_000 / scale
        let insert = try side.db.prepare("INSERT INTO row (a0) VALUES (?)")
        let start = startTimedPart()
        for i in 0..<n {
            insert.bind(1, Int64(i)); try insert.step(); insert.reset()
        }
        return Measurement(seconds: seconds(since: start), operations: n)

    case ("commit_concurrent", .cairn):
        let side = try CairnSide(path: path)
        let writers = 8, each = 250 / scale
        let start = startTimedPart()
        let failures = LockedCounter()
        let group = DispatchGroup()
        for _ in 0..<writers {
            group.enter()
            Thread.detachNewThread {
                let context = side.context()
                for i in 0..<each {
                    let row = Row.create(in: context)
                    row.a0 = Int64(i)
                    if (try? context.save()) == nil { failures.add() }
                }
                group.leave()
            }
        }
        group.wait()
        let time = seconds(since: start)
        side.close()
        guard failures.value == 0 else { throw BenchError("cairn concurrent saves failed") }
        return Measurement(seconds: time, operations: writers * each)
    case ("commit_concurrent", .sqlite):
        _ = try SQLiteSide(path: path)
        let writers = 8, each = 250 / scale
        let start = startTimedPart()
        let failures = LockedCounter()
        let group = DispatchGroup()
        for _ in 0..<writers {
            group.enter()
            Thread.detachNewThread {
                do {
                    let db = try SQLiteDB(path: path + ".sqlite", synchronous: "FULL")
                    let insert = try db.prepare("INSERT INTO row (a0) VALUES (?)")
                    for i in 0..<each { insert.bind(1, Int64(i)); try insert.step(); insert.reset() }
                } catch { failures.add() }
                group.leave()
            }
        }
        group.wait()
        guard failures.value == 0 else { throw BenchError("sqlite concurrent inserts failed") }
        return Measurement(seconds: seconds(since: start), operations: writers * each)

    case ("fetch_all", .cairn), ("fetch_sorted", .cairn):
        // fetch_sorted: the same objects sorted by an unindexed attribute, descending.
        let n = 200_000 / scale
        do { let side = try CairnSide(path: path); try side.insertRows(n); side.close() }
        let side = try CairnSide(path: path)
        let start = startTimedPart()
        let sum = try timedRegion {
            let context = side.context()
            var sum: Int64 = 0
            let request = name == "fetch_sorted" ? FetchQuery(Row.self, fetchPredicate: nil, sortKeys: [SortKey("a3", ascending: false)])
                : FetchQuery(Row.self)
            for row in try context.fetch(request) {
                sum &+= row.a0 &+ row.a1 &+ row.a2 &+ row.a3 &+ row.a4 &+ row.a5 &+ row.a6 &+ row.a7 &+ row.a8 &+ row.a9
            }
            return sum
        }
        let time = seconds(since: start)
        side.close()
        return Measurement(seconds: time, operations: n, extra: ["checksum": Double(sum)])
    case ("fetch_all", .sqlite), ("fetch_sorted", .sqlite):
        let n = 200_000 / scale
        let side = try SQLiteSide(path: path)
        try side.insertRows(n)
        let start = startTimedPart()
        let order = name == "fetch_sorted" ? " ORDER BY a3 DESC, id" : ""
        let select = try side.db.prepare("SELECT a0, a1, a2, a3, a4, a5, a6, a7, a8, a9 FROM row" + order)
        var sum: Int64 = 0
        while try select.step() { for c in 0..<10 { sum &+= select.int(Int32(c)) } }
        return Measurement(seconds: seconds(since: start), operations: n, extra: ["checksum": Double(sum)])

    case ("open_cold", .cairn):
        let n = 1_000_000 / scale
        do {
            let side = try CairnSide(path: path)
            try side.insertRows(n)
            try side.coordinator.compact()
            let context = side.context()  // a log tail: 1 % of the rows changed
            for row in try context.fetch(FetchQuery(Row.self, format: "a1 < 10")) { row.a9 = -1 }
            try context.save()
            side.close()
        }
        let start = startTimedPart()
        let side = try timedRegion {
            let side = try CairnSide(path: path)
            let context = side.context()
            // One object, as SQLite's LIMIT 1.
            var request = try FetchQuery(Row.self, format: "a1 == 5")
            request.fetchLimit = 1
            let first = try context.fetch(request).first
            _ = first?.a2
            return side
        }
        let time = seconds(since: start)
        side.close()
        return Measurement(seconds: time, operations: 1)
    case ("open_cold", .sqlite):
        let n = 1_000_000 / scale
        do {
            let side = try SQLiteSide(path: path)
            try side.insertRows(n)
            try side.db.exec("UPDATE row SET a9 = -1 WHERE a1 < 10")
        }
        let start = startTimedPart()
        let side = try SQLiteSide(path: path)
        let select = try side.db.prepare("SELECT a2 FROM row WHERE a1 = 5 LIMIT 1")
        _ = try select.step()
        return Measurement(seconds: seconds(since: start), operations: 1)

    case ("point_lookup", .cairn):
        let n = 1_000_000 / scale, lookups = 100_000 / scale
        do { let side = try CairnSide(path: path); try side.insertRows(n); try side.coordinator.compact(); side.close() }
        let side = try CairnSide(path: path)
        let context = side.context()
        let ids = try side.context().fetchObjectIDs(FetchQuery(Row.self))  // (a context of its own: no rows cached)
        var random = SplitMix64(seed: 7)
        let picks = (0..<lookups).map { _ in ids[Int(random.next() % UInt64(ids.count))] }
        let start = startTimedPart()
        var sum: Int64 = 0
        for id in picks {
            if let row = try context.existingObject(Row.self, with: id) { sum &+= row.a3 }
        }
        let time = seconds(since: start)
        side.close()
        return Measurement(seconds: time, operations: lookups, extra: ["checksum": Double(sum)])
    case ("point_lookup", .sqlite):
        let n = 1_000_000 / scale, lookups = 100_000 / scale
        let side = try SQLiteSide(path: path)
        try side.insertRows(n)
        var random = SplitMix64(seed: 7)
        let picks = (0..<lookups).map { _ in Int64(random.next() % UInt64(n)) + 1 }
        let select = try side.db.prepare("SELECT a3 FROM row WHERE id = ?")
        let start = startTimedPart()
        var sum: Int64 = 0
        for id in picks { select.bind(1, id); if try select.step() { sum &+= select.int(0) }; select.reset() }
        return Measurement(seconds: seconds(since: start), operations: lookups, extra: ["checksum": Double(sum)])

    case ("query_unindexed", .cairn), ("query_indexed", .cairn):
        let n = 200_000 / scale
        do { let side = try CairnSide(path: path); try side.insertRows(n); try side.coordinator.compact(); side.close() }
        let side = try CairnSide(path: path)
        let column = name == "query_indexed" ? "a1" : "a3"
        let context = side.context()
        if name == "query_indexed" { _ = try context.count(for: FetchQuery(Row.self, format: "a1 == -5")) }  // build the index
        let start = startTimedPart()
        let matched = try timedRegion { try rangeQueries(context, column: column) }
        let time = seconds(since: start)
        side.close()
        return Measurement(seconds: time, operations: 10, extra: ["matched": Double(matched)])
    case ("query_unindexed", .sqlite), ("query_indexed", .sqlite):
        let n = 200_000 / scale
        let side = try SQLiteSide(path: path)
        try side.insertRows(n)
        let column = name == "query_indexed" ? "a1" : "a3"
        let start = startTimedPart()
        let matched = try rangeQueries(side.db, column: column)
        return Measurement(seconds: seconds(since: start), operations: 10, extra: ["matched": Double(matched)])

    case ("update_all", .cairn), ("update_all_batch", .cairn):
        // update_all_batch: the same change as a batch update (Context.batchUpdate), the
        // store's records changed in one transaction through one object that holds each in turn.
        let n = 100_000 / scale
        do { let side = try CairnSide(path: path); try side.insertRows(n); side.close() }
        let side = try CairnSide(path: path)
        let context = side.context()
        let start = startTimedPart()
        let changed = try timedRegion { () throws -> Int in
            if name == "update_all_batch" { return try context.batchUpdate(FetchQuery(Row.self)) { $0.a5 = $0.a5 &+ 1 } }
            var count = 0
            for row in try context.fetch(FetchQuery(Row.self)) { row.a5 = row.a5 &+ 1; count += 1 }
            try context.save()
            return count
        }
        let time = seconds(since: start)
        side.close()
        guard changed == n else { throw BenchError("\(name) changed \(changed) of \(n) rows") }
        return Measurement(seconds: time, operations: n)
    case ("update_all", .sqlite), ("update_all_batch", .sqlite):
        let n = 100_000 / scale
        let side = try SQLiteSide(path: path)
        try side.insertRows(n)
        let start = startTimedPart()
        try side.db.exec("BEGIN; UPDATE row SET a5 = a5 + 1; COMMIT")
        return Measurement(seconds: seconds(since: start), operations: n)

    case ("delete_compact", .cairn), ("delete_compact_batch", .cairn):
        // delete_compact_batch: the same deletion as a batch delete (Context.batchDelete).
        let n = 1_000_000 / scale
        do { let side = try CairnSide(path: path); try side.insertRows(n); try side.coordinator.compact(); side.close() }
        let before = directoryBytes(path)
        let side = try CairnSide(path: path)
        let context = side.context()
        let start = startTimedPart()
        let request = try FetchQuery(Row.self, format: "a0 < 500")
        if name == "delete_compact_batch" {
            _ = try timedRegion { try context.batchDelete(request) }
        } else {
            for row in try context.fetch(request) { context.delete(row) }
            try context.save()
        }
        try side.coordinator.compact()
        let time = seconds(since: start)
        side.close()
        return Measurement(seconds: time, operations: n / 2, extra: ["bytesBefore": Double(before), "bytesAfter": Double(directoryBytes(path))])
    case ("delete_compact", .sqlite), ("delete_compact_batch", .sqlite):
        let n = 1_000_000 / scale
        do { let side = try SQLiteSide(path: path); try side.insertRows(n); try side.db.exec("PRAGMA wal_checkpoint(TRUNCATE)") }
        let before = directoryBytes(directory, prefix: "store.sqlite")
        let side = try SQLiteSide(path: path)
        let start = startTimedPart()
        try side.db.exec("DELETE FROM row WHERE a0 < 500")
        try side.db.exec("VACUUM")
        try side.db.exec("PRAGMA wal_checkpoint(TRUNCATE)")
        let time = seconds(since: start)
        return Measurement(seconds: time, operations: n / 2, extra: ["bytesBefore": Double(before), "bytesAfter": Double(directoryBytes(directory, prefix: "store.sqlite"))])

    case ("graph", .cairn), ("graph_prefetch", .cairn):
        // graph_prefetch: the same, the fetch naming the children for prefetching.
        let parents = 1_000 / scale, children = 100
        try makeGraphStore(path: path, parents: parents, children: children)
        let side = try CairnSide(path: path)
        let context = side.context()
        var query = FetchQuery(Parent.self)
        if name == "graph_prefetch" { query.relationshipKeyPathsForPrefetching = [\.children] }
        let start = startTimedPart()
        let sum = try timedRegion {
            var sum: Int64 = 0
            for parent in try context.fetch(query) { for child in parent.children { sum &+= child.value } }
            return sum
        }
        let time = seconds(since: start)
        side.close()
        return Measurement(seconds: time, operations: parents * children, extra: ["checksum": Double(sum)])
    case ("graph", .sqlite), ("graph_prefetch", .sqlite):
        let parents = 1_000 / scale, children = 100
        let side = try makeGraphDatabase(path: path, parents: parents, children: children)
        let start = startTimedPart()
        var sum: Int64 = 0
        let all = try side.db.prepare("SELECT id FROM parent")
        let kids = try side.db.prepare("SELECT value FROM child WHERE parent = ?")
        while try all.step() {
            kids.bind(1, all.int(0))
            while try kids.step() { sum &+= kids.int(0) }
            kids.reset()
        }
        return Measurement(seconds: seconds(since: start), operations: parents * children, extra: ["checksum": Double(sum)])

    case ("graph_count", .cairn):
        // graph's store; each parent's children counted, none of them read.
        let parents = 1_000 / scale, children = 100
        try makeGraphStore(path: path, parents: parents, children: children)
        let side = try CairnSide(path: path)
        let context = side.context()
        let start = startTimedPart()
        let total = try timedRegion {
            var total = 0
            // (`$children.count` counts the stored IDs; `children.count` makes a fault per child.)
            for parent in try context.fetch(FetchQuery(Parent.self)) { total += parent.$children.count }
            return total
        }
        let time = seconds(since: start)
        side.close()
        guard total == parents * children else { throw BenchError("graph_count counted \(total) children") }
        return Measurement(seconds: time, operations: parents * children)
    case ("graph_count", .sqlite):
        let parents = 1_000 / scale, children = 100
        let side = try makeGraphDatabase(path: path, parents: parents, children: children)
        let start = startTimedPart()
        var total: Int64 = 0
        let all = try side.db.prepare("SELECT id FROM parent")
        let count = try side.db.prepare("SELECT count(*) FROM child WHERE parent = ?")
        while try all.step() {
            count.bind(1, all.int(0))
            while try count.step() { total += count.int(0) }
            count.reset()
        }
        guard total == Int64(parents * children) else { throw BenchError("graph_count counted \(total) children") }
        return Measurement(seconds: seconds(since: start), operations: parents * children)

    case ("append_children", .cairn):
        // The SwiftData idiom for building a to-many list: `parent.children.append(child)`,
        // one child at a time, into one parent; then one save.
        let children = 20_000 / scale
        let side = try CairnSide(path: path)
        let context = side.context()
        let start = startTimedPart()
        let count = try timedRegion { () throws -> Int in
            let parent = Parent.create(in: context)
            parent.name = "p"
            for c in 0..<children {
                let child = Child.create(in: context)
                child.value = Int64(c)
                parent.children.append(child)
            }
            try context.save()
            return parent.children.count
        }
        let time = seconds(since: start)
        side.close()
        guard count == children else { throw BenchError("append_children holds \(count) of \(children) children") }
        return Measurement(seconds: time, operations: children)
    case ("append_children", .sqlite):
        let children = 20_000 / scale
        let side = try SQLiteSide(path: path)
        let start = startTimedPart()
        try side.db.exec("BEGIN")
        let insertParent = try side.db.prepare("INSERT INTO parent (id, name) VALUES (?, ?)")
        let insertChild = try side.db.prepare("INSERT INTO child (value, parent) VALUES (?, ?)")
        insertParent.bind(1, Int64(1)); insertParent.bind(2, "p"); try insertParent.step(); insertParent.reset()
        for c in 0..<children { insertChild.bind(1, Int64(c)); insertChild.bind(2, Int64(1)); try insertChild.step(); insertChild.reset() }
        try side.db.exec("COMMIT")
        return Measurement(seconds: seconds(since: start), operations: children)

    case ("query_sorted", .cairn), ("query_sorted_indexed", .cairn):
        // Paging through records sorted by an unindexed attribute: ten pages of 20, at
        // offsets 0, 1,000, …, 9,000, of 200k records by a3 descending (ties by ID);
        // query_sorted_indexed by the indexed a1.
        let column = name == "query_sorted" ? "a3" : "a1"
        let n = 200_000 / scale
        do { let side = try CairnSide(path: path); try side.insertRows(n); try side.coordinator.compact(); side.close() }
        let side = try CairnSide(path: path)
        let context = side.context()
        let start = startTimedPart()
        let sum = try timedRegion {
            var sum: Int64 = 0
            for round in 0..<10 {
                var request = FetchQuery(Row.self, fetchPredicate: nil, sortKeys: [SortKey(column, ascending: false)])
                request.fetchOffset = round * 1_000 / scale
                request.fetchLimit = 20
                for row in try context.fetch(request) { sum &+= row.a0 }
            }
            return sum
        }
        let time = seconds(since: start)
        side.close()
        return Measurement(seconds: time, operations: 10, extra: ["checksum": Double(sum)])
    case ("query_sorted", .sqlite), ("query_sorted_indexed", .sqlite):
        let column = name == "query_sorted" ? "a3" : "a1"
        let n = 200_000 / scale
        let side = try SQLiteSide(path: path)
        try side.insertRows(n)
        let select = try side.db.prepare("SELECT a0 FROM row ORDER BY \(column) DESC, id LIMIT 20 OFFSET ?")
        let start = startTimedPart()
        var sum: Int64 = 0
        for round in 0..<10 {
            select.bind(1, Int64(round * 1_000 / scale))
            while try select.step() { sum &+= select.int(0) }
            select.reset()
        }
        return Measurement(seconds: seconds(since: start), operations: 10, extra: ["checksum": Double(sum)])

    case ("query_pending", .cairn):
        // Queries that see unsaved changes (a fetch includes its context's pending changes,
        // as Core Data's does): 100k new objects not yet saved, then query_unindexed's ten
        // range queries.
        let n = 100_000 / scale
        let side = try CairnSide(path: path)
        let context = side.context()
        for i in 0..<n { fillRow(i, in: context) }
        let start = startTimedPart()
        let matched = try timedRegion { try rangeQueries(context, column: "a3") }
        let time = seconds(since: start)
        side.close()
        return Measurement(seconds: time, operations: 10, extra: ["matched": Double(matched)])
    case ("query_pending", .sqlite):
        // The same queries inside the transaction that inserted the rows, not yet committed.
        let n = 100_000 / scale
        let side = try SQLiteSide(path: path)
        try side.db.exec("BEGIN")
        try side.insertRowsInTransaction(n)
        let start = startTimedPart()
        let matched = try rangeQueries(side.db, column: "a3")
        let time = seconds(since: start)
        try side.db.exec("ROLLBACK")
        return Measurement(seconds: time, operations: 10, extra: ["matched": Double(matched)])

    default:
        throw BenchError("unknown workload \(name)")
    }
}

let workloadNames = ["insert_bulk", "insert_mixed", "commit_single", "commit_concurrent", "fetch_all", "fetch_sorted", "open_cold",
                     "point_lookup", "query_unindexed", "query_indexed", "update_all", "delete_compact", "graph", "graph_prefetch", "graph_count",
                     "insert_bulk_batch", "update_all_batch", "delete_compact_batch", "insert_bulk_undo", "insert_unique",
                     "append_children", "query_pending", "query_sorted", "query_sorted_indexed",
                     "commit_single_4readers", "insert_bulk_4readers",
                     "commit_single_history", "insert_bulk_history", "update_all_history"]

/// graph's store: `parents` parents of `children` children each, saved and closed.
func makeGraphStore(path: String, parents: Int, children: Int) throws {
    let side = try CairnSide(path: path)
    let context = side.context()
    for p in 0..<parents {
        let parent = Parent.create(in: context)
        parent.name = "p\(p)"
        var list: [Child] = []
        for c in 0..<children { let child = Child.create(in: context); child.value = Int64(c); list.append(child) }
        parent.children = list
    }
    try context.save()
    side.close()
}

/// graph's rows in SQLite, in one transaction; the database stays open.
func makeGraphDatabase(path: String, parents: Int, children: Int) throws -> SQLiteSide {
    let side = try SQLiteSide(path: path)
    try side.db.exec("BEGIN")
    let insertParent = try side.db.prepare("INSERT INTO parent (id, name) VALUES (?, ?)")
    let insertChild = try side.db.prepare("INSERT INTO child (value, parent) VALUES (?, ?)")
    for p in 0..<parents {
        insertParent.bind(1, Int64(p + 1)); insertParent.bind(2, "p\(p)"); try insertParent.step(); insertParent.reset()
        for c in 0..<children { insertChild.bind(1, Int64(c)); insertChild.bind(2, Int64(p + 1)); try insertChild.step(); insertChild.reset() }
    }
    try side.db.exec("COMMIT")
    return side
}

func directoryBytes(_ path: String, prefix: String? = nil) -> Int {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return 0 }
    return names.filter { prefix.map($0.hasPrefix) ?? true }.reduce(0) { total, name in
        total + ((try? FileManager.default.attributesOfItem(atPath: path + "/" + name)[.size] as? Int) ?? 0)
    }
}

/// A counter shared by benchmark threads.
final class LockedCounter: @unchecked Sendable {
    // Every access holds `lock`.
    private let lock = NSLock()
    private var count = 0
    func add() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}
