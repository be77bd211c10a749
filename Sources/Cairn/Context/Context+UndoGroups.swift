import CairnStorage

extension Context {
    /// Runs `body`, which may suspend, as one undo group named `name`: its changes undo
    /// together although each `await` in it ends a main-actor job, which would otherwise
    /// end an undo event (``UndoStack/groupsByEvent``). The group stays open across the
    /// suspensions, so what other jobs change in this context meanwhile joins it too.
    /// Runs on the caller's actor.
    public func undoGroup<T>(named name: String? = nil, isolation: isolated (any Actor)? = #isolation,
                             _ body: () async throws -> T) async rethrows -> T {
        undoManager.beginGrouping(named: name)
        defer { undoManager.endGrouping() }
        return try await body()
    }
}
