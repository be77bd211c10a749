#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether standard output (1) or standard error (2) is a terminal (`isatty(3)`), for
/// tools that show progress only to a person.
package func isTerminal(_ descriptor: Int32) -> Bool {
    isatty(descriptor) != 0
}
