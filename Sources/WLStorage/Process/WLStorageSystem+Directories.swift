import Foundation

extension WLStorageSystem {
    /// The directory that storages created with a key alone, or with ``WLStorageStore/standard``, keep their files in.
    ///
    /// It is `$WLSTORAGE_DIRECTORY` when set, else `<program>/.wlstorage` (`.wlstorage_debug` in debug builds) in
    /// `$XDG_DATA_HOME` or `~/.local/share`, or a `withDefaultDirectory` closure's; `nil` when neither is known.
    ///
    /// - Important: Renaming the executable, or switching between debug and release builds, gives a program another
    ///   directory; set `WLSTORAGE_DIRECTORY`, or choose a store, to keep values in one place.
    public static var defaultDirectory: URL? {
        (TaskBindings.current.defaultDirectory?.store as? WLStorageDirectoryStore)?.url
            ?? StorageLocation.processDefaultDirectory
    }

    /// The directory that holds the folders of suites (``WLStorageStore/suite(_:)``): `$WLSTORAGE_SUITES_DIRECTORY`,
    /// else `wlstorage/suites` in the data home (`nil` without one); ``withDefaultDirectory(_:_:)`` leaves it.
    public static var suitesDirectory: URL? { StorageLocation.suitesDirectory() }

    /// Runs `body` with `url` as the default directory of the storages made in `body` and its child tasks; for tests,
    /// which run side by side in one process (see <doc:TestingWithStorages>).
    ///
    /// It applies wherever the default directory would; a storage keeps its directory after `body` returns. Suites,
    /// scopes, stores already made, detached tasks and other threads are not affected.
    ///
    /// - Parameters:
    ///   - url: The directory, created with mode 0700 on first use.
    ///   - body: The code whose storages use `url`.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public static func withDefaultDirectory<Result>(_ url: URL, _ body: () throws -> Result) rethrows -> Result {
        try TaskBindings.$current.withValue(settingDefaultDirectory(url), operation: body)
    }

    /// ``withDefaultDirectory(_:_:)`` for an async `body`, which runs on `isolation`, the caller's actor.
    public static func withDefaultDirectory<Result>(
        _ url: URL, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> Result
    ) async rethrows -> Result {
        try await TaskBindings.$current.withValue(settingDefaultDirectory(url), operation: body, isolation: isolation)
    }

    private static func settingDefaultDirectory(_ url: URL) -> TaskBindings {
        var bindings = TaskBindings.current
        bindings.defaultDirectory = TaskBinding(WLStorageDirectoryStore(url: url, followsDefaultDirectory: true))
        return bindings
    }
}
