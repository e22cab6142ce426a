import Foundation
import Synchronization

/// The backer that keeps each value in its own JSON file in a directory.
///
/// The file is named by the key when the key is 1 to 127 bytes of `[A-Za-z0-9._-]` (and not `.`, `..` or 64 lowercase
/// hex digits), and by the lowercase hex SHA-256 of the key's UTF-8 bytes otherwise, so no key can name a file
/// outside the directory, nor another key's file. The file holds the `JSONEncoder` output of the value, with sorted
/// keys so that equal values give equal files; the reference library reads it as it reads its own.
///
/// Writes are atomic and durable: the bytes go to a temporary file created with mode 0600, which is synced and
/// renamed over the file, and then the directory is synced. A reader sees the old content or the new, never a
/// mix, even after a crash or a power loss.
///
/// Reading never follows a symlink. A file that is not JSON is moved aside, to a name with `~corrupt-` in it, and
/// kept; JSON that does not decode (another version of the type stored it) and a value an encrypted store sealed are
/// left as they are. A symlink, directory or other non-regular file where the file should be is left alone and
/// reported, and writes refuse to replace it. A write keeps the members of the stored JSON object that the value's
/// type does not know (see <doc:ChangingAStoredType>).
public final class WLStorageDefaultBacker<T: Codable & Sendable>: WLStorageBacker, Sendable {
    /// The key the value is stored under.
    public let key: String

    /// The file that holds the value, or `nil` when no directory is available (the error is reported on the
    /// first read or write).
    public var fileURL: URL? {
        guard let directory, let fileName else { return nil }
        return URL(fileURLWithPath: directory.filePath(fileName), isDirectory: false)
    }

    /// The directory, shared with every backer of the same directory; `nil` when none is available.
    package let directory: StorageDirectory?
    /// The file name; `nil` when the key needs hashing and libcrypto cannot hash it.
    package let fileName: String?
    /// The version of the file this backer last wrote or read, so that its own writes and versions it already holds
    /// are told from other programs' changes.
    let known = Lock(KnownVersions())
    /// Whether a storage keeps its value through this backer: its writes are then the storage's own, which the
    /// storage does not read again. A backer the program calls itself (wrapped in a backer of its own) writes as
    /// another program would, so that a storage of the same file in this process reads what it writes.
    private let attached = Atomic<Bool>(false)

    /// Marks the backer as a storage's own (see ``attached``).
    func attach() { attached.store(true, ordering: .relaxed) }

    /// Creates a backer for `key` in `directory`.
    ///
    /// The directory and its missing parents are created with mode 0700 on first use, and temporary files that
    /// a crashed writer left in it are removed.
    ///
    /// - Parameters:
    ///   - key: The key. Any string is accepted.
    ///   - directory: The directory to keep the file in. Defaults to ``defaultDirectory``.
    public init(key: String, directory: URL? = defaultDirectory) {
        self.key = key
        self.directory = directory.map(DirectoryTable.directory(for:))
        self.fileName = FileName.forKey(key)
    }

    deinit {
        if let directory { DirectoryTable.release(directory) }
        KeptOriginals.forget(self)
    }

    /// Why there is no file to read or write.
    private var setupError: WLStorageError {
        directory == nil
            ? WLStorageError(
                code: .directoryUnavailable,
                message: "no storage directory: set WLSTORAGE_DIRECTORY, XDG_DATA_HOME or HOME", key: key)
            : WLStorageError(
                code: .directoryUnavailable, message: "cannot hash the key: OpenSSL SHA-256 is unavailable", key: key)
    }

    /// Reads the file. A missing or empty file gives `defaultValueClosure()`.
    ///
    /// A file that lacks fields of the type, and has none the type does not know, is read with them taken from
    /// `defaultValueClosure()` (see <doc:ChangingAStoredType>); the file is left as it is.
    ///
    /// - Parameter defaultValueClosure: Makes the value to use when the file is missing or empty, and the fields a file
    ///   lacks.
    /// - Returns: The decoded value, or the default.
    /// - Throws: ``WLStorageError`` when the file exists but cannot be used: ``WLStorageError/Code/decodingFailed``
    ///   (the file is not JSON, and was moved aside and kept; or it is a sealed value, left as it is),
    ///   ``WLStorageError/Code/storedByAnotherVersion`` (JSON that does not decode, left as it is),
    ///   ``WLStorageError/Code/notARegularFile``,
    ///   ``WLStorageError/Code/valueTooLarge``, ``WLStorageError/Code/readFailed`` or
    ///   ``WLStorageError/Code/directoryUnavailable``.
    public func read(defaultValueClosure: () -> T) throws -> T {
        try readValue(defaultValueClosure: defaultValueClosure)
    }

