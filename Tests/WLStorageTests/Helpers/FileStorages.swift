import Foundation

@testable import WLStorage
@testable import WLStorageFiles

/// A storage of `key` in `directory` with the default backer.
func fileStorage<T: Codable & Sendable>(
    _ key: String, in directory: URL, default value: T, flushInterval: Int? = 1
) -> WLStorage<T> {
    ReportedErrors.install()
    return WLStorage(
        defaultValueClosure: { value }, flushInterval: flushInterval,
        backer: WLStorageDefaultBacker<T>(key: key, directory: directory))
}

/// The decoded content of the file of `key` in `directory`.
func stored<T: Decodable>(_ type: T.Type, key: String, in directory: URL) -> T? {
    let url = directory.appendingPathComponent(FileName.forKey(key)!)
    guard let data = FileManager.default.contents(atPath: url.path) else { return nil }
    return try? JSONDecoder().decode(T.self, from: data)
}

/// Flushes `storage` on a thread of its own: a flush may wait for a write in flight, which a thread of the concurrency
/// pool must not do.
func flushOffThePool<Value>(_ storage: WLStorage<Value>) async {
    await withCheckedContinuation { continuation in
        startThread {
            storage.flush()
            continuation.resume()
        }
    }
}

/// Whether `storage`'s cell has no job running and no check asked for: every check for another program's change asked
/// for so far has ended. A test waits for this rather than for a fixed time.
func hasNoCheckLeft<Value>(_ storage: WLStorage<Value>) -> Bool {
    storage.cell.state.withLock { !$0.isBusy && !($0.extras?.checkRequested ?? false) }
}
