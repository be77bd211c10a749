// swift-tools-version: 6.0
// Cairn: an embedded object-persistence engine in pure Swift. No package dependencies.
import PackageDescription

let package = Package(
    name: "Cairn",
    products: [
        .library(name: "Cairn", targets: ["Cairn"]),
        .executable(name: "cairn", targets: ["cairn"]),
    ],
    targets: [
        .target(name: "Cairn"),
        .executableTarget(name: "cairn", dependencies: ["Cairn"]),
        .testTarget(name: "CairnTests", dependencies: ["Cairn"]),
        // The writer the SIGKILL soak test kills (TESTING.md): a test helper, not part of `cairn`.
        .executableTarget(name: "cairn-soak-writer", dependencies: ["Cairn"], path: "Tests/SoakWriter"),
    ],
    swiftLanguageModes: [.v6]
)
