import Foundation
import Testing
@testable import Cairn
@testable import CairnStorage

/// A sign-up form's object: its hook reports every field that is wrong, as Core Data's
/// `validateForInsert` collects each `validateValue(_:forKey:)` failure.
final class Signup: ManagedObject {
    @Attribute var email: String = ""
    @Attribute var age: Int = 0
    @Attribute var nickname: String? = nil

    override func validateForInsert() throws {
        var failures: [CairnError] = []
        if !email.contains("@") { failures.append(.invalid("email", "an email address needs an @")) }
        if age < 13 { failures.append(.invalid("age", "must be 13 or older")) }
        if !failures.isEmpty { throw CairnError.validationFailed(failures) }
    }
}

/// A failed save reports every failure at once, each naming its object and property
/// (`NSValidationMultipleErrorsError` with `NSDetailedErrorsKey`). It reported the first.
@Suite struct ValidationTests {
    @Test func aFailedSaveReportsEveryInvalidFieldOfEveryObject() throws {
        let stack = try Stack(model: try Model(Signup.self))
        let context = stack.context()
        let first = Signup(context: context)   // both fields wrong
        first.email = "ann"
        first.age = 9
        let second = Signup(context: context)  // one
        second.email = "bo@example.com"
        second.age = 12
        let third = Signup(context: context)   // none
        third.email = "cy@example.com"
        third.age = 30
        let error = try #require(throws: CairnError.self) { try context.save() }
        #expect(error.code == .validation)
        let marked = error.details.map { "\($0.objectID?.recordID.description ?? "?").\($0.key ?? "?")" }
        #expect(marked == ["\(first.recordID).email", "\(first.recordID).age", "\(second.recordID).age"], "\(error)")
        #expect(error.details.allSatisfy { $0.code == .validation && $0.objectID?.entityName == "Signup" })
        #expect(error.message.hasPrefix("3 validation failures"), "\(error.message)")
        #expect(try stack.context().count(Signup.self) == 0, "nothing was saved")

        // The form fixes what was marked; the next save stores all three.
        first.email = "ann@example.com"
        first.age = 14
        second.age = 13
        try context.save()
        #expect(try stack.context().count(Signup.self) == 3)
    }

    @Test func oneFailureIsThrownAsItselfAndListedInDetails() throws {
        let stack = try Stack(model: try Model(Signup.self))
        let context = stack.context()
        let signup = Signup(context: context)
        signup.email = "dee@example.com"
        signup.age = 5
        let error = try #require(throws: CairnError.self) { try context.save() }
        #expect(error.key == "age" && error.objectID == signup.objectID && error.message == "must be 13 or older")
        #expect(error.details == [error.withoutDetails])
    }

    /// Property checks the context makes (a required value missing, a required
    /// relationship empty) are reported together with the hooks' failures.
    @Test func requiredValuesAndHooksAreReportedTogether() throws {
        let stack = try Stack(model: try Model(Signup.self))
        let context = stack.context()
        let signup = Signup(context: context)
        signup["email"] = .null  // required: no value
        signup.age = 1
        let error = try #require(throws: CairnError.self) { try context.save() }
        let keys = error.details.map { $0.key ?? "?" }
        #expect(keys == ["email", "email", "age"], "\(error)")  // missing, then the hook's two
        #expect(error.details[0].message.contains("'email' is required"))
    }
}

extension CairnError {
    /// The error as one of a list (``details`` empty).
    var withoutDetails: CairnError {
        var copy = self
        copy.details = []
        return copy
    }
}
