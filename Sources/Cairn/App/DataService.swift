import CairnStorage
import Foundation
#if canImport(UIKit)
import UIKit
#endif

/// When the main context's changes are written to disk.
public enum AutosavePolicy: Sendable, Equatable {
    /// After every write (the default).
    case afterEachWrite
    /// Every `seconds`, if there are changes. A task on the main actor keeps the time, so
    /// it fires in any program whose main actor runs (an app, an async `main`, a server),
    /// with or without a run loop.
    case interval(TimeInterval)
    /// Only on ``DataService/save()`` and ``DataService/close()``.
    case manual
}

/// Reads and writes in the CQRS style of Skopelos: reads run on the main context, the
/// single source of truth; writes run in a fresh scratch child of it, are saved into it
/// synchronously, and the main context is then persisted without blocking the caller.
///
/// ```swift
/// let data = DataService(container: container)
/// data.writeSync { context in
///     let person = Person.create(in: context)
///     person.username = "ann"
/// }.read { context in
///     print(try Person.count(in: context))
/// }
/// try await data.write { context in try Person.deleteAll(in: context) }
/// ```
/// No singleton is needed; make as many as you like. Errors go to the completion of the
/// call that failed, and to ``errorHandler``.
@MainActor
public final class DataService {
    /// The container whose main context the service reads and writes.
    public let container: Container
    /// When the main context's changes are written to disk; a change takes effect at once.
    public var autosave: AutosavePolicy {
        didSet { scheduleTimer() }
    }
    /// Receives every error of a read or write (and of a background save). By default it
    /// prints the error.
    public var errorHandler: (CairnError) -> Void = { error in print("Cairn DataService error: \(error)") }
    private var autosaveTask: Task<Void, Never>?
    private var pendingPersist: Task<Void, Never>?
    private var lifecycleObservers: [NSObjectProtocol] = []

    /// A service over `container`'s main context. Where UIKit is available (not watchOS),
    /// it also saves the main context when the app resigns active, enters the background
    /// or terminates.
    public init(container: Container, autosave: AutosavePolicy = .afterEachWrite) {
        self.container = container
        self.autosave = autosave
        scheduleTimer()
        observeLifecycle()
    }

    /// The container's main context, where reads run and writes are saved.
    public var mainContext: Context { container.mainContext }

    // MARK: Reading

    /// Runs `body` on the main context.
    @discardableResult
    public func read(_ body: (Context) throws -> Void) -> Self {
        do { try body(mainContext) } catch { report(error) }
        return self
    }

    /// Runs `body` on the main context and returns its result.
    public func read<T>(_ body: (Context) throws -> T) throws -> T {
        try body(mainContext)
    }

    // MARK: Writing

    /// Runs `body` in a scratch child of the main context and saves it into the main
    /// context now; with ``AutosavePolicy/afterEachWrite``, saves the main context into the
    /// store now too, then makes it durable without blocking. The completion gets nil, or
    /// the error — of the body, a save, or the sync. A write is all or nothing: if any
    /// save fails, the main context is as it was before the write (the write taken back
    /// out of it), and the next write starts clean.
    ///
    /// When it returns, the write is in the main context, not yet on disk: a process that
    /// exits right after it loses the write. Before exiting, await ``save()`` or
    /// ``close()``, or use ``write(_:)``, which returns once the write is durable.
    @discardableResult
    public func writeSync(_ body: (Context) throws -> Void, completion: ((CairnError?) -> Void)? = nil) -> Self {
        do {
            try saveIntoMain(body, persisting: autosave == .afterEachWrite)
        } catch {
            let failure = Self.cairnError(error)
            report(failure)
            completion?(failure)
            return self
        }
        persistAfterWrite(completion)
        return self
    }

    /// Like ``writeSync(_:completion:)``, but `body` runs later, on the main actor's next turn.
    @discardableResult
    public func writeAsync(_ body: @escaping (Context) throws -> Void, completion: ((CairnError?) -> Void)? = nil) -> Self {
        Task { @MainActor in self.writeSync(body, completion: completion) }
        return self
    }

    /// Runs `body` in a scratch child of the main context, saves it into the main
    /// context, and waits until the main context is on disk.
    @discardableResult
    public func write<T>(_ body: (Context) throws -> T) async throws -> T {
        let result = try saveIntoMain(body, persisting: true)
        try await persist()
        return result
    }