    /// Writes `value` as JSON, atomically and durably, with mode 0600.
    ///
    /// - Parameter value: The value to store.
    /// - Throws: ``WLStorageError`` with ``WLStorageError/Code/encodingFailed``,
    ///   ``WLStorageError/Code/valueTooLarge``, ``WLStorageError/Code/writeFailed``,
    ///   ``WLStorageError/Code/notARegularFile`` or ``WLStorageError/Code/directoryUnavailable``. The file is
    ///   unchanged when it throws.
    public func write(value: T) throws {
        _ = try place(value, replacing: true)
    }

    // MARK: What the storage uses beyond the protocol

    /// Prepares the directory (see ``DirectoryTable/prepare(_:)``) and returns its identity.
    package func prepare() throws(WLStorageError) -> DirectoryIdentity {
        try location().identity
    }

    /// Writes `value` unless something is stored already. Returns whether it was written.
    ///
    /// An empty file stands for "nothing stored" when read, but it is not replaced here: it counts as written.
    func create(value: T) throws(WLStorageError) -> Bool {
        try place(value, replacing: false)
    }

    /// Whether any entry stands at the file's name.
    var entryExists: Bool {
        guard let directory, let fileName else { return false }
        return directory.status(of: fileName) != nil
    }

    /// Reads the file: its value, its absence (a missing or empty file), or why it cannot be read. A file that does
    /// not decode, even through `decoding`'s added fields and migrations, is moved aside and kept, and then counts as
    /// absent. A file that decodes only through them is kept as it is under ``keptOriginalName(for:)`` until this
    /// backer next writes the file.
    ///
    /// - Parameters:
    ///   - prepared: Whether the caller has just prepared the directory (``prepare()``), which is then not looked up
    ///     again.
    ///   - decoding: How the file's bytes become the value.
    func readStored(
        prepared: Bool = false, again: Bool = true, decoding: @autoclosure () -> ValueDecoding<T>
    ) -> ReadResult<T> {
        let directory: StorageDirectory
        let fileName: String
        let data: Data
        let identity: FileIdentity
        do {
            if prepared, let known = self.directory, let name = self.fileName {
                (directory, fileName) = (known, name)
            } else {
                (directory, fileName, _) = try location()
            }
            guard let read = try directory.readVersion(fileName), !read.contents.isEmpty else { return .absent }
            (data, identity) = read
        } catch {
            return .failed(Self.keyed(error, key))
        }
        // Bytes in the current shape take the plain decode alone, as before there were other steps. Caught rather than
        // made optional, and the other steps in a function of their own: in code not specialized for the value's type,
        // each generic type touched (an optional of the value, the steps' outcomes) costs a look-up of its metadata.
        do {
            let value = try JSONCoders.decodeStored(T.self, from: data)
            _ = known.withLock { $0.read(KnownVersions.stamp(data, identity: identity), data) }
            return .value(value)
        } catch {}
        return readStored(data, identity: identity, decoding: decoding(), again: again)
    }

    /// Reads `data`, bytes that do not decode as they are, through the added fields and migrations, or keeps the
    /// original of a reshaped value, or moves the file aside (see ``readStored(prepared:again:decoding:)``).
    @inline(never)
    private func readStored(_ data: Data, identity: FileIdentity, decoding: ValueDecoding<T>, again: Bool)
        -> ReadResult<T>
    {
        let read = ReadBytes(data: data, stamp: KnownVersions.stamp(data, identity: identity), identity: identity)
        // Moved aside only while it is still the version read: a file changed meanwhile is read again, once.
        return opening(
            read, decoding: decoding,
            readAgain: again ? { self.readStored(prepared: true, again: false, decoding: decoding) } : nil)
    }

    /// Where the bytes are, as messages name them.
    var place: StoredPlace {
        // Without a directory or a name there are no bytes: the place is named by the file alone.
        guard let directory, let fileName else {
            return StoredPlace(key: key, subject: "the file", file: nil, conceals: false)
        }
        return .file(key: key, fileName, in: directory)
    }

