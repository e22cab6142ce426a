import Foundation
import WLStorage

extension WLStoragePostgresStore {
    /// The most bytes of a payload; PostgreSQL refuses 8,000 or more.
    static let payloadLimit = 7_900

    /// The start of the payload announcing a write of `key` in `namespace`, to which the statement appends the version
    /// and, when the whole fits in ``payloadLimit``, the bytes as stored:
    /// `*:<bytes of namespace>:<namespace>c<bytes of key>:<key><version>.<table OID>[:<Base64 of the bytes>]`; a key
    /// too long gives the prefix alone. Starting with `*:`, it is a change of every key to an older program (which
    /// knows only `k:` and `*:`), so a rolling deploy misses nothing.
    static func payload(namespace: String, key: String) -> String {
        let prefix = "*:\(namespace.utf8.count):\(namespace)"
        let payload = prefix + "c\(key.utf8.count):" + key
        // The statement adds up to 34 bytes of version, table OID and separators.
        return payload.utf8.count + 34 <= payloadLimit ? payload : prefix
    }

    /// The payload that announces the removal of `key` in `namespace`: `k:<bytes of namespace>:<namespace><key>`, a
    /// change that the storages of the key read; or, when that is too long, `*:<bytes of namespace>:<namespace>`.
    static func removalPayload(namespace: String, key: String) -> String {
        let prefix = "\(namespace.utf8.count):\(namespace)"
        let payload = "k:" + prefix + key
        return payload.utf8.count <= payloadLimit ? payload : "*:" + prefix
    }

    /// The change a payload announces for `namespace`, or `nil` for another namespace or not a payload of the store's.
    /// A write's payload whose version or bytes do not parse, or that names another table than `table` (its OID;
    /// `nil`: unknown), is a change of its key, to read; the rest of a `*:` payload that carries nothing is ignored.
    static func change(fromPayload payload: String, namespace: String, table: String?) -> WLStorageFeedEvent? {
        // Parsed in place, on the string's contiguous UTF-8: every change a replica hears passes here.
        var payload = payload
        return payload.withUTF8 { change(fromPayload: $0, namespace: namespace, table: table) }
    }

    private static func change(
        fromPayload bytes: UnsafeBufferPointer<UInt8>, namespace: String, table: String?
    ) -> WLStorageFeedEvent? {
        let kind = bytes.first
        guard bytes.count >= 4, kind == UInt8(ascii: "k") || kind == UInt8(ascii: "*"), bytes[1] == UInt8(ascii: ":"),
            let (namespaceRange, rest) = lengthPrefixed(bytes, from: 2),
            bytes[namespaceRange].elementsEqual(namespace.utf8)
        else { return nil }
        if kind == UInt8(ascii: "k") { return .change(.key(String(decoding: bytes[rest...], as: UTF8.self))) }
        guard rest < bytes.count, bytes[rest] == UInt8(ascii: "c"),
            let (keyRange, carriedStart) = lengthPrefixed(bytes, from: rest + 1)
        else { return .change(.everything) }
        let key = String(decoding: bytes[keyRange], as: UTF8.self)
        let colon = bytes[carriedStart...].firstIndex(of: UInt8(ascii: ":")) ?? bytes.count
        // `<version>.<table OID>`: two parts between dots, empty ones left out.
        let parts = bytes[carriedStart..<colon].split(separator: UInt8(ascii: "."))
        guard parts.count == 2, let version = Int64(String(decoding: parts[0], as: UTF8.self)), version > 0,
            let table, parts[1].elementsEqual(table.utf8)
        else { return .change(.key(key)) }
        guard colon < bytes.count else {
            return .carried(WLStorageCarriedChange(key: key, version: version, data: nil))
        }
        guard let data = Data(base64Encoded: Data(buffer: UnsafeBufferPointer(rebasing: bytes[(colon + 1)...]))) else {
            return .change(.key(key))
        }
        return .carried(WLStorageCarriedChange(key: key, version: version, data: data))
    }

    /// The range of the bytes of `<length>:<bytes>` starting at `start` in `bytes`, and where what follows starts.
    private static func lengthPrefixed(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> (Range<Int>, Int)? {
        guard start < bytes.count, let colon = bytes[start...].firstIndex(of: UInt8(ascii: ":")),
            colon > start, colon - start <= 6,
            let length = Int(String(decoding: bytes[start..<colon], as: UTF8.self)),
            length >= 0, length <= bytes.count - colon - 1
        else { return nil }
        return (colon + 1..<colon + 1 + length, colon + 1 + length)
    }
}

/// Every write's notification carries the row's new version, and its bytes when they fit: a replica that knows the
/// version before adopts them without reading the row (see ``WLStorageCarriedChange``).
extension WLStoragePostgresStore: WLStorageCarryingStore {
    /// The feed of ``observeChanges(_:)``, with what the notifications carry.
    public func observeCarriedChanges(_ changed: @escaping @Sendable (WLStorageFeedEvent) -> Void)
        -> WLStorageSubscription?
    {
        let listener = self.listener
        // The listener passes on the bytes of the senders it trusts only (see `PostgresListener`).
        let id = listener.add(changed)
        return WLStorageSubscription { listener.remove(id) }
    }
}
