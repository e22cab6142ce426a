import Foundation
import Synchronization
import WLStorage

/// A store with only what the protocol requires: no writes on condition, no change feed.
final class PlainStore: WLStorageStore {
    let identity = "plain:" + UUID().uuidString
    private let values = Mutex<[String: Data]>([:])

    func put(_ key: String, _ json: String) { values.withLock { $0[key] = Data(json.utf8) } }

    func stored(_ key: String) -> String? {
        values.withLock { $0[key] }.map { String(decoding: $0, as: UTF8.self) }
    }

    func read(key: String) throws -> Data? { values.withLock { $0[key] } }
    func write(key: String, data: Data) throws { values.withLock { $0[key] = data } }
    func remove(key: String) throws { _ = values.withLock { $0.removeValue(forKey: key) } }
    func keys() throws -> [String] { values.withLock { Array($0.keys) } }
}
