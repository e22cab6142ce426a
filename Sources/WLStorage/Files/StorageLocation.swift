import Foundation

extension WLStorageDefaultBacker {
    /// The directory that storages created with a key alone keep their files in.
    ///
    /// It is `$WLSTORAGE_DIRECTORY` when that variable is set. Otherwise it is a folder named after the program
    /// in the user's data directory (`$XDG_DATA_HOME`, or `~/.local/share` when that is unset), with the reference
    /// library's `.wlstorage` folder in it, or `.wlstorage_debug` in debug builds:
    /// `~/.local/share/<program>/.wlstorage`. Linux has no per-application sandbox, so the program's name keeps
    /// two programs' keys apart.
    ///
    /// `nil` when neither `XDG_DATA_HOME` nor a home directory is known.
    ///
    /// - Important: The program's name is the name of its executable file, and debug and release builds use
    ///   different folders. Renaming the executable, or switching between `swift run` and a release build, gives a
    ///   program another directory, and its stored values seem to be gone. Set `WLSTORAGE_DIRECTORY`, or pass a
    ///   directory to ``init(key:directory:)``, to keep values in one place.
    public static var defaultDirectory: URL? {
        StorageLocation.defaultDirectory(program: ProcessInfo.processInfo.processName, debug: StorageLocation.isDebug)
    }
}

/// How the default directory is found. Shared by the library and the command-line tool.
package enum StorageLocation {
    /// The environment variable that overrides the default directory.
    package static let environmentVariable = "WLSTORAGE_DIRECTORY"

    /// Whether this build of the library is a debug build.
    package static var isDebug: Bool {
        #if DEBUG
            return true
        #else
            return false
        #endif
    }

    /// The user's data directory: `$XDG_DATA_HOME`, or `~/.local/share`; `nil` when neither is known.
    package static func dataHome(environment: [String: String]) -> String? {
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") { return data }
        if let home = environment["HOME"], home.hasPrefix("/") { return home + "/.local/share" }
        return nil
    }

    /// The default directory for `program`, in a debug or a release build.
    package static func defaultDirectory(
        program: String, debug: Bool, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> URL? {
        if let override = environment[environmentVariable], !override.isEmpty {
            return URL(fileURLWithPath: override, isDirectory: true)
        }
        guard let base = dataHome(environment: environment) else { return nil }
        let folder = FileName.isPlain(program) ? program : "program-" + (SHA256.hexDigest(of: program) ?? "unknown")
        return URL(fileURLWithPath: base, isDirectory: true)
            .appendingPathComponent(folder, isDirectory: true)
            .appendingPathComponent(debug ? ".wlstorage_debug" : ".wlstorage", isDirectory: true)
    }
}
