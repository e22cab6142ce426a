import CWLStorageCurl
import Foundation
import Synchronization

/// etcd's JSON gateway used by hand, for the floors of the etcd cases: one libcurl easy handle per client, kept (its
/// connection stays open between calls), and a watch read as its answer streams in.
final class RawEtcdClient {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// libcurl's global set-up, made once before the first handle.
    private static let ready: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    private let endpoint: String
    private let handle: UnsafeMutableRawPointer
    private var headers: UnsafeMutablePointer<curl_slist>?
    private let received = Received()

    /// What a call received, collected by the write callback.
    final class Received {
        var data = Data()
    }

    init(endpoint: String) throws {
        guard Self.ready, let handle = curl_easy_init() else {
            throw Failure(description: "libcurl could not be set up")
        }
        self.endpoint = endpoint
        self.handle = handle
        headers = curl_slist_append(headers, "Content-Type: application/json")
        headers = curl_slist_append(headers, "Expect:")
        _ = wlstorage_curl_set_long(handle, CURLOPT_POST, 1)
        _ = wlstorage_curl_set_pointer(handle, CURLOPT_HTTPHEADER, headers)
        _ = wlstorage_curl_set_long(handle, CURLOPT_NOSIGNAL, 1)
        _ = wlstorage_curl_set_long(handle, CURLOPT_TIMEOUT_MS, 60_000)
        _ = wlstorage_curl_set_pointer(handle, CURLOPT_WRITEDATA, Unmanaged.passUnretained(received).toOpaque())
        _ = wlstorage_curl_set_write(handle) { data, size, count, context in
            guard let data, let context else { return 0 }
            let received = Unmanaged<Received>.fromOpaque(context).takeUnretainedValue()
            received.data.append(UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: size * count)
            return size * count
        }
    }

    deinit {
        curl_easy_cleanup(handle)
        curl_slist_free_all(headers)
    }

    /// Posts `body` to `path` (`v3/kv/put`, …) and returns the answer of a `200 OK`.
    @discardableResult
    func post(_ path: String, _ body: Data) throws -> Data {
        received.data = Data()
        let code = body.withUnsafeBytes { bytes in
            _ = wlstorage_curl_set_pointer(handle, CURLOPT_URL, endpoint + "/" + path)
            _ = wlstorage_curl_set_pointer(handle, CURLOPT_POSTFIELDS, bytes.baseAddress)
            _ = wlstorage_curl_set_size(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count))
            return curl_easy_perform(handle)
        }
        guard code == CURLE_OK else {
            throw Failure(description: "\(path): \(String(cString: curl_easy_strerror(code)))")
        }
        let status = wlstorage_curl_status(handle)
        guard status == 200 else {
            throw Failure(description: "\(path): HTTP \(status): \(String(decoding: received.data, as: UTF8.self))")
        }
        return received.data
    }

    /// Puts `value` under `key`, one call: the JSON written by hand.
    func put(_ key: String, _ value: String) throws {
        let key = Data(key.utf8).base64EncodedString()
        let value = Data(value.utf8).base64EncodedString()
        let body = #"{"key":""# + key + #"","value":""# + value + #""}"#
        try post("v3/kv/put", Data(body.utf8))
    }
}

/// A watch of one etcd key, or of every key under a prefix, read by hand: a thread of its own runs the `POST /v3/watch`
/// with libcurl, whose write callback splits the streamed answer into lines and notes when each value (an integer)
/// first arrived. `heard`, when given, is called with each new value and its time, on that thread. It runs until the
/// process ends.
final class RawEtcdWatch: Sendable {
    /// Each value received, with the monotonic time it was first received.
    let received = Mutex<[Int: UInt64]>([:])

    private final class Stream {
        var buffer = Data()
        let watch: RawEtcdWatch
        let heard: (@Sendable (Int, UInt64) -> Void)?

        init(watch: RawEtcdWatch, heard: (@Sendable (Int, UInt64) -> Void)?) {
            self.watch = watch
            self.heard = heard
        }

        /// Takes the lines of a chunk received at `now`.
        func take(_ chunk: UnsafeRawBufferPointer, at now: UInt64) {
            buffer.append(contentsOf: chunk)
            while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = buffer[buffer.startIndex..<newline]
                buffer.removeSubrange(buffer.startIndex...newline)
                for value in Self.values(in: Data(line)) {
                    let new = watch.received.withLock { received in
                        guard received[value] == nil else { return false }
                        received[value] = now
                        return true
                    }
                    if new { heard?(value, now) }
                }
            }
        }

        /// The integers the events of one line of a watch's answer put.
        static func values(in line: Data) -> [Int] {
            guard let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any],
                let result = object["result"] as? [String: Any], let events = result["events"] as? [[String: Any]]
            else { return [] }
            return events.compactMap { event in
                guard let kv = event["kv"] as? [String: Any], let text = kv["value"] as? String,
                    let bytes = Data(base64Encoded: text)
                else { return nil }
                return Int(String(decoding: bytes, as: UTF8.self))
            }
        }
    }

    /// Starts watching `key` at `endpoint`, or every key that starts with it when `prefix` is set.
    init(endpoint: String, key: String, prefix: Bool = false, heard: (@Sendable (Int, UInt64) -> Void)? = nil) throws {
        guard let probe = curl_easy_init() else { throw RawEtcdClient.Failure(description: "libcurl") }
        curl_easy_cleanup(probe)
        var range = ""
        if prefix, !key.isEmpty {
            var end = Array(key.utf8)
            end[end.count - 1] += 1  // the keys below the prefix with its last byte raised are those that start with it
            range = #","range_end":""# + Data(end).base64EncodedString() + #"""#
        }
        let body = #"{"create_request":{"key":""# + Data(key.utf8).base64EncodedString() + #"""# + range + "}}"
        let url = endpoint + "/v3/watch"
        Thread.detachNewThread { [self] in
            guard let handle = curl_easy_init() else { return }
            let stream = Stream(watch: self, heard: heard)
            var headers: UnsafeMutablePointer<curl_slist>?
            headers = curl_slist_append(headers, "Content-Type: application/json")
            let bytes = Array(body.utf8)
            withExtendedLifetime(stream) {
                bytes.withUnsafeBytes { bytes in
                    _ = wlstorage_curl_set_pointer(handle, CURLOPT_URL, url)
                    _ = wlstorage_curl_set_long(handle, CURLOPT_POST, 1)
                    _ = wlstorage_curl_set_pointer(handle, CURLOPT_POSTFIELDS, bytes.baseAddress)
                    _ = wlstorage_curl_set_size(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count))
                    _ = wlstorage_curl_set_pointer(handle, CURLOPT_HTTPHEADER, headers)
                    _ = wlstorage_curl_set_long(handle, CURLOPT_NOSIGNAL, 1)
                    _ = wlstorage_curl_set_pointer(
                        handle, CURLOPT_WRITEDATA, Unmanaged.passUnretained(stream).toOpaque())
                    _ = wlstorage_curl_set_write(handle) { data, size, count, context in
                        let now = monotonicNanoseconds()
                        guard let data, let context else { return 0 }
                        Unmanaged<Stream>.fromOpaque(context).takeUnretainedValue().take(
                            UnsafeRawBufferPointer(start: data, count: size * count), at: now)
                        return size * count
                    }
                    _ = curl_easy_perform(handle)
                }
            }
            curl_slist_free_all(headers)
            curl_easy_cleanup(handle)
        }
    }
}
