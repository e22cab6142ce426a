import Foundation
import WLStorage
import WLStorageFiles

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One entry of a storage directory as `list` and `verify` see it: its name's bytes, what the name says it is, and
/// what is in it.
struct DirectoryEntry {
    /// What a name says an entry is.
    enum Role: Equatable {
        /// The file of a key: a plain key, or a 64-digit hex digest.
        case keyFile
        /// A writer's temporary file, `NAME~` and 16 lowercase hex digits and `.tmp`, or a rewrite's file during its
        /// exchange (`NAME~`, 16 lowercase hex digits, `-`, 16 more, `.xchg`), for the key file `base`.
        case temporary(base: String)
        /// A file the library moved aside because it did not decode (`NAME~corrupt-…`), for the key file `base`.
        case movedAside(base: String)
        /// The bytes of the key file `base` from before its type changed (`NAME~before-type-change`), which the
        /// library keeps until it has written the value in the type's new shape.
        case keptOriginal(base: String)
        /// A name the library never gives a file. `isUTF8` is `false` when the name's bytes are not UTF-8, and so
        /// cannot be any key's file name.
        case foreign(isUTF8: Bool)
    }

    /// What is in an entry.
    enum State {
        case json, empty, invalid(String), tooLarge, unreadable(String), movedAside, keptOriginal, other
        /// Without `--key-file`: the file holds a value sealed by an encrypted store; the text says with which key.
        case sealed(String)
        case notRegular(String)
        /// A writer's temporary file. `inUse` when a writer holds its lock.
        case temporary(inUse: Bool)
        /// With `--key-file`: the file opens with the key, and holds JSON.
        case encrypted
        /// With `--key-file`: the file opens with the key, but what it holds is not JSON. What is wrong in it is not
        /// said: it could quote a byte of the value.
        case encryptedNotJSON
        /// With `--key-file`: the file looks like a value encrypted with the key, but its name is the hash of its
        /// storage key, which the tag authenticates too, so it was not opened.
        case encryptedUnchecked
        /// With `--key-file`: the file does not open with the key, for the reason given.
        case doesNotOpen(String)
        /// With `--key-file`: the file holds JSON that is not encrypted.
        case notEncrypted

        /// The STATE column of `list`.
        var label: String {
            switch self {
            case .json: "json"
            case .empty: "empty"
            case .invalid: "invalid JSON"
            case .sealed(let sealed): "\(sealed); pass --key-file"
            case .tooLarge: "too large"
            case .unreadable: "unreadable"
            case .temporary: "temporary"
            case .movedAside: "moved aside"
            case .keptOriginal: "before type change"
            case .other: "other"
            case .notRegular(let kind): kind
            case .encrypted: "encrypted"
            case .encryptedNotJSON: "encrypted, not JSON"
            case .encryptedUnchecked: "encrypted, not opened"
            case .doesNotOpen: "does not open"
            case .notEncrypted: "not encrypted"
            }
        }
    }

    /// The name as the system gave it.
    var name: [UInt8]
    var status: FileStatus
    var role: Role
    var state: State
    /// The key the file is stored under, when it was given: the name of a hashed file does not say it.
    var storageKey: String?

    /// The name as the tool prints it, escaped (see `printableName(_:)`).
    var printedName: String { printableName(name) }

    /// The KEY column of `list`: the key a file belongs to, `(hashed)` for a digest whose key was not given, `-` for
    /// none.
    var key: String {
        if let storageKey { return printableName(storageKey) }
        guard let base = Self.keyFileName(of: name) else { return "-" }
        if FileName.isDigest(base) { return "(hashed)" }
        return FileName.isPlain(base) ? base : "-"
    }

    /// The entry named `name` in `directory`, or `nil` when it is gone. With `keyFile`, a key file is judged as the
    /// value of an encrypted store: whether it opens with the key, and holds JSON once opened. `storageKey` is the
    /// key the entry belongs to, when it is known; a file named by a hash opens only with it.
    init?(name: [UInt8], in directory: StorageDirectory, keyFile: KeyFile? = nil, storageKey: String? = nil) {
        guard let status = directory.status(ofEntryNamed: name) else { return nil }  // removed since it was listed
        self.name = name
        self.status = status
        self.role = Self.role(of: name)
        self.storageKey = storageKey
        switch role {
        case _ where !status.isRegularFile: state = .notRegular(status.kind.rawValue)
        case .keyFile:
            if let keyFile {
                state = Self.encryptedState(of: name, in: directory, keyFile: keyFile, storageKey: storageKey)
            } else {
                state = Self.contentState(of: name, in: directory)
            }
        case .temporary:
            // A rewrite at work holds the directory's lock exclusively through its exchange, not its file's lock.
            let isExchange = name.hasSuffix(Array(StorageDirectory.exchangeSuffix.utf8))
            state = .temporary(inUse: isExchange ? directory.isLockedExclusively() : Self.isLocked(name, in: directory))
        case .movedAside: state = .movedAside
        case .keptOriginal: state = .keptOriginal
        case .foreign: state = .other
        }
    }

