import Cairn
import Foundation

/// The CLI's schema file (README "Schema files"): entities, attributes, relationships,
/// uniqueness, in JSON.
enum SchemaJSON {
    static let typeNames: [String: AttributeType] = [
        "bool": .bool, "int8": .int8, "int16": .int16, "int32": .int32, "int64": .int64, "float": .float,
        "double": .double, "string": .string, "binary": .binary, "date": .date, "uuid": .uuid, "url": .url,
        "decimal": .decimal, "archived": .archived,
    ]
    static let ruleNames: [String: DeleteRule] = ["nullify": .nullify, "cascade": .cascade, "deny": .deny, "noAction": .noAction]

    static func name(of type: AttributeType) -> String { typeNames.first { $0.value == type }!.key }
    static func name(of rule: DeleteRule) -> String { ruleNames.first { $0.value == rule }!.key }

    static func load(_ path: String) throws -> Schema {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CairnError(.notFound, "cannot read schema file \(path)")
        }
        let root: Any
        do { root = try JSONSerialization.jsonObject(with: data) } catch {
            throw CairnError(.invalidArgument, "\(path) is not valid JSON: \(error.localizedDescription)")
        }
        return try parse(root, source: path)
    }

    static func parse(_ root: Any, source: String) throws -> Schema {
        func fail(_ where_: String, _ message: String) -> CairnError {
            CairnError(.invalidArgument, "\(source): \(where_): \(message)")
        }
        guard let object = root as? [String: Any], let entities = object["entities"] as? [Any] else {
            throw fail("top level", "expected an object with an \"entities\" array")
        }
        let version = (object["version"] as? Int).map(UInt32.init(clamping:)) ?? 1
        var result: [EntityDescription] = []
        for (e, item) in entities.enumerated() {
            let at = "entities[\(e)]"
            guard let entity = item as? [String: Any], let name = entity["name"] as? String, !name.isEmpty else {
                throw fail(at, "expected an object with a \"name\"")
            }
            var description = EntityDescription(name: name, number: UInt16(clamping: e + 1))
            description.renamingIdentifier = entity["renamingIdentifier"] as? String
            for (a, raw) in ((entity["attributes"] as? [Any]) ?? []).enumerated() {
                let where_ = "\(at).attributes[\(a)]"
                guard let attribute = raw as? [String: Any], let attributeName = attribute["name"] as? String else {
                    throw fail(where_, "expected an object with a \"name\"")
                }
                guard let typeName = attribute["type"] as? String, let type = typeNames[typeName] else {
                    throw fail(where_, "unknown or missing type \(String(describing: attribute["type"] ?? "nil")) (use \(typeNames.keys.sorted().joined(separator: ", ")))")
                }
                var defaultValue: Value?
                if let raw = attribute["default"], !(raw is NSNull) {
                    do { defaultValue = try JSONValue.value(raw, type: type) } catch let error as CairnError {
                        throw fail(where_, "default: \(error.message)")
                    }
                }
                description.attributes.append(AttributeDescription(
                    name: attributeName, type: type, isOptional: attribute["optional"] as? Bool ?? false,
                    defaultValue: defaultValue, isIndexed: attribute["indexed"] as? Bool ?? false,
                    renamingIdentifier: attribute["renamingIdentifier"] as? String))
            }
            for (r, raw) in ((entity["relationships"] as? [Any]) ?? []).enumerated() {
                let where_ = "\(at).relationships[\(r)]"
                guard let relationship = raw as? [String: Any], let relationshipName = relationship["name"] as? String,
                      let destination = relationship["destination"] as? String else {
                    throw fail(where_, "expected an object with a \"name\" and a \"destination\"")
                }
                let ruleName = relationship["deleteRule"] as? String ?? "nullify"
                guard let rule = ruleNames[ruleName] else {
                    throw fail(where_, "unknown deleteRule '\(ruleName)' (use nullify, cascade, deny, noAction)")
                }
                description.relationships.append(RelationshipDescription(
                    name: relationshipName, destination: destination, isToMany: relationship["toMany"] as? Bool ?? false,
                    inverse: relationship["inverse"] as? String, deleteRule: rule,
                    isOptional: relationship["optional"] as? Bool ?? true,
                    renamingIdentifier: relationship["renamingIdentifier"] as? String))
            }
            description.uniqueness = (entity["uniqueness"] as? [[String]]) ?? []
            description.indexes = (entity["indexes"] as? [[String]]) ?? []
            result.append(description)
        }
        let schema = Schema(version: version, entities: result)
        do { try schema.validate() } catch let error as CairnError { throw fail("schema", error.message) }
        return schema
    }

    static func render(_ schema: Schema) -> String {
        let entities = schema.entities.sorted { $0.number < $1.number }.map { entity -> String in
            var pairs: [(String, String)] = [("name", JSONText.string(entity.name))]
            if let renaming = entity.renamingIdentifier { pairs.append(("renamingIdentifier", JSONText.string(renaming))) }
            pairs.append(("attributes", JSONText.array(entity.attributes.map { attribute in
                var fields: [(String, String)] = [("name", JSONText.string(attribute.name)), ("type", JSONText.string(name(of: attribute.type)))]
                if attribute.isOptional { fields.append(("optional", "true")) }
                if let value = attribute.defaultValue { fields.append(("default", JSONText.value(value))) }
                if attribute.isIndexed { fields.append(("indexed", "true")) }
                if let renaming = attribute.renamingIdentifier { fields.append(("renamingIdentifier", JSONText.string(renaming))) }
                return JSONText.object(fields)
            })))
            pairs.append(("relationships", JSONText.array(entity.relationships.map { relationship in
                var fields: [(String, String)] = [("name", JSONText.string(relationship.name)),
                                                  ("destination", JSONText.string(relationship.destination))]
                if relationship.isToMany { fields.append(("toMany", "true")) }
                if let inverse = relationship.inverse { fields.append(("inverse", JSONText.string(inverse))) }
                fields.append(("deleteRule", JSONText.string(name(of: relationship.deleteRule))))
                fields.append(("optional", relationship.isOptional ? "true" : "false"))
                if let renaming = relationship.renamingIdentifier { fields.append(("renamingIdentifier", JSONText.string(renaming))) }
                return JSONText.object(fields)
            })))
            if !entity.uniqueness.isEmpty { pairs.append(("uniqueness", JSONText.array(entity.uniqueness.map { JSONText.array($0.map(JSONText.string)) }))) }
            if !entity.indexes.isEmpty { pairs.append(("indexes", JSONText.array(entity.indexes.map { JSONText.array($0.map(JSONText.string)) }))) }
            return JSONText.object(pairs)
        }
        return JSONText.object([("version", String(schema.version)), ("entities", JSONText.array(entities))])
    }
}

