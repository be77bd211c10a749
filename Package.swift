// swift-tools-version: 6.0
// Cairn: an embedded object-persistence engine in pure Swift. No package dependencies.
//
// The targets follow the layers (DESIGN.md): a layer that calls upward does not compile.
// - CairnCollections: the tables every object and record passes through (IDMap, EntityMap,
//   ClassTable, Protected, RadixSort…), public and inlinable so that other targets
//   specialize them; not re-exported, so an app does not see them.
// - CairnStorage: IO, Format, Store and the schema. Records and bytes, no Swift classes.
// - Cairn: coordinator, contexts, fetches and the app conveniences; re-exports the
//   storage types an app names (Schema, CairnError, Value, StoreOptions…).
// - CairnInterchange: the NDJSON record format of `cairn export`, `import` and `query`,
//   and the terminal checks of the command-line tool; for the tool and the tests, not apps.
// - CairnTesting: the fault-injecting file system and the fuzz entry points, for this
//   package's tests and fuzz targets (apps test with `Container(entities:storage: .inMemory)`).
// - cairn: the command-line tool.
import PackageDescription

let package = Package(
    name: "Cairn",
    products: [
        .library(name: "Cairn", targets: ["Cairn"]),
        .executable(name: "cairn", targets: ["cairn"]),
    ],
    targets: [
        .target(name: "CairnCollections"),
        .target(name: "CairnStorage", dependencies: ["CairnCollections"]),
        .target(name: "Cairn", dependencies: ["CairnCollections", "CairnStorage"]),
        .target(name: "CairnInterchange", dependencies: ["CairnCollections", "CairnStorage"]),
        .target(name: "CairnTesting", dependencies: ["Cairn", "CairnCollections", "CairnInterchange", "CairnStorage"]),
        .executableTarget(name: "cairn", dependencies: ["Cairn", "CairnCollections", "CairnInterchange", "CairnStorage"]),
        .testTarget(name: "CairnTests", dependencies: ["Cairn", "CairnCollections", "CairnInterchange", "CairnStorage", "CairnTesting"]),
        // The writer the SIGKILL soak test kills (TESTING.md): a test helper, not part of `cairn`.
        .executableTarget(name: "cairn-soak-writer", dependencies: ["Cairn", "CairnStorage"], path: "Tests/SoakWriter"),
        // The example that ships the change feed to PostgreSQL through psql (Examples/PostgresSync).
        .executableTarget(name: "cairn-pg-sync", dependencies: ["Cairn"], path: "Examples/PostgresSync/Sources/cairn-pg-sync"),
    ],
    swiftLanguageModes: [.v6]
)
