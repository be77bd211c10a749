// swift-tools-version: 6.0
// Cairn versus SQLite in one run. Its own package, so the library stays dependency-free.
// Needs the system SQLite: `apt-get install libsqlite3-dev` (Debian/Ubuntu); macOS has it.
import PackageDescription

let package = Package(
    name: "CairnBenchmarks",
    dependencies: [.package(name: "Cairn", path: "..")],
    targets: [
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        .executableTarget(name: "cairn-bench", dependencies: [.product(name: "Cairn", package: "Cairn"), "CSQLite"]),
    ],
    swiftLanguageModes: [.v6]
)
