import Cairn
import Foundation

/// Reader processes following a writer, for the workloads that run beside them
/// (`commit_single_4readers`, `insert_bulk_4readers`): each opens the store as a reader and
/// polls for new commits every millisecond while the writer works — a Cairn reader
/// advances, an SQLite reader reads the table's largest ID.
struct Followers {
    let processes: [Process]

    /// The workload a `…_4readers` name runs, and how many readers follow it.
    static func split(_ name: String) -> (workload: String, readers: Int)? {
        guard let range = name.range(of: "_4readers"), range.upperBound == name.endIndex else { return nil }
        return (String(name[..<range.lowerBound]), 4)
    }

    /// Starts `count` followers of the store at `path`, once each has opened it.
    static func start(_ count: Int, engine: Engine, path: String) throws -> Followers {
        var processes: [Process] = []
        for _ in 0..<count {
            let child = Process()
            child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
            child.arguments = ["--follower-child", engine.rawValue, path]
            let out = Pipe()
            child.standardOutput = out
            try child.run()
            processes.append(child)
            guard String(decoding: out.fileHandleForReading.availableData, as: UTF8.self).hasPrefix("ready") else {
                for process in processes { process.terminate() }
                throw BenchError("a follower of \(path) did not open it")
            }
        }
        return Followers(processes: processes)
    }

    func stop() {
        for process in processes { process.terminate() }
        for process in processes { process.waitUntilExit() }
    }
}

/// A follower process (see ``Followers``): polls the store every millisecond until killed.
func runFollowerChild(engine: Engine, path: String) throws -> Never {
    switch engine {
    case .cairn:
        var options = StoreOptions(compaction: .manual)
        options.readOnly = true
        let model = try Model(Row.self, Mixed.self, Parent.self, Child.self, Keyed.self)
        let reader = try Coordinator(path: path, schema: model.schema, options: options)
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        while true {
            _ = try reader.advance()
            Thread.sleep(forTimeInterval: 0.001)
        }
    case .sqlite:
        let db = try SQLiteDB(path: path + ".sqlite", synchronous: "NORMAL")
        let select = try db.prepare("SELECT max(id) FROM row")
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        while true {
            _ = try select.step()
            select.reset()
            Thread.sleep(forTimeInterval: 0.001)
        }
    }
}
