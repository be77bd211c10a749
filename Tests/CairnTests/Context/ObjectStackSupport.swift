import Foundation
@testable import Cairn
@testable import CairnStorage

final class Person: ManagedObject {
    @Attribute var username: String = ""
    @Attribute var name: String? = nil
    @Attribute var age: Int = 0
    @ToMany(inverse: "owner", deleteRule: .cascade) var dvds: [DVD]
    @ToMany(inverse: "borrower", deleteRule: .nullify) var borrowed: [DVD]

    override class var uniqueness: [[String]] { [["username"]] }
    override class var preservedInHistoryOnDeletion: Set<String> { ["username"] }

    override func validateForInsert() throws {
        if username.isEmpty { throw CairnError(.validation, "Person \(objectID.recordID): 'username' must not be empty") }
    }
}

final class DVD: ManagedObject {
    @Attribute var title: String = ""
    @Attribute var purchaseDate: Date? = nil
    @ToOne(inverse: "dvds", deleteRule: .nullify) var owner: Person?
    @ToOne(inverse: "borrowed", deleteRule: .noAction) var borrower: Person?
}

/// A shelf that refuses to be deleted while it holds boxes.
final class Shelf: ManagedObject {
    @Attribute var label: String = ""
    @ToMany(inverse: "shelf", deleteRule: .deny) var boxes: [Box]
}

final class Box: ManagedObject {
    @Attribute var size: Int16 = 0
    @Attribute var tags: Data = Data()
    @Archived var settings: BoxSettings = BoxSettings()
    @ToOne(inverse: "boxes") var shelf: Shelf?
}

struct BoxSettings: Codable, Equatable {
    var color = "red"
    var fragile = false
}

/// A store on an in-memory file system (or disk), its coordinator and a context.
struct Stack {
    let fs: any FileSystem
    let path: String
    let model: Model
    let coordinator: Coordinator

    static func model() throws -> Model { try Model(Person.self, DVD.self, Shelf.self, Box.self) }

    init(fs: any FileSystem = MemoryFileSystem(), path: String = "/db", model: Model? = nil) throws {
        self.fs = fs
        self.path = path
        self.model = try model ?? Stack.model()
        coordinator = try Coordinator(path: path, schema: self.model.schema, options: memoryOptions(fs))
    }

    func context() -> Context { Context(coordinator: coordinator, model: model) }

    /// Closes and opens the store again (same file system).
    func reopened() throws -> Stack {
        try coordinator.close()
        return try Stack(fs: fs, path: path, model: model)
    }
}
