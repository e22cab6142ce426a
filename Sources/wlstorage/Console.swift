import Foundation
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The tool's exit statuses.
enum ExitStatus: Int32 {
    /// The command did what it was asked.
    case success = 0
    /// The key was not found, a file did not verify, or a system call failed.
    case failure = 1
    /// The command line was wrong (`EX_USAGE` in `sysexits.h`).
    case usage = 64
}

/// A command that could not do its work. The message goes to standard error, and the tool exits with `status`.
struct ToolFailure: Error {
    var message: String
    var status: ExitStatus = .failure

    init(_ message: String, status: ExitStatus = .failure) {
        self.message = message
        self.status = status
    }

    /// A failure that says what the library reported: its message, the file, and the system's reason.
    init(_ error: WLStorageError) {
        var text = error.message
        // A store's errors name the store in the message already.
        if let path = error.path, !text.contains(path) { text += ": \(path)" }
        if let code = error.errno { text += " (\(String(cString: strerror(code))))" }
        self.init(text)
    }
}

/// Standard output and standard error, written unbuffered so that nothing is lost when the tool is killed.
enum Console {
    /// Writes `text` to standard output.
    static func out(_ text: String) {
        try? FileHandle.standardOutput.write(contentsOf: Data(text.utf8))
    }

    /// Writes `text` to standard error.
    static func error(_ text: String) {
        try? FileHandle.standardError.write(contentsOf: Data(text.utf8))
    }
}
