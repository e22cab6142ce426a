// What several suites need of the files and stores they work on, given to a suite by the protocol it adopts.
import Foundation
import Testing
import WLStorageCrypto

@testable import WLStorage

/// A suite of tests over encrypted directory stores, each with a random key of its own.
protocol EncryptedDirectorySuite {
    /// The suite's current key.
    var key: WLStorageEncryptionKey { get }
}

extension EncryptedDirectorySuite {
    /// An encrypted store of `directory` under `key` (the suite's by default) and `previous` keys.
    func store(_ directory: URL, key: WLStorageEncryptionKey? = nil, previous: [WLStorageEncryptionKey] = [])
        -> WLStorageEncryptedStore
    {
        WLStorageEncryptedStore(.directory(directory), key: key ?? self.key, previousKeys: previous)
    }

    /// The bytes of the file `name` in `directory`.
    func file(_ name: String, in directory: URL) -> Data? {
        FileManager.default.contents(atPath: directory.appendingPathComponent(name).path)
    }

    /// Another program's write: a temporary file renamed over the file, as the library writes.
    func writeFromOutside(_ data: Data, _ name: String, in directory: URL) throws {
        let temporary = directory.appendingPathComponent("outside-\(UUID().uuidString).tmp")
        try data.write(to: temporary)
        #expect(rename(temporary.path, directory.appendingPathComponent(name).path) == 0)
    }

    /// The fingerprint a sealed box carries (bytes 5..<9).
    func fingerprint(of sealed: Data?) -> [UInt8]? {
        guard let sealed, sealed.count >= SealedBox.minimumLength else { return nil }
        return Array(sealed.dropFirst(5).prefix(4))
    }

    /// The environment of the test child for its `encrypted` mode: the keys, and what it does.
    func childEnvironment(
        key: WLStorageEncryptionKey, previous: WLStorageEncryptionKey? = nil, action: String
    ) -> [String: String] {
        var environment = ["WLSTORAGE_TEST_ENC_KEY": key.base64EncodedSecret, "WLSTORAGE_TEST_ENC_ACTION": action]
        environment["WLSTORAGE_TEST_ENC_PREVIOUS"] = previous?.base64EncodedSecret
        return environment
    }
}

/// A suite of tests that write and read the files of a directory as another program would.
protocol StoredFileSuite {}

extension StoredFileSuite {
    /// Writes `text` as the file `key` of `directory`.
    func write(_ text: String, key: String, in directory: URL) throws {
        try Data(text.utf8).write(to: directory.appendingPathComponent(key))
    }

    /// Writes `data` as the file `key` of `directory`.
    func write(_ data: Data, key: String, in directory: URL) throws {
        try data.write(to: directory.appendingPathComponent(key))
    }

    /// The text of the file `name` of `directory`.
    func contents(_ name: String, in directory: URL) -> String? {
        FileManager.default.contents(atPath: directory.appendingPathComponent(name).path).map {
            String(decoding: $0, as: UTF8.self)
        }
    }
}
