import Foundation

extension WLStorageSystem {
    /// The directory that storages created with a key alone, or with ``WLStorageStore/standard``, keep their files in.
    ///
    /// It is `$WLSTORAGE_DIRECTORY` when that variable is set. Otherwise it is a folder named after the program
    /// in the user's data directory (`$XDG_DATA_HOME`, or `~/.local/share` when that is unset), with the reference
    /// library's `.wlstorage` folder in it, or `.wlstorage_debug` in debug builds:
    /// `~/.local/share/<program>/.wlstorage`. Linux has no per-application sandbox, so the program's name keeps
    /// two programs' keys apart. Inside ``withDefaultDirectory(_:_:)``, it is the directory set for the closure.
    ///
    /// `nil` when neither `XDG_DATA_HOME` nor a home directory is known.
    ///
    /// ```swift
    /// print(WLStorageSystem.defaultDirectory?.path ?? "no default directory")
    /// ```
    ///
    /// - Important: The program's name is the name of its executable file, and debug and release builds use
    ///   different folders. Renaming the executable, or switching between `swift run` and a release build, gives a
    ///   program another directory, and its stored values seem to be gone. Set `WLSTORAGE_DIRECTORY`, or choose a
    ///   store (`store: .directory(url)`), to keep values in one place.
    public static var defaultDirectory: URL? {
        if let directory = TaskBindings.current.defaultDirectory?.store as? WLStorageDirectoryStore {
            return directory.url
        }
        return StorageLocation.processDefaultDirectory
    }

    /// The directory that holds the folders of suites (``WLStorageStore/suite(_:)``): `$WLSTORAGE_SUITES_DIRECTORY`
    /// when that variable is set, else `$XDG_DATA_HOME/wlstorage/suites`, or `~/.local/share/wlstorage/suites` when
    /// `XDG_DATA_HOME` is unset, whatever the program and whether it is a debug build.
    ///
    /// `nil` when neither `XDG_DATA_HOME` nor a home directory is known. ``withDefaultDirectory(_:_:)`` does not
    /// change it: bind a scope to a directory instead, for tests (see <doc:TestingWithStorages>).
    public static var suitesDirectory: URL? {
        StorageLocation.suitesDirectory()
    }

    /// Runs `body` with `url` as the default directory of the storages made while it runs: in `body`, and in the child
    /// tasks it starts.
    ///
    /// Made for tests, which Swift Testing runs side by side in one process: each test sets its own temporary
    /// directory, and sees neither the others' directories nor the program's.
    ///
    /// ```swift
    /// let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
    /// WLStorageSystem.withDefaultDirectory(directory) {
    ///     let launches = WLStorage(key: "launches", defaultValue: 0)   // a file in `directory`
    ///     launches.wrappedValue += 1
    /// }
    /// ```
    ///
    /// It applies to what names the default directory when a storage is made: a key alone (`WLStorage(key:…)`),
    /// ``WLStorageStore/standard``, ``WLStorageDefaultBacker/init(key:directory:)`` without a directory, a typed key
    /// declared with no store or with `.standard`, and ``defaultDirectory``. A storage keeps its directory after `body`
    /// returns. A store made from the default directory (`.prefix(_:)`, `.standard.prefixed(_:)`) is the directory of
    /// when it was made, and a typed key declared with one keeps the directory of when the key was made (a static
    /// constant is made at its first use). Suites, scopes, and storages made on other threads or in detached tasks
    /// (`Task {}` takes task locals along; `Task.detached` and Dispatch do not) are not affected.
    ///
    /// One-shot access to a key of the default directory (``WLStorageKeys/subscript(_:)``) goes through a storage of
    /// `url` made for `body`, released and flushed when `body` has returned and the tasks started in it have ended.
    ///
    /// - Parameters:
    ///   - url: The directory, created with mode 0700 on first use.
    ///   - body: The code whose storages use `url`.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public static func withDefaultDirectory<Result>(_ url: URL, _ body: () throws -> Result) rethrows -> Result {
        try TaskBindings.$current.withValue(settingDefaultDirectory(url), operation: body)
    }

    /// Runs `body` with `url` as the default directory of the storages made while it runs: in `body`, and in the child
    /// tasks it starts (see ``withDefaultDirectory(_:_:)``).
    ///
    /// - Parameters:
    ///   - url: The directory, created with mode 0700 on first use.
    ///   - isolation: The actor `body` runs on: the caller's.
    ///   - body: The code whose storages use `url`.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public static func withDefaultDirectory<Result>(
        _ url: URL, isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> Result
    ) async rethrows -> Result {
        try await TaskBindings.$current.withValue(settingDefaultDirectory(url), operation: body, isolation: isolation)
    }

    /// The current task's bindings, with `url` as the default directory.
    private static func settingDefaultDirectory(_ url: URL) -> TaskBindings {
        var bindings = TaskBindings.current
        bindings.defaultDirectory = TaskBinding(WLStorageDirectoryStore(url: url, followsDefaultDirectory: true))
        return bindings
    }
}
