import Foundation
import Testing

/// Every Swift block of every DocC article appears, as written, in
/// DocumentationExamples.swift, which compiles and runs it: an article cannot show code
/// that does not compile or does not do what it says.
@Suite struct DocumentationTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The lines of `text` trimmed, empty ones left out.
    static func normalized(_ text: some StringProtocol) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
    }

    /// The Swift blocks of a Markdown text.
    static func swiftBlocks(_ markdown: String) -> [String] {
        var blocks: [String] = [], current: [Substring]?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line.trimmingCharacters(in: .whitespaces) == "```swift" {
                current = []
            } else if current != nil, line.trimmingCharacters(in: .whitespaces) == "```" {
                blocks.append(current!.joined(separator: "\n"))
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    @Test func everyArticlesCodeIsCompiledAndRun() throws {
        let catalog = Self.root.appendingPathComponent("Sources/Cairn/Cairn.docc")
        let examples = try String(contentsOf: Self.root.appendingPathComponent("Tests/CairnTests/Docs/DocumentationExamples.swift"),
                                  encoding: .utf8)
        let compiled = "\n" + Self.normalized(examples).joined(separator: "\n") + "\n"
        let articles = try FileManager.default.contentsOfDirectory(atPath: catalog.path).filter { $0.hasSuffix(".md") }.sorted()
        #expect(articles.count >= 10, "the catalog's articles: \(articles)")
        var checked = 0
        for article in articles {
            let text = try String(contentsOf: catalog.appendingPathComponent(article), encoding: .utf8)
            for block in Self.swiftBlocks(text) {
                let lines = Self.normalized(block).joined(separator: "\n")
                #expect(compiled.contains("\n" + lines + "\n"), "\(article): a block not in DocumentationExamples.swift:\n\(block)")
                checked += 1
            }
        }
        #expect(checked >= 15)
        // The README's blocks too (its `import Cairn` line is the examples file's own).
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let readmeBlocks = Self.swiftBlocks(readme)
        #expect(readmeBlocks.count >= 2)
        for block in readmeBlocks {
            let lines = Self.normalized(block).filter { $0 != "import Cairn" }.joined(separator: "\n")
            #expect(compiled.contains("\n" + lines + "\n"), "README.md: a block not in DocumentationExamples.swift:\n\(block)")
        }
    }
}
