import CairnInterchange
import CairnStorage
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
                    do { defaultValue = try RecordJSON.value(JSON(raw), type: type) } catch let error as CairnError {
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
