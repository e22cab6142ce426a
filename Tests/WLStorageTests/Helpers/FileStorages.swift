import Foundation

@testable import WLStorage

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

/// Flushes `storage` on a Dispatch thread: a flush may wait for a write in flight, which a thread of the concurrency
/// pool must not do.
func flushOffThePool<Value>(_ storage: WLStorage<Value>) async {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async {
            storage.flush()
            continuation.resume()
        }
    }
}
