/// Binary encoding of a ``Schema`` (FORMAT.md §3 "Schema"):
///
/// ```
/// u32 schema version (the app's), u64 version hash, varint entity count
/// entity:       string name, u16 number, string renaming identifier ("" = none),
///               varint attribute count, attributes,
///               varint relationship count, relationships,
///               varint uniqueness-group count, groups, varint index-group count, groups
/// attribute:    string name, u8 type, u8 flags (1 optional, 2 indexed, 4 has default),
///               [value default], string renaming identifier
/// relationship: string name, string destination, string inverse ("" = none),
///               u8 flags (1 to-many, 2 optional), u8 delete rule, string renaming identifier
/// group:        varint name count, strings
/// ```
/// Strings are varint length + UTF-8. The stored hash must equal the hash of what is read.
package enum SchemaCoding {
    package static func encode(_ schema: Schema) -> [UInt8] {
        var writer = ByteWriter()
        writer.u32(schema.version)
        writer.u64(schema.versionHash)
        encodeEntities(schema.entities, into: &writer, forHash: false)
        return writer.bytes
    }

    static func encodeEntities(_ entities: [EntityDescription], into writer: inout ByteWriter, forHash: Bool) {
        func renaming(_ value: String?) { writer.string(forHash ? "" : value ?? "") }
        func groups(_ groups: [[String]]) {
            writer.varint(UInt64(groups.count))
            for group in groups {
                writer.varint(UInt64(group.count))
                for name in group { writer.string(name) }
            }
        }
        writer.varint(UInt64(entities.count))
        // The hash is of the entities in number order, so the order they are listed in does not matter.
        for entity in forHash ? entities.sorted(by: { $0.number < $1.number }) : entities {
            writer.string(entity.name)
            writer.u16(entity.number)
            renaming(entity.renamingIdentifier)
            writer.varint(UInt64(entity.attributes.count))
            for attribute in entity.attributes {
                writer.string(attribute.name)
                writer.u8(attribute.type.rawValue)
                var flags: UInt8 = 0
                if attribute.isOptional { flags |= 1 }
                if attribute.isIndexed { flags |= 2 }
                if attribute.defaultValue != nil { flags |= 4 }
                writer.u8(flags)
                if let value = attribute.defaultValue { writer.value(value) }
                renaming(attribute.renamingIdentifier)
            }
            writer.varint(UInt64(entity.relationships.count))
            for relationship in entity.relationships {
                writer.string(relationship.name)
                writer.string(relationship.destination)
                writer.string(relationship.inverse ?? "")
                writer.u8((relationship.isToMany ? 1 : 0) | (relationship.isOptional ? 2 : 0))
                writer.u8(relationship.deleteRule.rawValue)
                renaming(relationship.renamingIdentifier)
            }
            groups(entity.uniqueness)
            groups(entity.indexes)
        }
    }

    /// Decodes and checks a schema: bounds, enumerations, the stored hash, and ``Schema/validate()``.
    package static func decode(_ bytes: UnsafeRawBufferPointer, base: Int = 0) throws -> Schema {
        var reader = ByteReader(bytes, base: base)
        let version = try reader.u32("schema version")
        let storedHash = try reader.u64("schema hash")
        func name(_ what: String) throws -> String { try reader.string(what, maximum: FormatLimits.maxNameBytes) }
        func optionalName(_ what: String) throws -> String? {
            let text = try name(what)
            return text.isEmpty ? nil : text
        }
        func groups() throws -> [[String]] {
            let count = try reader.count("group count", maximum: FormatLimits.maxProperties)
            var result: [[String]] = []
            for _ in 0..<count {
                let size = try reader.count("group size", maximum: FormatLimits.maxProperties)
                var group: [String] = []
                for _ in 0..<size { group.append(try name("group member")) }
                result.append(group)
            }
            return result
        }
        let entityCount = try reader.count("entity count", maximum: FormatLimits.maxEntities, minimumItemSize: 6)
        var entities: [EntityDescription] = []
        for _ in 0..<entityCount {
            var entity = EntityDescription(name: try name("entity name"), number: try reader.u16("entity number"))
            entity.renamingIdentifier = try optionalName("entity renaming identifier")
            let attributeCount = try reader.count("attribute count", maximum: FormatLimits.maxProperties, minimumItemSize: 4)
            for _ in 0..<attributeCount {
                let attributeName = try name("attribute name")
                let typeOffset = reader.position
                let rawType = try reader.u8("attribute type")
                guard let type = AttributeType(rawValue: rawType) else {
                    throw reader.failure("unknown attribute type \(rawType)", at: typeOffset)
                }
                let flags = try reader.u8("attribute flags")
                guard flags & ~7 == 0 else { throw reader.failure("unknown attribute flags \(flags)", at: typeOffset + 1) }
                let defaultValue = flags & 4 != 0 ? try reader.value() : nil
                entity.attributes.append(AttributeDescription(
                    name: attributeName, type: type, isOptional: flags & 1 != 0, defaultValue: defaultValue,
                    isIndexed: flags & 2 != 0, renamingIdentifier: try optionalName("attribute renaming identifier")))
            }
            let relationshipCount = try reader.count("relationship count", maximum: FormatLimits.maxProperties, minimumItemSize: 6)
            for _ in 0..<relationshipCount {
                let relationshipName = try name("relationship name")
                let destination = try name("relationship destination")
                let inverse = try optionalName("relationship inverse")
                let flagsOffset = reader.position
                let flags = try reader.u8("relationship flags")
                guard flags & ~3 == 0 else { throw reader.failure("unknown relationship flags \(flags)", at: flagsOffset) }
                let rawRule = try reader.u8("delete rule")
                guard let rule = DeleteRule(rawValue: rawRule) else {
                    throw reader.failure("unknown delete rule \(rawRule)", at: flagsOffset + 1)
                }
                entity.relationships.append(RelationshipDescription(
                    name: relationshipName, destination: destination, isToMany: flags & 1 != 0, inverse: inverse,
                    deleteRule: rule, isOptional: flags & 2 != 0,
                    renamingIdentifier: try optionalName("relationship renaming identifier")))
            }
            entity.uniqueness = try groups()
            entity.indexes = try groups()
            entities.append(entity)
        }
        guard reader.isAtEnd else { throw reader.failure("\(reader.remaining) unexpected bytes after the schema") }
        let schema = Schema(version: version, entities: entities)
        guard schema.versionHash == storedHash else {
            throw CairnError.corrupt("schema hash does not match its contents", offset: base + 4)
        }
        do { try schema.validate() } catch let error as CairnError {
            throw CairnError.corrupt("stored schema is inconsistent: \(error.message)", offset: base)
        }
        return schema
    }
}
