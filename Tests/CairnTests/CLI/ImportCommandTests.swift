import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// `cairn import`: NDJSON in batches cut where every reference is whole.
@Suite struct ImportCommandTests {
    /// Lines are numbered as the file's, across blank lines (spaces, a lone carriage
    /// return) and CRLF endings; a line that is not JSON stops the import there, and the
    /// batch it would have ended is not committed.
    @Test func importCountsLinesAcrossBlankLinesAndCRLF() throws {
        let (dir, _) = try CLIFixture.workspace()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = dir + "/s"
        _ = try CLI.run(["create", store, "--schema", dir + "/schema.json"])
        let text = [#"{"entity": "Person", "id": "a", "username": "ann", "dvds": ["d"]}"#, "", "   \t",
                    #"{"entity": "DVD", "id": "d", "title": "T\u00e9 \"q\"", "owner": "a"}"#, "\r",
                    #"{"entity": "Person", "username": "bo"}"#, #"{"entity": "Person", "username": "x"#,
                    #"{"entity": "Person", "username": "never"}"#].joined(separator: "\r\n")
        try text.write(toFile: dir + "/crlf.ndjson", atomically: true, encoding: .utf8)
        let result = try CLI.run(["import", store, "--in", dir + "/crlf.ndjson", "--batch", "2"])
        #expect(result.status == 1)
        #expect(result.err.contains("line 7: invalid JSON"), "\(result.err)")
        #expect(result.out.contains("committed 2") && !result.out.contains("committed 3"), "\(result.out)")
        #expect(try CLI.run(["query", store, "Person", "--count"]).out == "1\n")
        let dvd = try CLI.run(["query", store, "DVD"]).out
        #expect(dvd.contains(#""title": "Té \"q\"""#), "\(dvd)")
    }

    /// A line whose values the store cannot hold exactly as written is refused, naming
    /// the line and why, never stored as something near it: an integer one past Int64's
    /// range, a date past Double's, a string that is not UTF-8, an ID whose serial would
    /// leave later inserts no serial. The lines before it are imported, and the store
    /// takes new records after it.
    @Test func linesThatCannotBeStoredExactlyAreRefused() throws {
        let cases: [([UInt8], String)] = [
            (Array(#"{"entity": "Person", "username": "z", "age": -9223372036854775809}"#.utf8), "Person.age: expected a whole number in Int64 range"),
            (Array(#"{"entity": "DVD", "title": "t", "purchaseDate": 1e400}"#.utf8), "DVD.purchaseDate: expected an ISO 8601 date"),
            (Array(#"{"entity": "Person", "username": "z"#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8), "a string that is not valid UTF-8"),
            (Array(#"{"entity": "Person", "id": "E1-281474976710655", "username": "z"}"#.utf8), "id E1-281474976710655 has serial 281474976710655"),
        ]
        for (line, reason) in cases {
            let (dir, store, file) = try CLIFixture.storeAndFile([])
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let text = Array(#"{"entity": "Person", "username": "first"}"#.utf8) + [0x0A] + line + [0x0A]
                + Array(#"{"entity": "Person", "username": "never"}"#.utf8)
            try Data(text).write(to: URL(fileURLWithPath: file))
            let result = try CLI.run(["import", store, "--in", file, "--batch", "1"])
            #expect(result.status == 1)
            #expect(result.err.contains("line 2: ") && result.err.contains(reason), "\(result.err)")
            #expect(try CLI.run(["query", store, "Person", "--count"]).out == "1\n")
            #expect(try CLI.run(["export", store]).out.contains("\u{FFFD}") == false)
            try #"{"entity": "Person", "username": "after"}"#.write(toFile: file, atomically: true, encoding: .utf8)
            #expect(try CLI.run(["compact", store]).status == 0)
            let after = try CLI.run(["import", store, "--in", file])
            #expect(after.status == 0, "\(after.err)")
            #expect(try CLI.run(["query", store, "Person", "--count"]).out == "2\n")
        }
    }

    @Test func badLinesStopTheImportAfterEarlierBatches() throws {
        let (dir, data) = try CLIFixture.workspace()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = dir + "/s"
        _ = try CLI.run(["create", store, "--schema", dir + "/schema.json"])
        var lines = try String(contentsOfFile: data, encoding: .utf8).split(separator: "\n").map(String.init)
        lines.insert(#"{"entity": "Person", "username": "x", "age": "old"}"#, at: 9)
        try lines.joined(separator: "\n").write(toFile: dir + "/bad.ndjson", atomically: true, encoding: .utf8)
        let result = try CLI.run(["import", store, "--in", dir + "/bad.ndjson", "--batch", "3"])
        #expect(result.status == 1)
        #expect(result.err.contains("line 10: Person.age: expected a whole number"), "\(result.err)")
        #expect(result.out.contains("committed 9"))
        #expect(try CLI.run(["query", store, "Person", "--count"]).out == "3\n")
    }

    /// An import killed at a random moment: the store verifies and holds at least every
    /// batch the import reported committed.
    @Test func importKilledMidwayKeepsCommittedBatches() throws {
        let (dir, data) = try CLIFixture.workspace(people: 300)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for round in 0..<3 {
            let store = dir + "/s\(round)"
            _ = try CLI.run(["create", store, "--schema", dir + "/schema.json"])
            let process = Process()
            process.executableURL = CLI.binary
            process.arguments = ["import", store, "--in", data, "--batch", "30"]
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            var reported = 0
            var buffer = ""
            let wanted = 2 + round * 3
            while reported < wanted {
                let chunk = out.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                buffer += String(decoding: chunk, as: UTF8.self)
                reported = buffer.split(separator: "\n").compactMap { $0.hasPrefix("committed ") ? Int($0.dropFirst(10)) : nil }.max() ?? 0
                if buffer.split(separator: "\n").filter({ $0.hasPrefix("committed") }).count >= wanted { break }
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let opened = try Store.open(at: store)
            let total = opened.schema.entities.reduce(0) { $0 + opened.count(entity: $1.number) }
            #expect(total >= reported, "round \(round): \(total) records, \(reported) reported")
            try opened.close()
            // Batches are cut only where every reference is satisfied: whatever landed
            // verifies clean, references and inverses included.
            let verify = try CLI.run(["verify", store])
            #expect(verify.status == 0, "\(verify.out)\(verify.err)")
        }
    }

    /// Repeated unique usernames are refused, naming both lines; nothing that violates
    /// uniqueness is committed, and the store verifies.
    @Test func importRefusesRepeatedUniqueValues() throws {
        var lines = (0..<30).map { #"{"entity": "Person", "username": "user\#($0)"}"# }
        lines.append(#"{"entity": "Person", "username": "user7"}"#)
        let (dir, store, file) = try CLIFixture.storeAndFile(lines)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try CLI.run(["import", store, "--in", file, "--batch", "10"])
        #expect(result.status == 1)
        #expect(result.err.contains("line 31") && result.err.contains("line 8") && result.err.contains("user7"), "\(result.err)")
        #expect(try CLI.run(["query", store, "Person", "--count"]).out == "30\n")
        #expect(try CLI.run(["verify", store]).status == 0)
        // A username the store already holds is refused too (the save's check).
        try #"{"entity": "Person", "username": "user3"}"#.write(toFile: file, atomically: true, encoding: .utf8)
        let again = try CLI.run(["import", store, "--in", file])
        #expect(again.status == 1 && again.err.contains("uniqueness"), "\(again.err)")
        #expect(try CLI.run(["query", store, "Person", "--count"]).out == "30\n")
    }

    /// A reference to a line that fails later is never committed: the batch stays open
    /// until the referenced line, and is dropped when it fails.
    @Test func importNeverCommitsAReferenceWithoutItsTarget() throws {
        var lines = [#"{"entity": "Person", "id": "p", "username": "ann", "dvds": ["late"]}"#]
        lines += (0..<10).map { #"{"entity": "DVD", "title": "filler \#($0)"}"# }
        lines.append(#"{"entity": "DVD", "id": "late", "title": 42}"#)  // not a string: fails
        let (dir, store, file) = try CLIFixture.storeAndFile(lines)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try CLI.run(["import", store, "--in", file, "--batch", "2"])
        #expect(result.status == 1 && result.err.contains("line 12"), "\(result.err)")
        #expect(!result.out.contains("committed"), "no batch could end before line 12: \(result.out)")
        #expect(try CLI.run(["query", store, "Person", "--count"]).out == "0\n")
        #expect(try CLI.run(["verify", store]).status == 0)
    }

    /// A line that names one side of a relationship sets the other: both agree, and the
    /// store verifies.
    @Test func importSetsBothSidesOfARelationship() throws {
        let lines = [#"{"entity": "Person", "id": "p", "username": "ann", "dvds": ["d1", "d2"]}"#,
                     #"{"entity": "DVD", "id": "d1", "title": "One"}"#,
                     #"{"entity": "DVD", "id": "d2", "title": "Two"}"#,
                     #"{"entity": "DVD", "id": "d3", "title": "Three", "owner": "q"}"#,
                     #"{"entity": "Person", "id": "q", "username": "bo"}"#]
        let (dir, store, file) = try CLIFixture.storeAndFile(lines)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try CLI.run(["import", store, "--in", file])
        #expect(result.status == 0, "\(result.err)")
        let verify = try CLI.run(["verify", store])
        #expect(verify.status == 0, "\(verify.out)")
        #expect(try CLI.run(["query", store, "DVD", "owner.username == 'ann'", "--count"]).out == "2\n")
        let bo = try CLI.run(["query", store, "Person", "username == 'bo'"]).out
        #expect(bo.contains(#""dvds": ["E"#), "\(bo)")
    }

    /// --upsert updates the record whose unique values a line repeats (in the store or
    /// earlier in the file) with the members the line names.
    @Test func importUpsertsByAUniquenessConstraint() throws {
        let (dir, store, file) = try CLIFixture.storeAndFile([#"{"entity": "Person", "username": "ann", "name": "Ann", "age": 1}"#,
                                                   #"{"entity": "Person", "username": "bo", "age": 2}"#])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try CLI.run(["import", store, "--in", file]).status == 0)
        try [#"{"entity": "Person", "username": "ann", "age": 5}"#,
             #"{"entity": "Person", "username": "cy", "age": 3}"#,
             #"{"entity": "Person", "username": "cy", "age": 4}"#].joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let refused = try CLI.run(["import", store, "--in", file])
        #expect(refused.status == 1)
        let result = try CLI.run(["import", store, "--in", file, "--upsert"])
        #expect(result.status == 0, "\(result.err)")
        #expect(try CLI.run(["query", store, "Person", "--count"]).out == "3\n")
        let ann = try CLI.run(["query", store, "Person", "username == 'ann'"]).out
        #expect(ann.contains(#""age": 5"#) && ann.contains(#""name": "Ann""#), "\(ann)")
        #expect(try CLI.run(["query", store, "Person", "username == 'cy'"]).out.contains(#""age": 4"#))
        #expect(try CLI.run(["verify", store]).status == 0)
    }

    /// --atomic: one transaction; a failure on the last line imports nothing.
    @Test func anAtomicImportIsAllOrNothing() throws {
        var lines = (0..<20).map { #"{"entity": "Person", "username": "u\#($0)"}"# }
        lines.append(#"{"entity": "Person"}"#)  // no username: required
        let (dir, store, file) = try CLIFixture.storeAndFile(lines)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try CLI.run(["import", store, "--in", file, "--atomic", "--batch", "3"])
        #expect(result.status == 1 && result.err.contains("line 21") && result.err.contains("required"), "\(result.err)")
        #expect(try CLI.run(["query", store, "Person", "--count"]).out == "0\n")
        lines.removeLast()
        try lines.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try CLI.run(["import", store, "--in", file, "--atomic"]).status == 0)
        #expect(try CLI.run(["history", store]).out.split(separator: "\n").count == 1)
    }

    /// Labels written as record IDs (an export's): kept when the store never used them,
    /// each serial once; a repeated one stops the import at its second line, as a repeated
    /// text label does; references to them resolve forwards and backwards.
    @Test func recordIDLabelsAreKeptOnceAndRepeatsStop() throws {
        let (dir, store, file) = try CLIFixture.storeAndFile([
            #"{"entity": "Person", "id": "E1-40", "username": "a", "dvds": ["E2-41"]}"#,
            #"{"entity": "DVD", "id": "E2-41", "title": "T", "owner": "E1-40"}"#,
            #"{"entity": "DVD", "id": "E2-40", "title": "same serial as a person"}"#,
            #"{"entity": "Person", "id": "E2-42", "username": "b"}"#,
            #"{"entity": "Person", "id": "E1-43", "username": "c", "dvds": ["E2-42"]}"#,
        ])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try CLI.run(["import", store, "--in", file, "--batch", "1"])
        #expect(result.status == 1)
        // "E2-42" labels a Person, so it is a text label; line 5 names it as a DVD.
        #expect(result.err.contains("line 5: Person.dvds: E2-42 (line 4) is a Person, not a DVD"), "\(result.err)")
        let people = try CLI.run(["export", store, "--entity", "Person"]).out
        let dvds = try CLI.run(["export", store, "--entity", "DVD"]).out
        #expect(people.contains(#""id": "E1-40""#) && people.contains(#""dvds": ["E2-41"]"#), "\(people)")
        #expect(dvds.contains(#""id": "E2-41""#) && dvds.contains(#""owner": "E1-40""#), "\(dvds)")
        #expect(!dvds.contains(#""id": "E2-40""#), "serial 40 was kept by line 1: \(dvds)")
        #expect(dvds.contains("same serial as a person"))

        let (dir2, store2, file2) = try CLIFixture.storeAndFile([
            #"{"entity": "Person", "id": "E1-7", "username": "a"}"#,
            #"{"entity": "Person", "id": "x", "username": "b"}"#,
            #"{"entity": "Person", "id": "E1-7", "username": "c"}"#,
            #"{"entity": "Person", "username": "d"}"#,
        ])
        defer { try? FileManager.default.removeItem(atPath: dir2) }
        let repeated = try CLI.run(["import", store2, "--in", file2, "--batch", "1"])
        #expect(repeated.status == 1)
        #expect(repeated.err.contains("line 3: id E1-7 is also the id of line 1"), "\(repeated.err)")
        #expect(try CLI.run(["query", store2, "Person", "--count"]).out == "2\n")

        // The same file again into the first store: its IDs are taken, so they are labels only.
        try [#"{"entity": "DVD", "id": "E2-41", "title": "U", "owner": "E1-40"}"#,
             #"{"entity": "Person", "id": "E1-40", "username": "z"}"#].joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let again = try CLI.run(["import", store, "--in", file])
        #expect(again.status == 0, "\(again.err)")
        let owners = try CLI.run(["query", store, "DVD", "owner.username == 'z'"]).out
        #expect(owners.contains(#""title": "U""#), "the DVD points at the file's E1-40, a new record: \(owners)")
    }
}

/// What one value costs `cairn import` in memory.
@Suite struct ImportMemoryTests {
    /// Runs `cairn` with `arguments` and returns its exit status and peak resident set in
    /// bytes, its `VmHWM` read every millisecond until it exits (Linux). (Not `wait4`'s:
    /// a child spawned by this process starts from this process's memory, whose high-water
    /// mark the kernel counts as the child's.)
    static func peakResidentSet(_ arguments: [String]) throws -> (status: Int32, bytes: Int)? {
        #if os(Linux)
        let argv = ([CLI.binary.path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        var actions: posix_spawn_file_actions_t = .init()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        guard posix_spawn(&pid, CLI.binary.path, &actions, nil, argv, environ) == 0 else {
            throw CairnError(.io, "could not start \(CLI.binary.path)")
        }
        var status: Int32 = 0, peak = 0
        while true {
            if let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
               let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
               let kilobytes = Int(line.dropFirst(6).trimmingCharacters(in: .whitespaces).dropLast(3)) {
                peak = max(peak, kilobytes * 1024)
            }
            let done = waitpid(pid, &status, WNOHANG)
            if done == pid || (done < 0 && errno != EINTR) { break }
            usleep(1_000)
        }
        return ((status >> 8) & 0xFF, peak)
        #else
        return nil
        #endif
    }

    /// One string of 64 MB: the import's peak resident set stays within four times the
    /// value (the object's string, its encoded body, the copy the store holds; the input
    /// file is let go of once read), where it was six. (A value of a uniqueness group
    /// costs its size once more: the import keeps each line's key to find repeats.)
    @Test func aLargeValueCostsASmallMultipleOfItsSize() throws {
        let size = 64 << 20
        let (dir, store, file) = try CLIFixture.storeAndFile([])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var line = Array(#"{"entity": "Person", "username": "ann", "name": ""#.utf8)
        line += [UInt8](repeating: UInt8(ascii: "x"), count: size)
        line += Array(#""}"#.utf8)
        try Data(line).write(to: URL(fileURLWithPath: file))
        guard let (status, peak) = try Self.peakResidentSet(["import", store, "--in", file]) else { return }
        #expect(status == 0)
        print("import of one value of \(size >> 20) MiB: peak resident set \(peak >> 20) MiB")
        #expect(peak < 4 * size, "peak resident set \(peak >> 20) MiB for a value of \(size >> 20) MiB")
        let stats = try CLI.run(["verify", store])
        #expect(stats.status == 0, "\(stats.out)\(stats.err)")
    }
}
