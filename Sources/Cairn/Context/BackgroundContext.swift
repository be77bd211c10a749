import CairnStorage
/// A context with its own serial executor: work on it through `perform`.
///
/// ```swift
/// let background = container.newBackgroundContext()
/// let id = try await background.perform { context in
///     let person = Person(context: context)
///     person.username = "bo"
///     try context.save()
///     return person.objectID
/// }
/// ```
/// Objects stay inside `perform`; return IDs or plain values. Other contexts' saves are
/// merged on this actor as they happen, between `perform`s (see
/// ``Context/automaticallyMergesChangesFromParent``).
public actor BackgroundContext {
    private let context: Context

    /// A root context on `coordinator` for `model`'s entities, on its own serial executor, that
    /// resolves conflicts at save with `mergePolicy`. ``Container/newBackgroundContext(mergePolicy:)``
    /// makes one on a container's store.
    public init(coordinator: Coordinator, model: Model, mergePolicy: MergePolicy = .error) {
        let context = Context(coordinator: coordinator, model: model)
        context.mergePolicy = mergePolicy
        self.context = context
        context.mergeAutomatically(on: self)
    }

    /// Runs `body` with the context, on this actor. What it changes is one undo event.
    public func perform<T: Sendable>(_ body: @Sendable (Context) throws -> T) rethrows -> T {
        defer { context.undoManager.endEvent() }
        return try body(context)
    }
}
