import Foundation
import WLStorageFiles

/// A directory's file as a ``KeyMedium``: stamped by identity and contents (``KnownVersions/stamp(_:identity:)``);
/// atomic, durable, announced writes; undecodable bytes renamed aside; earlier shapes kept in a file beside it.
struct FileMedium: KeyMedium {
    /// The directory, shared with every backer of the same directory; `nil` when none is available.
    let directory: StorageDirectory?
    /// The file name; `nil` when the key needs hashing and libcrypto cannot hash it.
    let fileName: String?

    func release() {
        if let directory { DirectoryTable.release(directory) }
    }

    var source: MediumSource {
        guard let directory, let fileName else { return .none }
        return .file(directory, name: fileName)
    }

    var savesDefault: Bool { true }

    func place(key: String) -> StoredPlace {
        // Without a directory or a name there are no bytes: the place is named by the file alone.
        guard let directory, let fileName else {
            return StoredPlace(key: key, subject: "the file", file: nil, conceals: false)
        }
        return .file(key: key, fileName, in: directory)
    }

    func entryExists(key: String) -> Bool {
        guard let directory, let fileName else { return false }
        return directory.status(of: fileName) != nil
    }

    private func setupError(key: String) -> WLStorageError {
        directory == nil
            ? WLStorageError(
                code: .directoryUnavailable,
                message: "no storage directory: set WLSTORAGE_DIRECTORY, XDG_DATA_HOME or HOME", key: key)
            : WLStorageError(
                code: .directoryUnavailable, message: "cannot hash the key: OpenSSL SHA-256 is unavailable", key: key)
    }

    /// The prepared directory and file name (``DirectoryTable/prepare(_:waiting:)``), or throws.
    func location(key: String, waiting: Bool = true) throws(WLStorageError) -> (StorageDirectory, String) {
        guard let directory, let fileName else { throw setupError(key: key) }
        do {
            _ = try DirectoryTable.prepare(directory, waiting: waiting)
        } catch {
            throw Self.keyed(error, key)
        }
        return (directory, fileName)
    }

    func read(key: String, prepared: Bool) -> MediumRead {
        do {
            let (directory, fileName) =
                if prepared, let known = self.directory, let name = self.fileName {
                    (known, name)
                } else {
                    // A read, on a storage's creating thread, does not wait for another's lock on the directory.
                    try location(key: key, waiting: false)
                }
            guard let (data, identity) = try directory.readVersion(fileName, limit: ValueSizeLimit.maximum),
                !data.isEmpty
            else { return .absent }
            return .bytes(
                ReadBytes(data: data, stamp: KnownVersions.stamp(data, identity: identity), identity: identity),
                underPreviousKey: false)
        } catch {
            return .failed(Self.keyed(error, key))
        }
    }

    /// A check never moves a file aside: undecodable bytes are reported and left; a non-regular file is no change.
    func readForCheck(key: String) throws(WLStorageError) -> MediumCheck {
        guard let directory, let fileName else { return .unchanged }
        let read: (contents: Data, identity: FileIdentity)?
        do {
            read = try directory.readVersion(fileName, limit: ValueSizeLimit.maximum)
        } catch let error where error.code == .notARegularFile {
            return .unchanged
        } catch {
            throw Self.keyed(error, key)
        }
        // Removed (or emptied): an outside change when the backer knew a stored version.
        guard let (data, identity) = read, !data.isEmpty else { return .bytes(nil) }
        return .bytes(ReadBytes(data: data, stamp: KnownVersions.stamp(data, identity: identity)))
    }

    func write(key: String, replacing: Bool, announced: Bool, encode: () throws(WLStorageError) -> Data)
        throws(WLStorageError) -> (data: Data, stamp: Int)?
    {
        try place(key: key, replacing: replacing, announced: announced, encode: encode)
    }

    /// Writes what `make` makes of the file's bytes (`nil`: none), only while the file is the version read (or none
    /// stands), asking again after a replacement; `nil` when others replaced it in each of a few rounds.
    func write(key: String, announced: Bool, onto make: (Data?) throws(WLStorageError) -> Data?)
        throws(WLStorageError) -> (data: Data, stamp: Int)?
    {
        for _ in 0..<8 {
            let current = try readCurrent(key: key)
            guard let data = try make(current.flatMap { $0.contents.isEmpty ? nil : $0.contents }) else {
                guard let current else { continue }
                return (current.contents, KnownVersions.stamp(current.contents, identity: current.identity))
            }
            let written = try place(
                key: key, replacing: current != nil, announced: announced, ifStill: current?.identity,
                encode: { data })
            if let written { return written }
        }
        return nil
    }

