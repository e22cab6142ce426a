import CWLStorageCurl
import Foundation

/// A libcurl easy handle and its open connection, used by one call at a time, pooled by an ``EtcdClient``.
final class CurlHandle: @unchecked Sendable {  // used by one thread at a time: see above
    let pointer: UnsafeMutableRawPointer

    /// A new handle, or `nil` when libcurl cannot make one.
    init?() {
        guard CurlPost.ready, let pointer = curl_easy_init() else { return nil }
        self.pointer = pointer
    }

    deinit {
        curl_easy_cleanup(pointer)
    }
}

/// One `POST` with libcurl's easy interface, on the calling thread, within a number of milliseconds.
enum CurlPost {
    /// libcurl's global set-up, made once before the first handle.
    static let ready: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    /// The body of a request without one.
    private static let empty: StaticString = ""

    /// The answer's bytes, collected by the write callback.
    private final class Received {
        var data = Data()
    }

    /// Posts `body` as JSON to `url`, with `kept` (whose options are reset first, and whose open connection is used
    /// again) or with a handle of its own; returns the answer's status and body.
    ///
    /// - Throws: `EtcdFailure` with `notSent` when no connection was made (refused, no such host, a bad URL), and
    ///   `unknown` when the request may have reached the server (the connection broke, the time ran out).
    static func post(_ url: String, body: Data, milliseconds: Int, with kept: CurlHandle? = nil) throws(EtcdFailure)
        -> (status: Int, body: Data)
    {
        guard let owner = kept ?? CurlHandle() else {
            throw EtcdFailure(outcome: .notSent, description: "libcurl could not be set up")
        }
        let handle = owner.pointer
        if kept != nil { curl_easy_reset(handle) }
        let headers = jsonHeaders()
        defer { curl_slist_free_all(headers) }
        let received = Received()
        let context = Unmanaged.passUnretained(received).toOpaque()
        let socketError = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
        socketError.initialize(to: 0)
        defer { socketError.deallocate() }
        let code: CURLcode = withExtendedLifetime((received, owner)) {
            body.withUnsafeBytes { bytes in
                setPost(handle, url, bytes, headers, connectMilliseconds: milliseconds, socketError: socketError)
                _ = wlstorage_curl_set_long(handle, CURLOPT_TIMEOUT_MS, milliseconds)
                _ = wlstorage_curl_set_pointer(handle, CURLOPT_WRITEDATA, context)
                _ = wlstorage_curl_set_write(handle) { data, size, count, context in
                    guard let data, let context else { return 0 }
                    let received = Unmanaged<Received>.fromOpaque(context).takeUnretainedValue()
                    received.data.append(
                        UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: size * count)
                    return size * count
                }
                return curl_easy_perform(handle)
            }
        }
        guard code == CURLE_OK else {
            // The system's reason when a socket could not be opened: "Too many open files" is not the network's fault.
            let reason = socketReason(socketError.pointee)
            let text = String(cString: curl_easy_strerror(code))
            switch code {
            case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_URL_MALFORMAT,
                CURLE_UNSUPPORTED_PROTOCOL:
                throw EtcdFailure(outcome: .notSent, description: "\(text) (libcurl \(code.rawValue)\(reason))")
            default:
                throw EtcdFailure(outcome: .unknown, description: "\(text) (libcurl \(code.rawValue)\(reason))")
            }
        }
        return (wlstorage_curl_status(handle), received.data)
    }

    /// The headers of a JSON `POST`, to free with `curl_slist_free_all`.
    private static func jsonHeaders() -> UnsafeMutablePointer<curl_slist>? {
        let headers = curl_slist_append(nil, "Content-Type: application/json")
        // No `Expect: 100-continue` round trip before a large body.
        return curl_slist_append(headers, "Expect:")
    }

