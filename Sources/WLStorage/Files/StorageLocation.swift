import Foundation
import WLStorageCrypto
import WLStorageFiles

/// How the default directory is found. Shared by the library and the command-line tool.
package enum StorageLocation {
    package static let environmentVariable = "WLSTORAGE_DIRECTORY"

    /// The process's default directory: for this program and this build, from the environment now.
    package static var processDefaultDirectory: URL? {
        defaultDirectory(program: ProcessInfo.processInfo.processName, debug: isDebug)
    }

    #if DEBUG
        package static let isDebug = true
    #else
        package static let isDebug = false
    #endif

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
        directory(overriddenBy: environmentVariable, environment: environment) {
            let folder = FileName.isPlain(program) ? program : "program-" + (SHA256.hexDigest(of: program) ?? "unknown")
            return folder + (debug ? "/.wlstorage_debug" : "/.wlstorage")
        }
    }

    /// `$variable` when set (a relative path is taken from the current directory), else `path()` in the data home.
    static func directory(overriddenBy variable: String, environment: [String: String], path: () -> String) -> URL? {
        if let override = environment[variable], !override.isEmpty {
            return URL(fileURLWithPath: override, isDirectory: true)
        }
        guard let base = dataHome(environment: environment) else { return nil }
        return URL(fileURLWithPath: base, isDirectory: true).appendingPathComponent(path(), isDirectory: true)
    }
}