    /// Runs `body` in a scratch child and saves it into the main context; with
    /// `persisting`, saves the main context too (its records reach the store; the disk
    /// follows), and if that save fails, takes the write back out of the main context, so
    /// that a write is all or nothing from end to end and the next one starts clean.
    @discardableResult
    private func saveIntoMain<T>(_ body: (Context) throws -> T, persisting: Bool) throws -> T {
        let scratch = Context(parent: mainContext)
        scratch.name = "scratch"
        let result = try body(scratch)
        guard persisting else {
            try scratch.save()
            return result
        }
        // The write is recorded as one undo group in the main context (undo turned on for
        // it if the app has it off), which is how it is taken back.
        let undo = mainContext.undoManager
        let wasEnabled = undo.isEnabled
        undo.isEnabled = true
        undo.beginGrouping(named: "write")
        do {
            try scratch.save()
        } catch {
            undo.endGrouping()
            undo.isEnabled = wasEnabled
            throw error
        }
        undo.endGrouping()
        defer {
            undo.isEnabled = wasEnabled
            if !wasEnabled { undo.removeAllActions() }
        }
        do {
            if mainContext.hasChanges { try mainContext.save(durability: .deferred) }
        } catch {
            mainContext.undo()
            undo.removeRedoActions()
            throw error
        }
        return result
    }

    /// After a write saved into the store (``saveIntoMain(_:persisting:)``): makes it
    /// durable without blocking, and tells `completion`.
    private func persistAfterWrite(_ completion: ((CairnError?) -> Void)?) {
        guard autosave == .afterEachWrite else {
            completion?(nil)
            return
        }
        let previous = pendingPersist
        pendingPersist = Task { @MainActor in
            await previous?.value
            do {
                try await self.persist()
                completion?(nil)
            } catch {
                let failure = Self.cairnError(error)
                self.report(failure)
                completion?(failure)
            }
        }
    }

    /// Saves the main context without waiting for the disk (deferred durability), then
    /// makes it durable off the main actor.
    private func persist() async throws {
        let context = mainContext
        if context.hasChanges {
            try context.save(durability: .deferred)
        }
        let coordinator = container.coordinator
        try await Task.detached { try coordinator.sync() }.value
    }

    /// Saves the main context and waits for the disk.
    public func save() async throws {
        await pendingPersist?.value
        try await persist()
    }

    /// Waits for writes in flight, saves the main context, and closes the container (its
    /// lock is released). In-flight changes are not lost: call it (or ``save()``) before a
    /// program exits, since ``writeSync(_:completion:)`` returns before its write is on disk.
    public func close() async throws {
        autosaveTask?.cancel()
        autosaveTask = nil
        try await save()
        for observer in lifecycleObservers { NotificationCenter.default.removeObserver(observer) }
        lifecycleObservers = []
        try container.close()
    }

    // MARK: Support

    private func report(_ error: Error) { errorHandler(Self.cairnError(error)) }

    static func cairnError(_ error: Error) -> CairnError {
        error as? CairnError ?? CairnError(.validation, "\(error)")
    }

    /// Starts the interval autosave, if the policy has one. (A `Timer` needed a run loop,
    /// which an async `main` on Linux, a server or a command-line tool does not run: it
    /// never fired there.)
    private func scheduleTimer() {
        autosaveTask?.cancel()
        autosaveTask = nil
        guard case .interval(let seconds) = autosave, seconds > 0 else { return }
        let nanoseconds = UInt64(min(seconds, 1e9) * 1e9)
        autosaveTask = Task { @MainActor [weak self] in
            while !Task.isCancelled {
                do { try await Task.sleep(nanoseconds: nanoseconds) } catch { return }
                guard let self else { return }
                guard self.mainContext.hasChanges else { continue }
                do { try await self.persist() } catch { self.report(error) }
            }
        }
    }

    private func observeLifecycle() {
        #if canImport(UIKit) && !os(watchOS)
        let names: [Notification.Name] = [UIApplication.willResignActiveNotification,
                                          UIApplication.didEnterBackgroundNotification,
                                          UIApplication.willTerminateNotification]
        for name in names {
            lifecycleObservers.append(NotificationCenter.default.addObserver(forName: name, object: nil, queue: .main) { [weak self] _ in
                MainActor.assumeIsolated {
                    guard let self, self.mainContext.hasChanges else { return }
                    do { try self.mainContext.save() } catch { self.report(error) }
                }
            })
        }
        #endif
    }
}