/// JSON values (as JSONSerialization gives them) to store values, by attribute type.
enum JSONValue {
    static func value(_ raw: Any, type: AttributeType) throws -> Value {
        func bad(_ expected: String) -> CairnError {
            CairnError(.invalidArgument, "expected \(expected), found \(describe(raw))")
        }
        if raw is NSNull { return .null }
        switch type {
        case .bool:
            guard let number = raw as? NSNumber, isJSONBool(number) else { throw bad("true or false") }
            return .bool(number.boolValue)
        case .int8, .int16, .int32, .int64:
            guard let number = raw as? NSNumber, !isJSONBool(number), let whole = Int64(exactly: number.doubleValue) ?? (raw as? Int).map(Int64.init) else {
                throw bad("a whole number")
            }
            switch type {
            case .int8: guard let v = Int8(exactly: whole) else { throw bad("a number in Int8 range") }; return .int8(v)
            case .int16: guard let v = Int16(exactly: whole) else { throw bad("a number in Int16 range") }; return .int16(v)
            case .int32: guard let v = Int32(exactly: whole) else { throw bad("a number in Int32 range") }; return .int32(v)
            default: return .int64((raw as? Int).map(Int64.init) ?? whole)
            }
        case .float, .double:
            if let number = raw as? NSNumber, !isJSONBool(number) {
                return type == .float ? .float(number.floatValue) : .double(number.doubleValue)
            }
            if let text = raw as? String, let special = Double(text), !special.isFinite {
                return type == .float ? .float(Float(special)) : .double(special)
            }
            throw bad("a number")
        case .string:
            guard let text = raw as? String else { throw bad("a string") }
            return .string(text)
        case .binary, .archived:
            guard let text = raw as? String, let data = Data(base64Encoded: text) else { throw bad("base64 text") }
            return type == .binary ? .bytes(data) : .archived(data)
        case .date:
            guard let text = raw as? String, let date = try? JSONText.dateStyle.parse(text)
                    ?? Date.ISO8601FormatStyle().parse(text) else { throw bad("an ISO 8601 date") }
            return .date(date)
        case .uuid:
            guard let text = raw as? String, let uuid = UUID(uuidString: text) else { throw bad("a UUID") }
            return .uuid(uuid)
        case .url:
            guard let text = raw as? String, let url = URL(string: text) else { throw bad("a URL") }
            return .url(url)
        case .decimal:
            if let text = raw as? String, let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) { return .decimal(decimal) }
            if let number = raw as? NSNumber, !isJSONBool(number) { return .decimal(number.decimalValue) }
            throw bad("a decimal (as a string)")
        }
    }

    static func describe(_ raw: Any) -> String {
        if let text = raw as? String { return JSONText.string(text) }
        if let number = raw as? NSNumber { return isJSONBool(number) ? (number.boolValue ? "true" : "false") : "\(number)" }
        if raw is [Any] { return "an array" }
        if raw is [String: Any] { return "an object" }
        return "\(raw)"
    }

    /// Whether an NSNumber from JSONSerialization is a boolean.
    static func isBool(_ number: NSNumber) -> Bool { isJSONBool(number) }
}

/// JSONSerialization gives booleans as NSNumber; tell them from numbers.
func isJSONBool(_ number: NSNumber) -> Bool {
    String(cString: number.objCType) == "c" && (number == NSNumber(value: true) || number == NSNumber(value: false))
        || type(of: number) == type(of: NSNumber(value: true))
}
