import CairnStorage
import Cairn
import Foundation

enum RepairCommand: Command {
    static let name = "repair"
    static let help = """
        USAGE: cairn repair DIR

        For a store that refuses to open because of damage: keeps a copy of each damaged
        file (FILE.damaged), salvages every transaction before the damage and every
        snapshot record whose checksum holds, and says what was lost.
        """

    static func run(_ arguments: [String]) throws {
        let args = try Arguments(arguments, command: "repair", valued: [], switches: [])
        if args.flags.contains("--help") { return Console.out(help) }
        let directory = try args.positional(0, "the store directory")
        try args.noExtraPositionals(1)
        let report = try Store.repair(at: directory)
        for copy in report.keptCopies { Console.out("kept a copy of the damaged file: \(copy)") }
        for note in report.notes { Console.out(note) }
        Console.out("kept \(report.keptTransactions) log transactions")
        if report.salvagedRecords > 0 || report.damagedSnapshotRegions > 0 {
            Console.out("salvaged \(report.salvagedRecords) snapshot records; skipped \(report.damagedSnapshotRegions) damaged regions")
        }
        if report.droppedTransactions.isEmpty {
            Console.out("lost: no transaction known")
        } else {
            Console.out("lost: transactions \(report.droppedTransactions.map(String.init).joined(separator: ", ")) (after the damage)")
        }
        let store = try openStore(directory, command: "repair")
        let problems = store.verify()
        try store.close()
        Console.out(problems.isEmpty ? "the store opens and verifies" : "the store opens; verify finds \(problems.count) problem(s)")
    }
}
