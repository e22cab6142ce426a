import Foundation

/// The one error type of WLStorage: what went wrong, for which key and file, and the system's own reason.
///
/// Getters and setters of ``WLStorage`` cannot throw: errors go to ``WLStorageSystem/errorHandler`` as they
/// happen and are kept in ``WLStorage/lastError``. Nothing in the package crashes on an error.
public struct WLStorageError: Error, CustomStringConvertible, Sendable {
    /// A category of failure. New codes may be added; switch over them with a `default` case.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// A short, stable name for the code, such as `"writeFailed"`.
        public let name: String

        package init(_ name: String) { self.name = name }

        /// The code's ``name``.
        public var description: String { name }

        /// No storage directory could be found or created.
        public static let directoryUnavailable = Code("directoryUnavailable")
        /// Reading the file failed for a reason other than its absence.
        public static let readFailed = Code("readFailed")
        /// Stored bytes are not JSON (or, encrypted, do not open): moved aside, or left if they may be another key's.
        public static let decodingFailed = Code("decodingFailed")
        /// The stored value is JSON this version of the type cannot read (another version stored it, or a migration
        /// threw). It is left as it is; the storage writes only when set. See <doc:ChangingAStoredType>.
        public static let storedByAnotherVersion = Code("storedByAnotherVersion")
        /// The value could not be encoded as JSON. Nothing was written.
        public static let encodingFailed = Code("encodingFailed")
        /// Writing, syncing or renaming the file failed. The value stays pending and is retried.
        public static let writeFailed = Code("writeFailed")
        /// Something other than a regular file (a symlink, a directory, a device) stands where the file should be.
        public static let notARegularFile = Code("notARegularFile")
        /// Two storages for the same file were opened with different value types.
        public static let typeMismatch = Code("typeMismatch")
        /// A custom backer threw from `read` or `write`.
        public static let backerFailed = Code("backerFailed")
        /// A file larger than ``WLStorageSystem/maximumValueSize`` is left unread, or a larger value is not written.
        public static let valueTooLarge = Code("valueTooLarge")
        /// Changes made while the stored value could not be read were dropped: the stored value, read later, won.
        public static let changeDiscarded = Code("changeDiscarded")
        /// A store was given settings it cannot use (thrown when it is made), or lacks what updates need (reported by a
        /// first update, which is made all the same; the message names the statement to run).
        public static let invalidConfiguration = Code("invalidConfiguration")
        /// The server of a store was replaced by a promoted standby, or is on an earlier timeline than before: writes
        /// not replicated may be gone; every storage of the store reads its keys again.
        public static let storeFailedOver = Code("storeFailedOver")
        /// A call that would wait for itself, such as ``WLStorage/flush()`` from the storage's own backer, did nothing.
        public static let reentrantCall = Code("reentrantCall")
    }

    /// The category of failure.
    public var code: Code
    /// A sentence that says what failed, for a log.
    public var message: String
    /// The storage key involved, if any.
    public var key: String?
    /// The file or directory involved, if any.
    public var path: String?
    /// The `errno` value reported by the system call that failed, if any.
    public var errno: Int32?
    /// The error that caused this one, such as a `DecodingError` or a custom backer's error.
    public var underlying: (any Error)?
    /// For ``WLStorageStore/write(_:)``: how many writes, from the batch's start, were stored (`nil`: none); the others
    /// stay pending. For `write(_:ifTheyHold:)`: how many may have been (`nil`: all); those after were not sent.
    public var storedWrites: Int?
    /// For `write(_:ifTheyHold:)`: whether each write from the batch's start was stored (`nil`: not known), as far as
    /// the store can say (the chunks answered before the one that failed); those after, up to ``storedWrites``, may be.
    public var storedAnswers: [Bool?]?

    /// Creates an error, for example in a custom backer that wants to report a failure with a code of its own.
    ///
    /// - Parameters:
    ///   - code: The category of failure.
    ///   - message: A sentence that says what failed.
    ///   - key: The storage key involved, if any.
    ///   - path: The file or directory involved, if any.
    ///   - errno: The `errno` of the system call that failed, if any.
    ///   - underlying: The error that caused this one, if any.
    public init(
        code: Code, message: String, key: String? = nil, path: String? = nil, errno: Int32? = nil,
        underlying: (any Error)? = nil
    ) {
        self.code = code
        self.message = message
        self.key = key
        self.path = path
        self.errno = errno
        self.underlying = underlying
    }

    /// One line for a log: the code and message, then the key, path, `errno` with its text, and the underlying error.
    public var description: String {
        var text = "WLStorage \(code): \(message)"
        if let key { text += " [key: \(key)]" }
        if let path { text += " [path: \(path)]" }
        if let errno { text += " [errno \(errno): \(String(cString: strerror(errno)))]" }
        // An underlying error whose text the message quotes already is not repeated.
        if let underlying, case let cause = String(describing: underlying), !message.contains(cause) {
            text += " [\(cause)]"
        }
        return text
    }
}
