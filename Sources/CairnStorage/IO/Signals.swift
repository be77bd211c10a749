#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The signals that end a command (`SIGINT`, `SIGTERM`, `SIGHUP`), unblocked for this
/// thread and the threads it starts: a process started from a thread that blocks them
/// (a Dispatch worker's, as Foundation's `Process` may spawn from) inherits that mask,
/// and a `--follow` command would then outlive every attempt to interrupt it.
package func unblockTerminationSignals() {
    var set = sigset_t()
    sigemptyset(&set)
    for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&set, signal) }
    pthread_sigmask(SIG_UNBLOCK, &set, nil)
}