    func keepOriginal(_ data: Data, _ reshape: ValueDecoding<T>.Reshape) -> WLStorageError? {
        guard let directory, let fileName else { return setupError }
        let kept = Self.keptOriginalName(for: fileName)
        do throws(WLStorageError) {
            // Made once: a copy an earlier run made is kept. Anything but a file at the name keeps nothing.
            if try directory.create(kept, contents: data) == nil,
                let status = directory.status(of: kept), !status.isRegularFile
            {
                throw WLStorageError(
                    code: .notARegularFile, message: "a \(status.kind.rawValue) stands at \(kept)", key: key,
                    path: directory.filePath(kept))
            }
            return nil
        } catch {
            return WLStorageError(
                code: error.code,
                message: "the file's bytes \(reshape.description); they could not be kept in \(kept), so the file is"
                    + " left in its old shape: \(error.message)",
                key: key, path: directory.filePath(fileName), errno: error.errno)
        }
    }

    func removeKeptOriginal() throws {
        guard let directory, let fileName else { return }
        _ = try directory.remove(Self.keptOriginalName(for: fileName))
    }

    func keepAside(_ read: ReadBytes, judged: String, _ error: (any Error)?) -> KeptAside {
        guard let directory, let fileName else { return .failed(setupError) }
        let aside: String
        do {
            guard let moved = try directory.moveAside(fileName, ifStill: read.identity) else {
                return .changed(
                    WLStorageError(
                        code: .readFailed,
                        message: "the file does not decode as \(T.self), and it changed while it was read; it is left"
                            + " in place",
                        key: key, path: directory.filePath(fileName)))
            }
            aside = moved
        } catch var failure {
            failure.message = "the file does not decode as \(T.self), and " + failure.message
            return .failed(Self.keyed(failure, key))
        }
        return .kept(
            WLStorageError(
                code: .decodingFailed,
                message: "the file \(judged); it was moved aside to \(aside)",
                key: key, path: directory.filePath(fileName), underlying: error))
    }

    /// The name the bytes of `fileName` are kept under, as they were, while the file is rewritten in the shape of the
    /// current type: `NAME~before-type-change`.
    static func keptOriginalName(for fileName: String) -> String {
        fileName + StorageDirectory.keptOriginalSuffix
    }

    /// What another program did to the file since this backer last wrote or read it.
    ///
    /// The version this backer wrote or read last is recognised by its identity and its contents together (see
    /// ``KnownVersions/stamp(_:identity:)``). Unlike
    /// ``read(defaultValueClosure:)`` it never moves a file aside: a file that does not decode is reported and left
    /// to the program that wrote it.
    func readExternalChange(decoding: ValueDecoding<T>) throws(WLStorageError) -> ExternalChange<T> {
        guard let directory, let fileName else { return .unchanged }
        let read: (contents: Data, identity: FileIdentity)?
        do {
            read = try directory.readVersion(fileName)
        } catch let error where error.code == .notARegularFile {
            return .unchanged
        } catch {
            throw Self.keyed(error, key)
        }
        // Removed (or emptied): an outside change when this backer knew a stored version.
        guard let (data, identity) = read, !data.isEmpty else { return try change(nil, decoding: decoding) }
        return try change(
            ReadBytes(data: data, stamp: KnownVersions.stamp(data, identity: identity)), decoding: decoding)
    }

    /// Writes `value`, the rewrite in the current shape of the bytes last read, only while the file is still the
    /// version read (or one this backer wrote): a change another program made since, whose event has not come yet, is
    /// read instead. Returns whether it wrote. The file's identity is checked again just before the file is put in
    /// place, and what it displaced just after, so that a change made in the moment between is put back (see
    /// ``StorageDirectory/write(_:contents:ifStill:announced:)``).
    func rewrite(_ value: T) throws -> Bool? {
        let (directory, fileName, _) = try location()
        let current: (contents: Data, identity: FileIdentity)?
        do {
            current = try directory.readVersion(fileName)
        } catch {
            throw Self.keyed(error, key)
        }
        guard let current, !current.contents.isEmpty else { return false }
        let stamp = KnownVersions.stamp(current.contents, identity: current.identity)
        guard known.withLock({ $0.isLast(stamp) }) else { return false }
        return try place(value, replacing: true, ifStill: current.identity)
    }

    // MARK: Internals

