import CairnStorage
import Cairn
import Foundation

final class Person: ManagedObject {
    @Attribute var username: String = ""
    @Attribute var name: String? = nil
    @ToMany(inverse: \DVD.owner, deleteRule: .cascade) var dvds: [DVD]
    override class var uniqueKeyPaths: [[AnyKeyPath]] { [[\Person.username]] }
}

final class DVD: ManagedObject {
    @Attribute var title: String = ""
    @Attribute var purchaseDate: Date? = nil
    @ToOne var owner: Person?  // the inverse is declared once, on Person.dvds
}

struct TimeStamp: Codable, Sendable {
    var seconds: Double
    var label: String
}

/// `cairn demo`: a tour of the library, printed step by step.
@MainActor
enum Demo {
    static let help = """
        USAGE: cairn demo [--store DIR]

        Runs a tour of Cairn into a store directory: a Person ↔ DVD collection (insert,
        fetch by username, cascade delete, undo), a persistent queue of time stamps pushed,
        then popped across a reopen, and chained writes. Prints what it did and where the
        store is. DIR defaults to a fresh temporary directory.
        """

    static func run(storeDirectory: String?) async throws {
        let directory = storeDirectory ?? (NSTemporaryDirectory() + "cairn-demo-\(UUID().uuidString)")
        let url = URL(fileURLWithPath: directory)
        print("Cairn demo — store at \(url.path)")
        var container = try Container(name: "Demo", entities: [Person.self, DVD.self], storage: .onDisk(url))
        var data = DataService(container: container)

        print("\n1. A Person ↔ DVD collection")
        try await data.write { context in
            for (username, name, titles) in [("ann", "Ann Lee", ["Alien", "Brazil"]), ("bob", "Bob Ray", ["Casablanca"])] {
                let person = Person.create(in: context)
                person.username = username
                person.name = name
                for (offset, title) in titles.enumerated() {
                    let dvd = DVD.create(in: context)
                    dvd.title = title
                    dvd.purchaseDate = Date(timeIntervalSince1970: 1_600_000_000 + Double(offset) * 86_400)
                    dvd.owner = person
                }
            }
        }
        let main = data.mainContext
        print("   saved \(try Person.count(in: main)) people and \(try DVD.count(in: main)) DVDs")
        let ann = try Person.first(format: "username == %@", "ann", in: main)
        print("   fetched by username 'ann': \(ann?.name ?? "?") owns \(ann?.dvds.map(\.title).joined(separator: ", ") ?? "")")

        if let ann {
            main.delete(ann)
            print("   deleted ann (cascade): \(try DVD.count(in: main)) DVDs left")
            main.undo()
            print("   undo: ann is back with \(ann.dvds.count) DVDs; \(try DVD.count(in: main)) DVDs in all")
        }
        try await data.save()

        print("\n2. A persistent queue of time stamps")
        let queue = try container.queue(named: "stamps", of: TimeStamp.self)
        for label in ["first", "second", "third"] {
            try queue.push(TimeStamp(seconds: Date().timeIntervalSince1970, label: label))
        }
        print("   pushed \(try queue.count) stamps; closing and reopening the store")
        try await data.close()
        container = try Container(name: "Demo", entities: [Person.self, DVD.self], storage: .onDisk(url))
        data = DataService(container: container)
        let reopened = try container.queue(named: "stamps", of: TimeStamp.self)
        while let stamp = try reopened.popFirst() {
            print("   popped '\(stamp.label)' from \(Date(timeIntervalSince1970: stamp.seconds))")
        }

        print("\n3. Chained asynchronous writes")
        let finished: Int = await withCheckedContinuation { continuation in
            var done = 0
            data.writeAsync({ context in
                let person = Person.create(in: context)
                person.username = "cy"
            }, completion: { error in
                print("   first write: \(error.map { "failed: \($0)" } ?? "saved")")
                done += 1
            }).writeAsync({ context in
                let dvd = DVD.create(in: context)
                dvd.title = "Dune"
                dvd.owner = try Person.first(format: "username == 'cy'", in: context)
            }, completion: { error in
                print("   second write: \(error.map { "failed: \($0)" } ?? "saved")")
                done += 1
                continuation.resume(returning: done)
            })
        }
        let names = try Person.all(sortBy: [SortDescriptor(\Person.username)], in: data.mainContext)
            .map { "\($0.username) (\($0.dvds.map(\.title).joined(separator: ", ")))" }
        print("   \(finished) writes done; people now: \(names.joined(separator: "; "))")
        try await data.close()
        print("\nDone. The store is at \(url.path)")
    }
}