    /// Rewritten only while the file is still the version read or written last; a change since is read instead
    /// (``StorageDirectory/write(_:contents:ifStill:announced:)``).
    func rewrite(key: String, announced: Bool, isLast: (Int) -> Bool, encode: () throws(WLStorageError) -> Data)
        throws -> MediumRewrite
    {
        guard let current = try readCurrent(key: key), !current.contents.isEmpty else { return .gaveWay }
        guard isLast(KnownVersions.stamp(current.contents, identity: current.identity)) else { return .gaveWay }
        guard
            let (data, stamp) = try place(
                key: key, replacing: true, announced: announced, ifStill: current.identity, encode: encode)
        else { return .gaveWay }
        return .written(data, stamp: stamp)
    }

    /// The file's contents and version now, in the prepared directory; `nil` when there is none.
    private func readCurrent(key: String) throws(WLStorageError) -> (contents: Data, identity: FileIdentity)? {
        let (directory, fileName) = try location(key: key)
        do {
            return try directory.readVersion(fileName, limit: ValueSizeLimit.maximum)
        } catch {
            throw Self.keyed(error, key)
        }
    }

    /// A file's version is told by its identity, which the backer reads again for a rewrite.
    func willRewrite(_ read: ReadBytes) {}

    func keepOriginal(_ data: Data, _ reshape: String, key: String) -> WLStorageError? {
        guard let directory, let fileName else { return setupError(key: key) }
        let kept = fileName + StorageDirectory.keptOriginalSuffix
        do throws(WLStorageError) {
            // Made once: an earlier run's copy is kept. Anything but a file at the name keeps nothing.
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
                message:
                    "the file's bytes \(reshape); they could not be kept in \(kept), so the file is left in its old"
                    + " shape: \(error.message)",
                key: key, path: directory.filePath(fileName), errno: error.errno)
        }
    }

    func removeKeptOriginal() throws {
        guard let directory, let fileName else { return }
        _ = try directory.remove(fileName + StorageDirectory.keptOriginalSuffix)
    }

    func keepAside(_ read: ReadBytes, judged: String, type: String, _ error: (any Error)?, key: String) -> KeptAside {
        guard let directory, let fileName else { return .failed(setupError(key: key)) }
        do {
            guard let aside = try directory.moveAside(fileName, ifStill: read.identity) else {
                return .changed(
                    WLStorageError(
                        code: .readFailed,
                        message: "the file does not decode as \(type), and it changed while it was read; it is left"
                            + " in place",
                        key: key, path: directory.filePath(fileName)))
            }
            return .kept(
                WLStorageError(
                    code: .decodingFailed,
                    message: "the file \(judged); it was moved aside to \(aside)",
                    key: key, path: directory.filePath(fileName), underlying: error))
        } catch var failure {
            failure.message = "the file does not decode as \(type), and " + failure.message
            return .failed(Self.keyed(failure, key))
        }
    }

    func keepCopy(_ data: Data, key: String) throws(WLStorageError) -> String {
        let (directory, fileName) = try location(key: key)
        let aside = StorageDirectory.movedAsideName(for: fileName)
        guard try directory.create(aside, contents: data) != nil else {
            throw WLStorageError(
                code: .writeFailed, message: "cannot keep a copy of the file aside: \(aside) exists", key: key,
                path: directory.filePath(fileName))
        }
        return directory.filePath(aside)
    }

    /// Encodes and writes (replacing, where nothing stands, or over `expected` only); the bytes and stamp, or `nil`.
    private func place(
        key: String, replacing: Bool, announced: Bool, ifStill expected: FileIdentity? = nil,
        encode: () throws(WLStorageError) -> Data
    ) throws(WLStorageError) -> (data: Data, stamp: Int)? {
        let (directory, fileName) = try location(key: key)
        let data: Data
        do {
            data = try encode()
        } catch {
            var error = error
            error.path = directory.filePath(fileName)
            throw error
        }
        func attempt() throws(WLStorageError) -> FileIdentity? {
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
                // The directory was removed after it was prepared: make it again, once. Its cells are keyed by what it
                // is now before anything is written there, so that a storage opened at it finds them.
                DirectoryTable.forget(directory)
                Runtime.shared.registry.directoryMade(directory, identity: try DirectoryTable.prepare(directory))
                identity = try attempt()
            }
            guard let identity else { return nil }
            return (data, KnownVersions.stamp(data, identity: identity))
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