    /// Sets `handle` to post `bytes` to `url` with `headers`, connecting within `connectMilliseconds`, keeping the
    /// system's reason of a socket that could not be opened in `socketError`.
    private static func setPost(
        _ handle: UnsafeMutableRawPointer, _ url: String, _ bytes: UnsafeRawBufferPointer,
        _ headers: UnsafeMutablePointer<curl_slist>?, connectMilliseconds: Int, socketError: UnsafeMutablePointer<Int32>
    ) {
        _ = wlstorage_curl_set_pointer(handle, CURLOPT_URL, url)
        _ = wlstorage_curl_set_long(handle, CURLOPT_POST, 1)
        _ = wlstorage_curl_set_pointer(
            handle, CURLOPT_POSTFIELDS, bytes.baseAddress ?? UnsafeRawPointer(Self.empty.utf8Start))
        _ = wlstorage_curl_set_size(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count))
        _ = wlstorage_curl_set_pointer(handle, CURLOPT_HTTPHEADER, headers)
        _ = wlstorage_curl_set_long(handle, CURLOPT_CONNECTTIMEOUT_MS, connectMilliseconds)
        // No signals: the handle is used on threads of the program's, where SIGALRM would stop it.
        _ = wlstorage_curl_set_long(handle, CURLOPT_NOSIGNAL, 1)
        _ = wlstorage_curl_keep_socket_errors(handle, socketError)
    }

    /// The system's reason when a socket could not be opened ("Too many open files" is not the network's fault).
    private static func socketReason(_ error: Int32) -> String {
        error == 0 ? "" : "; no socket: \(String(cString: strerror(error)))"
    }

    /// What a streamed answer's callbacks reach: what to do with each chunk, and whether to stop.
    private final class Stream {
        let chunk: (Data) -> Bool
        let stopped: () -> Bool

        init(chunk: @escaping (Data) -> Bool, stopped: @escaping () -> Bool) {
            self.chunk = chunk
            self.stopped = stopped
        }
    }

    /// Posts `body` as JSON to `url` and hands each chunk of the answer to `chunk` as it comes, on the calling thread,
    /// until the answer ends, `chunk` returns `false`, or `stopped` returns `true` (asked about once a second while
    /// nothing comes). No time limit but the connection's, `connectMilliseconds`.
    ///
    /// - Returns: Why it ended: `nil` for an answer that ended by itself with status 200 or was stopped, else the
    ///   error or the status.
    static func stream(
        _ url: String, body: Data, connectMilliseconds: Int, chunk: @escaping (Data) -> Bool,
        stopped: @escaping () -> Bool
    ) -> String? {
        guard let owner = CurlHandle() else { return "libcurl could not be set up" }
        let handle = owner.pointer
        let headers = jsonHeaders()
        defer { curl_slist_free_all(headers) }
        let stream = Stream(chunk: chunk, stopped: stopped)
        let context = Unmanaged.passUnretained(stream).toOpaque()
        let socketError = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
        socketError.initialize(to: 0)
        defer { socketError.deallocate() }
        let code: CURLcode = withExtendedLifetime((stream, owner)) {
            body.withUnsafeBytes { bytes in
                setPost(handle, url, bytes, headers, connectMilliseconds: connectMilliseconds, socketError: socketError)
                _ = wlstorage_curl_set_pointer(handle, CURLOPT_WRITEDATA, context)
                _ = wlstorage_curl_set_write(handle) { data, size, count, context in
                    guard let data, let context else { return 0 }
                    let stream = Unmanaged<Stream>.fromOpaque(context).takeUnretainedValue()
                    let chunk = Data(bytes: data, count: size * count)
                    // Returning less than was given ends the transfer.
                    return stream.chunk(chunk) ? size * count : 0
                }
                _ = wlstorage_curl_set_progress(
                    handle,
                    { context, _, _, _, _ in
                        guard let context else { return 1 }
                        return Unmanaged<Stream>.fromOpaque(context).takeUnretainedValue().stopped() ? 1 : 0
                    }, context)
                return curl_easy_perform(handle)
            }
        }
        let status = wlstorage_curl_status(handle)
        if stopped() || (code == CURLE_OK && status == 200) { return nil }
        if code == CURLE_OK { return "HTTP \(status)" }
        let reason = socketReason(socketError.pointee)
        return "\(String(cString: curl_easy_strerror(code))) (libcurl \(code.rawValue)\(reason))"
    }
}
