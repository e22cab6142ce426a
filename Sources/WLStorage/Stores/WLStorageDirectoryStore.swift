import Foundation
import WLStorageCrypto
import WLStorageFiles

/// The default store: each key's value in its own file in a directory, kept by ``WLStorageDefaultBacker``.
public final class WLStorageDirectoryStore: WLStorageStore {
    /// The directory, or `nil` when no directory is available (then every read and write fails, and says why).
    public let url: URL?
    let directory: StorageDirectory?

    /// Whether the store is `.standard`: a key declared with it uses the default directory at each storage's creation.
    let followsDefaultDirectory: Bool

    /// Creates a store of the files in `url`, which is created with mode 0700, with its missing parents, on first use.
    public convenience init(url: URL?) {
        self.init(url: url, followsDefaultDirectory: false)
    }

    init(url: URL?, followsDefaultDirectory: Bool) {
        self.url = url
        self.followsDefaultDirectory = followsDefaultDirectory
        self.directory = url.map(DirectoryTable.directory(for:))
        self.identity = url.map { "file://" + $0.standardizedFileURL.path } ?? "file:(no directory)"
    }

    deinit {
        if let directory { DirectoryTable.release(directory) }
    }

    /// `file://` and the directory's path.
    public let identity: String

    /// The prepared directory (``DirectoryTable/prepare(_:waiting:)``) and `key`'s file.
    func file(_ key: String, waiting: Bool = true) throws(WLStorageError) -> (StorageDirectory, String) {
        try FileMedium(directory: directory, fileName: FileName.forKey(key)).location(key: key, waiting: waiting)
    }

    /// The bytes of `key`'s file, or `nil` when there is none; a file larger than
    /// ``WLStorageSystem/maximumStoredValueSize`` (an encrypted value's, at most) is not read.
    public func read(key: String) throws -> Data? { try read(key: key, limit: ValueSizeLimit.sealedMaximum) }

    func read(key: String, limit: Int) throws -> Data? {
        let (directory, name) = try file(key, waiting: false)
        return try directory.readVersion(name, limit: limit)?.contents
    }

    /// Replaces `key`'s file with `data`, atomically and durably, with mode 0600.
    public func write(key: String, data: Data) throws {
        let (directory, name) = try file(key)
        // Not announced as a storage's own: a storage of the file here reads it as a change.
        _ = try directory.write(name, contents: data, announced: false)
    }

    /// Writes `key`'s file unless one stands there; returns whether it did.
    public func create(key: String, data: Data) throws -> Bool {
        let (directory, name) = try file(key)
        return try directory.create(name, contents: data, announced: false) != nil
    }

    /// Removes `key`'s file, if there is one.
    public func remove(key: String) throws {
        let (directory, name) = try file(key)
        _ = try directory.remove(name)
    }

    /// Removes `key`'s file only while it holds `data`; returns whether it did (a file renamed in meanwhile is left).
    /// The file is read up to the size of `data`, when larger than ``WLStorageSystem/maximumStoredValueSize`` (the
    /// bytes of an encrypted store over an encrypted one).
    public func remove(key: String, ifItHolds data: Data) throws -> Bool {
        let (directory, name) = try file(key)
        let limit = max(ValueSizeLimit.sealedMaximum, data.count)
        guard let current = try directory.readVersion(name, limit: limit), current.contents == data
        else { return false }
        return try directory.remove(name, ifStill: current.identity)
    }

    /// The keys whose files are named by the key itself; keys stored under their hash are not listed.
    public func keys() throws -> [String] {
        guard let directory else { return [] }
        _ = try DirectoryTable.prepare(directory, waiting: false)
        return try directory.entries().filter { FileName.isPlain($0) }.sorted()
    }

    /// Reports the files that change: a key-named file as its key; a hash-named file or lost events as `everything`.
    public func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription?
    {
        guard let directory else { return nil }
        let subscription = Runtime.shared.monitor.subscribe(toEveryFileIn: directory) { event in
            switch event {
            case .file(let name): changed(FileName.isPlain(name) ? .key(name) : .everything)
            case .any: changed(.everything)
            case .directoryGone: break
            }
        }
        return WLStorageSubscription { Runtime.shared.monitor.unsubscribe(subscription) }
    }
}

/// A directory store rewriting on condition of a file's bytes (``StoreCapabilities/rewrites``), putting back others'.
struct DirectoryRewrites: WLStorageConditionalStore, StoreView {
    let store: WLStorageDirectoryStore
    var viewed: any WLStorageStore { store }

    /// Replaces `key`'s file with `data` only while it holds `expected` (or, for `nil`, while there is none).
    func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
        let (directory, name) = try store.file(key)
        guard let expected, !expected.isEmpty else {
            // Empty bytes stand for nothing stored.
            return try directory.create(name, contents: data, announced: false) != nil
        }
        // Read up to the size of `expected` when larger (an encrypted store's over an encrypted one).
        let limit = max(ValueSizeLimit.sealedMaximum, expected.count)
        guard let current = try directory.readVersion(name, limit: limit), current.contents == expected
        else { return false }
        return try directory.write(name, contents: data, ifStill: current.identity, announced: false) != nil
    }
}

extension WLStorageStore where Self == WLStorageDirectoryStore {
    /// The default directory: ``WLStorageSystem/defaultDirectory``, or a `withDefaultDirectory` closure's.
    public static var standard: WLStorageDirectoryStore {
        WLStorageDirectoryStore(url: WLStorageSystem.defaultDirectory, followsDefaultDirectory: true)
    }

    /// The process's default directory, whatever a task set: the store of a key declared with `.standard`.
    static func processStandard() -> WLStorageDirectoryStore {
        WLStorageDirectoryStore(url: StorageLocation.processDefaultDirectory, followsDefaultDirectory: true)
    }

    /// The files in the directory at `url`.
    public static func directory(_ url: URL) -> WLStorageDirectoryStore { WLStorageDirectoryStore(url: url) }

    /// A directory shared by every program of the user that names the same suite, as a suite of `UserDefaults`, in
    /// ``WLStorageSystem/suitesDirectory`` (see <doc:GettingStarted>).
    public static func suite(_ name: String) -> WLStorageDirectoryStore {
        WLStorageDirectoryStore(url: StorageLocation.suiteDirectory(name))
    }
}

extension StorageLocation {
    package static let suitesEnvironmentVariable = "WLSTORAGE_SUITES_DIRECTORY"

    /// What the folders of hashed suite names start with, before the name's SHA-256.
    private static let hashedSuitePrefix = "suite-"

    /// The folder of the suite `name`: the name when plain, else `suite-` and its SHA-256; one to one.
    package static func suiteFolder(_ name: String) -> String {
        let looksHashed =
            name.hasPrefix(hashedSuitePrefix) && FileName.isDigest(String(name.dropFirst(hashedSuitePrefix.count)))
        guard !FileName.isPlain(name) || looksHashed else { return name }
        return hashedSuitePrefix + (SHA256.hexDigest(of: name) ?? "unknown")
    }

    package static func suiteDirectory(
        _ name: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> URL? {
        suitesDirectory(environment: environment)?.appendingPathComponent(suiteFolder(name), isDirectory: true)
    }

    package static func suitesDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        directory(overriddenBy: suitesEnvironmentVariable, environment: environment) { "wlstorage/suites" }
    }
}
