import Foundation

/// How many threads work that splits over the cores uses (a scan in parts, a checksum in
/// parts): the active processors, at most 8.
package enum Processors {
    package static let count = min(8, max(1, ProcessInfo.processInfo.activeProcessorCount))
}
