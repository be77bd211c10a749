import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A contact whose search key and full name are derived from its other attributes.
final class Contact: ManagedObject {
    @Attribute var first: String = ""
    @Attribute var last: String = ""
    @Derived({ (contact: Contact) in contact.last.lowercased() }, indexed: true) var searchKey: String
    @Derived({ (contact: Contact) in "\(contact.first) \(contact.last)" }) var fullName: String
}

/// Derived attributes: stored, computed from the object's other properties, so a fetch can
/// filter and sort on them (Core Data's derived attributes).
@Suite struct DerivedTests {
    func stack() throws -> Stack { try Stack(model: Model(Contact.self)) }

    func contact(_ context: Context, _ first: String, _ last: String) -> Contact {
        let contact = Contact(context: context)
        contact.first = first
        contact.last = last
        return contact
    }

    @Test func theValueIsStoredAndIndexed() throws {
        let model = try Model(Contact.self)
        let entity = try #require(model.schema.entities.first { $0.name == "Contact" })
        #expect(entity.attributes.map(\.name) == ["first", "last", "searchKey", "fullName"])
        #expect(entity.attributes[2].isIndexed)
    }

    @Test func aFetchFiltersAndSortsOnItBeforeAndAfterTheSave() throws {
        let stack = try stack()
        let context = stack.context()
        _ = contact(context, "Ann", "Zeta")
        _ = contact(context, "Bo", "alpha")
        let pending = try context.fetch(FetchQuery(Contact.self, predicate: #Predicate { $0.searchKey == "zeta" }))
        #expect(pending.map(\.first) == ["Ann"], "an unsaved object is found by its derived value")
        try context.save()

        let other = stack.context()
        let sorted = try other.fetch(FetchQuery(Contact.self, sortBy: [SortDescriptor(\Contact.searchKey)]))
        #expect(sorted.map(\.fullName) == ["Bo alpha", "Ann Zeta"])
        let found = try other.fetch(FetchQuery(Contact.self, fetchPredicate: FetchPredicate(format: "searchKey == %@", "alpha")))
        #expect(found.map(\.first) == ["Bo"])
    }

    @Test func aChangeComputesItAgainAndUndoPutsItBack() throws {
        let context = try stack().context()
        let ann = contact(context, "Ann", "Zeta")
        try context.save()
        ann.last = "Young"
        #expect(ann.searchKey == "young" && ann.fullName == "Ann Young")
        #expect(try context.fetch(FetchQuery(Contact.self, predicate: #Predicate { $0.searchKey == "young" })).count == 1)
        context.undo()
        #expect(ann.searchKey == "zeta" && ann.fullName == "Ann Zeta")
        #expect(!context.hasChanges)
    }

    @Test func batchInsertAndUpdateComputeIt() throws {
        let stack = try stack()
        let context = stack.context()
        try context.batchInsert(Contact.self, from: [("Cy", "Moss"), ("Di", "Lake")]) { contact, name in
            contact.first = name.0
            contact.last = name.1
        }
        try context.batchUpdate(FetchQuery(Contact.self, predicate: #Predicate { $0.first == "Cy" })) { $0.last = "Pond" }
        let all = try stack.context().fetch(FetchQuery(Contact.self, sortBy: [SortDescriptor(\Contact.searchKey)]))
        #expect(all.map(\.searchKey) == ["lake", "pond"])
        #expect(all.map(\.fullName) == ["Di Lake", "Cy Pond"])
    }

    @Test func aValueSetByKeyIsComputedAgain() throws {
        let context = try stack().context()
        let ann = contact(context, "Ann", "Zeta")
        try ann.setValue(.string("wrong"), forKey: "searchKey")
        #expect(ann.searchKey == "zeta")
        try context.save()
        #expect(ann.searchKey == "zeta")
    }
}
