// A mode of the test child for the encryption tests: a storage of an encrypted store, in another process.
import Foundation
import WLStorage

/// `encrypted`: the key (and an optional previous key) are base64 text in WLSTORAGE_TEST_ENC_KEY and
/// WLSTORAGE_TEST_ENC_PREVIOUS; WLSTORAGE_TEST_ENC_ACTION says what to do:
/// - `exit`: a pending change of an encrypted storage, then `exit(0)`;
/// - `plain-first-exit`: the same, after a plain storage was created before the key was loaded;
/// - `wait`: a pending change, then wait for a signal;
/// - `hold`: read the value, print it, and keep the storage until killed.
func encryptedMode(directory: URL, key: String, value: String) -> Never {
    let environment = ProcessInfo.processInfo.environment
    let action = environment["WLSTORAGE_TEST_ENC_ACTION"] ?? "wait"
    var plain: WLStorage<String>?
    if action == "plain-first-exit" {
        plain = WLStorage(key: "plain", defaultValue: "", flushInterval: 3_600, store: .directory(directory))
        plain?.flush()
    }
    do {
        let current = try WLStorageEncryptionKey(environmentVariable: "WLSTORAGE_TEST_ENC_KEY")
        let previous = try environment["WLSTORAGE_TEST_ENC_PREVIOUS"].map { _ in
            try WLStorageEncryptionKey(environmentVariable: "WLSTORAGE_TEST_ENC_PREVIOUS")
        }
        let store = WLStorageEncryptedStore(
            .directory(directory), key: current, previousKeys: previous.map { [$0] } ?? [])
        let stored = WLStorage(key: key, defaultValue: "", flushInterval: 3_600, store: store)
        switch action {
        case "hold":
            say("value \(stored.wrappedValue)")
            say("ready")
            while true { pause() }
        default:
            stored.flush()
            stored.wrappedValue = value
            plain?.wrappedValue = value
            say("ready")
            if action == "wait" {
                while true { pause() }
            }
            exit(0)
        }
    } catch {
        say("error \(error)", to: FileHandle.standardError)
        exit(70)
    }
}