    /// Encodes `value` and writes it, replacing the file or only where none stands. Returns whether it was written.
    private func place(_ value: T, replacing: Bool, ifStill expected: FileIdentity? = nil) throws(WLStorageError)
        -> Bool
    {
        let (directory, fileName, _) = try location()
        let data: Data
        do {
            data = try encode(value)
        } catch {
            var error = error
            error.path = directory.filePath(fileName)
            throw error
        }
        func attempt() throws(WLStorageError) -> FileIdentity? {
            let announced = attached.load(ordering: .relaxed)
            if let expected {
                return try directory.write(fileName, contents: data, ifStill: expected, announced: announced)
            }
            return replacing
                ? try directory.write(fileName, contents: data, announced: announced)
                : try directory.create(fileName, contents: data, announced: announced)
        }
        do {
            let identity: FileIdentity?
            do {
                identity = try attempt()
            } catch let error where error.code == .directoryUnavailable && error.errno == ENOENT {
                // The directory was removed after it was prepared: make it again, once.
                DirectoryTable.forget(directory)
                _ = try DirectoryTable.prepare(directory)
                identity = try attempt()
            }
            guard let identity else { return false }
            recordWrite(data, stamp: KnownVersions.stamp(data, identity: identity))
            return true
        } catch {
            throw Self.keyed(error, key)
        }
    }

    /// The directory (prepared), the file name and the directory's identity; throws the setup error when there are
    /// none.
    private func location() throws(WLStorageError) -> (
        directory: StorageDirectory, fileName: String, identity: DirectoryIdentity
    ) {
        guard let directory, let fileName else {
            throw setupError
        }
        do {
            return (directory, fileName, try DirectoryTable.prepare(directory))
        } catch {
            throw Self.keyed(error, key)
        }
    }

    private static func keyed(_ error: WLStorageError, _ key: String) -> WLStorageError {
        var error = error
        error.key = key
        return error
    }
}

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

/// One encoder and one decoder for every backer: the reference library's format, the plain `JSONEncoder` output of
/// the value, with its keys sorted, so that equal values give equal files (stable and diffable, in whatever order a
/// dictionary hands out its keys) and any JSON decoder, the reference library's included, reads them. Both are safe
/// to share between threads, and making one costs more than a small decode.
enum JSONCoders {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()
    static let decoder = JSONDecoder()

    /// The value of `type` in `data`, stored bytes in the current shape: through ``StoredJSONDecoder``, which makes
    /// exactly `JSONDecoder`'s value for the bytes it is sure of, and otherwise through ``decoder``, whose error is
    /// the one thrown.
    static func decodeStored<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        do {
            return try StoredJSONDecoder.decode(type, from: data)
        } catch {}
        return try decoder.decode(type, from: data)
    }

    /// What is wrong with bytes that do not decode, in the words the command-line tool uses for the same bytes:
    /// they are not JSON (and why), or they are JSON of another shape.
    static func judge(_ data: Data) -> String {
        if let problem = JSONValidator.problem(in: data) { return "is not JSON (\(problem)), so it does not decode as" }
        return "holds JSON that does not decode as"
    }

    /// The bytes of `value`, the value of `key`, with the members of `base` (the stored bytes it replaces) that its
    /// type does not know (see ``UnknownFields``), checked against the maximum value size.
    static func encode<T: Codable>(_ value: T, key: String, keepingUnknownOf base: Data?) throws(WLStorageError)
        -> Data
    {
        var data: Data
        do {
            data = try encoder.encode(value)
        } catch {
            throw WLStorageError(
                code: .encodingFailed, message: "the value does not encode as JSON", key: key, underlying: error)
        }
        let plain = data.count
        if let base, let merged = UnknownFields.merging(data, keepingUnknownOf: base, as: T.self) { data = merged }
        let limit = ValueSizeLimit.maximum
        guard data.count <= limit else {
            // A value that fits alone is refused for the fields it keeps: say so, and how to write it.
            let kept =
                plain <= limit
                ? ", and to \(data.count) bytes with the fields of the stored value that its type does not know, which"
                    + " a write keeps (removeUnknownFields() writes it without them)," : ","
            throw WLStorageError(
                code: .valueTooLarge,
                message: "the value encodes to \(plain) bytes\(kept) more than the maximum value size of \(limit)"
                    + " bytes; it is not written and stays pending",
                key: key)
        }
        return data
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