    /// What `name` says an entry is.
    static func role(of name: [UInt8]) -> Role {
        guard let text = String(validating: name, as: UTF8.self) else { return .foreign(isUTF8: false) }
        if FileName.isPlain(text) || FileName.isDigest(text) { return .keyFile }
        if let base = writerTemporaryBase(of: name) { return .temporary(base: base) }
        let base = String(text.prefix { $0 != "~" })
        if StorageDirectory.isMovedAside(text), FileName.isPlain(base) || FileName.isDigest(base) {
            return .movedAside(base: base)
        }
        if StorageDirectory.isKeptOriginal(text) {
            let base = String(text.dropLast(StorageDirectory.keptOriginalSuffix.count))
            if FileName.isPlain(base) || FileName.isDigest(base) { return .keptOriginal(base: base) }
        }
        return .foreign(isUTF8: true)
    }

    /// The name of the key file an entry named `name` is, or belongs to (a temporary, moved-aside or kept file of
    /// it), or `nil` for a name no key maps to.
    static func keyFileName(of name: [UInt8]) -> String? {
        switch role(of: name) {
        case .keyFile: String(decoding: name, as: UTF8.self)
        case .temporary(let base), .movedAside(let base), .keptOriginal(let base): base
        case .foreign: nil
        }
    }

    /// The key file name a writer's temporary file `NAME~XXXXXXXXXXXXXXXX.tmp` (16 lowercase hex digits), or a
    /// rewrite's exchange file `NAME~XXXXXXXXXXXXXXXX-XXXXXXXXXXXXXXXX.xchg`, belongs to, or `nil` for a name of any
    /// other form. `NAME` is the key's file or a copy of it kept aside
    /// (`NAME~before-type-change`, `NAME~corrupt-…`), as the library's clean-up takes them.
    static func writerTemporaryBase(of name: [UInt8]) -> String? {
        guard let text = String(validating: name, as: UTF8.self),
            let written = StorageDirectory.writtenFileName(ofTemporary: text)
        else { return nil }
        return StorageDirectory.keyFileName(of: written)
    }

    /// Whether a writer holds the `flock` of the file `name`: whether a shared lock of it cannot be had now.
    private static func isLocked(_ name: [UInt8], in directory: StorageDirectory) -> Bool {
        guard let file = try? directory.openEntryForReading(named: name) else { return false }
        guard flock(file.descriptor, LOCK_SH | LOCK_NB) == 0 else { return errno == EWOULDBLOCK }
        return false
    }

    private static func contentState(of name: [UInt8], in directory: StorageDirectory) -> State {
        let verdict: StoredFile.Verdict?
        do {
            verdict = try StoredFile.check(name, in: directory)
        } catch {
            return .unreadable(ToolFailure(error).message)
        }
        switch verdict {
        case nil: return .unreadable("the file vanished while it was read")
        case .json: return .json
        case .empty: return .empty
        case .invalid(let problem):
            // Sealed bytes are not JSON from their first byte on; what they are is told rather than why.
            if let sealed = try? SealedValue.description(ofFile: name, in: directory) { return .sealed(sealed) }
            return .invalid(problem.description)
        case .tooLarge: return .tooLarge
        }
    }

    /// What the key file `name` holds, opened with the key of `keyFile`. The storage key a file of a plain name is
    /// stored under is its name; a file named by a hash opens with `storageKey`, and without it is only checked for
    /// the layout and fingerprint of an encrypted value (see ``KeyFile/checkWithoutStorageKey(_:)``).
    private static func encryptedState(
        of name: [UInt8], in directory: StorageDirectory, keyFile: KeyFile, storageKey: String?
    ) -> State {
        let contents: StoredFile.Contents?
        do {
            contents = try StoredFile.read(name, in: directory, sealed: true)
        } catch {
            return .unreadable(ToolFailure(error).message)
        }
        switch contents {
        case nil: return .unreadable("the file vanished while it was read")
        case .tooLarge: return .tooLarge
        case .bytes(let bytes) where bytes.isEmpty: return .empty
        case .bytes(let bytes):
            let text = String(decoding: name, as: UTF8.self)
            let path = directory.filePath(text)
            let opened: KeyFile.Opened
            if let key = storageKey ?? (FileName.isPlain(text) ? text : nil) {
                opened = keyFile.open(bytes, storedUnder: key, path: path)
            } else {
                guard let problem = keyFile.checkWithoutStorageKey(bytes) else { return .encryptedUnchecked }
                opened = problem
            }
            switch opened {
            case .plaintext(let plaintext):
                return JSONText.problem(in: plaintext) == nil ? .encrypted : .encryptedNotJSON
            case .notEncrypted: return .notEncrypted
            case .doesNotOpen(let reason): return .doesNotOpen(reason)
            }
        }
    }
}

extension Array where Element == UInt8 {
    fileprivate func hasSuffix(_ suffix: [UInt8]) -> Bool {
        count >= suffix.count && self[(count - suffix.count)...].elementsEqual(suffix)
    }
}
