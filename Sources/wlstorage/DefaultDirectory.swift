import Foundation
import WLStorage
import WLStorageFiles

/// The storage directory the options and the environment select.
///
/// `--dir` wins, made absolute against the current directory. `--suite NAME` is the directory the library's
/// `.suite(NAME)` names: `$WLSTORAGE_SUITES_DIRECTORY/<folder>`, or `<$XDG_DATA_HOME or ~/.local/share>/wlstorage/suites/
/// <folder>`, where the folder is the name when it is a plain file name and `suite-<SHA-256 of the name>` otherwise.
/// Without either, the library's default directory is
/// used, as a program built with the library would find it: `$WLSTORAGE_DIRECTORY` when set, otherwise
/// `<$XDG_DATA_HOME or ~/.local/share>/<program>/.wlstorage` (`.wlstorage_debug` with `--debug`).
///
/// - Throws: ``ToolFailure`` with ``ExitStatus/usage`` when neither `--dir`, `--program` nor
///   `$WLSTORAGE_DIRECTORY` says where to look, and with ``ExitStatus/failure`` when no data directory is known.
func storageDirectory(
    for options: GlobalOptions, environment: [String: String]
) throws(ToolFailure) -> StorageDirectory {
    if let directory = options.directory {
        return StorageDirectory(path: URL(fileURLWithPath: directory, isDirectory: true).standardizedFileURL.path)
    }
    if let suite = options.suite {
        guard let url = StorageLocation.suiteDirectory(suite, environment: environment) else {
            throw ToolFailure(
                "no directory for the suite '\(suite)': set \(StorageLocation.suitesEnvironmentVariable),"
                    + " XDG_DATA_HOME or HOME")
        }
        return StorageDirectory(path: url.standardizedFileURL.path)
    }
    let override = environment[StorageLocation.environmentVariable].map { !$0.isEmpty } ?? false
    guard let program = options.program ?? (override ? "wlstorage" : nil) else {
        throw ToolFailure(
            "no storage directory: give --dir DIR, --program NAME or --suite NAME, or set"
                + " \(StorageLocation.environmentVariable)",
            status: .usage)
    }
    guard let url = StorageLocation.defaultDirectory(program: program, debug: options.debug, environment: environment)
    else {
        throw ToolFailure("no default directory for '\(program)': set XDG_DATA_HOME or HOME to an absolute path")
    }
    return StorageDirectory(path: url.standardizedFileURL.path)
}

/// Where the values of the program `--program` names are when its storage directory is missing but the folder of its
/// other build exists, as a sentence that says which option to change; `nil` otherwise.
///
/// A program built in debug (`swift build`, `swift run`) keeps its values in `.wlstorage_debug`, a release build in
/// `.wlstorage`: `--debug` chooses between them.
func otherBuildsFolder(for options: GlobalOptions, environment: [String: String]) -> String? {
    guard let program = options.program,
        let chosen = StorageLocation.defaultDirectory(program: program, debug: options.debug, environment: environment),
        let other = StorageLocation.defaultDirectory(program: program, debug: !options.debug, environment: environment),
        other != chosen
    else { return nil }
    var isDirectory: ObjCBool = false
    let path = other.standardizedFileURL.path
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
        return nil
    }
    return options.debug
        ? "the release build of '\(program)' keeps its values in \(path): leave out --debug"
        : "the debug build of '\(program)' keeps its values in \(path): pass --debug"
}
