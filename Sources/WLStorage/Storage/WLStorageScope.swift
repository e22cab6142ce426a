import Foundation

/// A name for where some keys live, bound to a store once by the program at start: declarations name the scope, and
/// the program, its tests and each environment choose the store.
///
/// ```swift
/// extension WLStorageScope {
///     static let settings = WLStorageScope("settings")
/// }
/// extension WLStorageKeys {
///     static let retries = WLStorageKey<Int>("retries", default: 3, scope: .settings)
/// }
///
/// // At start, before the first storage of a key of the scope is made:
/// try WLStorageScope.settings.bind(to: .suite("com.example.service"))
/// ```
///
/// ``bind(to:)`` is process-wide and may be repeated until the scope's first use; after it, another store is refused. A
/// storage made while the scope is unbound keeps its value in memory and reports
/// ``WLStorageError/Code/invalidConfiguration``. ``withBinding(to:_:)`` binds it for one task, for tests (see
/// <doc:GettingStarted>).
public struct WLStorageScope: Hashable, Sendable, CustomStringConvertible {
    /// The scope's name. Two scopes with the same name are the same scope.
    public let name: String

    /// A scope named `name`.
    public init(_ name: String) { self.name = name }

    /// `scope "name"`.
    public var description: String { "scope \"\(name)\"" }

    /// Binds the scope to `store`, process-wide: storages of its keys made from now on keep their values there.
    ///
    /// - Parameter store: Where the keys of the scope live.
    /// - Throws: ``WLStorageError`` with the code ``WLStorageError/Code/invalidConfiguration`` when the scope is in
    ///   use already (a storage of one of its keys was made) and `store`'s identity is not the bound store's.
    public func bind(to store: some WLStorageStore) throws(WLStorageError) {
        let identity = store.identity
        // The lock guards the table only: the store replaced is released after it.
        let (replaced, refusal) = Runtime.shared.scopeBindings.withLock {
            bindings -> ((any WLStorageStore)?, WLStorageError?) in
            var binding = bindings[name] ?? ScopeBinding()
            if binding.used {
                if binding.identity == identity { return (nil, nil) }
                let bound = binding.identity.map { "it is bound to \($0)" } ?? "it was used while not bound"
                let refusal = WLStorageError(
                    code: .invalidConfiguration,
                    message: "\(self) cannot be bound to \(identity): \(bound), and storages of its keys have been"
                        + " made; bind a scope once, before the first storage of its keys is made")
                return (nil, refusal)
            }
            let replaced = binding.store
            binding.store = store
            binding.identity = identity
            bindings[name] = binding
            return (replaced, nil)
        }
        _ = replaced
        if let refusal { throw refusal }
    }

    /// The store the scope is bound to (inside ``withBinding(to:_:)``, the closure's), or `nil`. Reading it is no use.
    public var store: (any WLStorageStore)? {
        TaskBindings.current.scopes[name]?.store ?? Runtime.shared.scopeBindings.withLock { $0[name]?.store }
    }

    /// Runs `body` with the scope bound to `store` for the storages made in `body` and its child tasks, for tests (see
    /// <doc:TestingWithStorages>).
    ///
    /// It takes precedence over ``bind(to:)`` and is no use of the scope; storages made elsewhere keep the process's
    /// store. Bindings nest; one-shot access goes through a storage of `store`, flushed after `body`.
    ///
    /// - Parameters:
    ///   - store: Where the keys of the scope live while `body` runs.
    ///   - body: The code whose storages use `store`.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public func withBinding<Result>(to store: some WLStorageStore, _ body: () throws -> Result) rethrows -> Result {
        try TaskBindings.$current.withValue(binding(to: store), operation: body)
    }

    /// ``withBinding(to:_:)`` for an async `body`, which runs on `isolation`, the caller's actor.
    public func withBinding<Result>(
        to store: some WLStorageStore, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> Result
    ) async rethrows -> Result {
        try await TaskBindings.$current.withValue(binding(to: store), operation: body, isolation: isolation)
    }

    private func binding(to store: any WLStorageStore) -> TaskBindings {
        var bindings = TaskBindings.current
        bindings.scopes[name] = TaskBinding(store)
        return bindings
    }

    /// The store for a storage made now: the task's, the bound one, or a refusing one (marks the scope used).
    func storeForUse() -> any WLStorageStore {
        if let binding = TaskBindings.current.scopes[name] { return binding.store }
        let bound = Runtime.shared.scopeBindings.withLock { bindings in
            bindings[name, default: ScopeBinding()].used = true
            return bindings[name]?.store
        }
        return bound ?? UnboundScopeStore(scope: self)
    }
}

/// A scope's binding: its store, the identity read when bound (no store code runs under the lock), and whether used.
struct ScopeBinding {
    var store: (any WLStorageStore)?
    var identity: String?
    var used = false
}

/// The store of a scope unbound when its storage was made: reads and writes nothing, says which scope to bind.
struct UnboundScopeStore: WLStorageStore {
    let scope: WLStorageScope

    var identity: String { "unbound-scope:\(scope.name)" }

    private var refusal: WLStorageError {
        WLStorageError(
            code: .invalidConfiguration,
            message: "\(scope) is not bound to a store: call `try WLStorageScope(\"\(scope.name)\").bind(to: store)`"
                + " before the first storage of its keys is made; this storage keeps its value in memory only")
    }

    func read(key: String) throws -> Data? { throw refusal }
    func write(key: String, data: Data) throws { throw refusal }
    func remove(key: String) throws { throw refusal }
    func keys() throws -> [String] { throw refusal }
}
