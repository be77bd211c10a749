// swift-tools-version: 6.0
// Cairn: an embedded object-persistence engine in pure Swift. No package dependencies.
//
// The targets follow the layers (DESIGN.md): a layer that calls upward does not compile.
// - CairnStorage: IO, Format, Store and the schema. Records and bytes, no Swift classes.
// - Cairn: coordinator, contexts, fetches and the app conveniences; re-exports the
//   storage types an app names (Schema, CairnError, Value, StoreOptions…).
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
        .target(name: "CairnStorage"),
        .target(name: "Cairn", dependencies: ["CairnStorage"]),
        .target(name: "CairnTesting", dependencies: ["Cairn", "CairnStorage"]),
        .executableTarget(name: "cairn", dependencies: ["Cairn", "CairnStorage"]),
        .testTarget(name: "CairnTests", dependencies: ["Cairn", "CairnStorage", "CairnTesting"]),
        // The writer the SIGKILL soak test kills (TESTING.md): a test helper, not part of `cairn`.
        .executableTarget(name: "cairn-soak-writer", dependencies: ["Cairn", "CairnStorage"], path: "Tests/SoakWriter"),
    ],
    swiftLanguageModes: [.v6]
)
