import CSQLite
import Foundation

/// A thin wrapper over SQLite's C API: a connection and prepared statements.
final class SQLiteDB {
    let handle: OpaquePointer

    init(path: String, synchronous: String) throws {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK, let db else {
            throw BenchError("sqlite3_open failed for \(path)")
        }
        handle = db
        sqlite3_busy_timeout(db, 60_000)
        try exec("PRAGMA journal_mode=WAL")
        try exec("PRAGMA synchronous=\(synchronous)")
    }

    deinit { sqlite3_close_v2(handle) }

    func exec(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(handle, sql, nil, nil, &message) != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? "unknown"
            sqlite3_free(message)
            throw BenchError("sqlite: \(text) in \(sql)")
        }
    }

    func prepare(_ sql: String) throws -> Statement { try Statement(db: self, sql: sql) }

    final class Statement {
        let pointer: OpaquePointer
        init(db: SQLiteDB, sql: String) throws {
            var statement: OpaquePointer?
            guard sqlite3_prepare_v2(db.handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
                throw BenchError("sqlite prepare failed: \(String(cString: sqlite3_errmsg(db.handle))) in \(sql)")
            }
            pointer = statement
        }
        deinit { sqlite3_finalize(pointer) }

        func bind(_ index: Int32, _ value: Int64) { sqlite3_bind_int64(pointer, index, value) }
        func bind(_ index: Int32, _ value: Double) { sqlite3_bind_double(pointer, index, value) }
        func bind(_ index: Int32, _ value: String) {
            sqlite3_bind_text(pointer, index, value, -1, unsafeBitCast(-1, to: sqlite3_destructor_type.self))
        }
        func bind(_ index: Int32, _ value: [UInt8]) {
            _ = value.withUnsafeBytes { sqlite3_bind_blob(pointer, index, $0.baseAddress, Int32($0.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self)) }
        }

        @discardableResult
        func step() throws -> Bool {
            let code = sqlite3_step(pointer)
            if code == SQLITE_ROW { return true }
            if code == SQLITE_DONE { return false }
            throw BenchError("sqlite step failed: \(code)")
        }

        func reset() {
            sqlite3_reset(pointer)
            sqlite3_clear_bindings(pointer)
        }

        func int(_ column: Int32) -> Int64 { sqlite3_column_int64(pointer, column) }
        func double(_ column: Int32) -> Double { sqlite3_column_double(pointer, column) }
        func text(_ column: Int32) -> String { sqlite3_column_text(pointer, column).map { String(cString: $0) } ?? "" }
        func blobCount(_ column: Int32) -> Int { Int(sqlite3_column_bytes(pointer, column)) }
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
