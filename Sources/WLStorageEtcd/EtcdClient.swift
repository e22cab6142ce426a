import Dispatch
import Foundation
import WLStorage

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Why a call to etcd failed, and what is known of its effect.
struct EtcdFailure: Error, CustomStringConvertible {
    enum Outcome {
        /// The request reached no server (the connection was refused, the name was not found): nothing was done.
        case notSent
        /// A server refused the request: nothing was done.
        case refused
        /// The request may have been carried out: its answer was lost, or did not come in time.
        case unknown
    }

    var outcome: Outcome
    var description: String
}

/// Calls etcd's gRPC JSON gateway with libcurl, trying the endpoints in turn from the last one that answered.
final class EtcdClient: @unchecked Sendable {  // `preferred` and `idle` under `lock`; the rest is immutable
    let endpoints: [URL]
    let timeout: Duration
    private let lock = NSLock()
    private var preferred = 0
    /// Handles kept between the calls that may be sent again, with their open connections; at most ``keptHandles``.
    private var idle: [CurlHandle] = []
    /// How many handles are kept.
    static let keptHandles = 4

    init(endpoints: [URL], timeout: Duration) {
        self.endpoints = endpoints
        self.timeout = timeout
    }

    /// The endpoint that answered last, to start from.
    var preferredIndex: Int { lock.withLock { preferred } }

    /// Sends `body` to `path` and decodes the answer, within the timeout. A request that reached no server goes to the
    /// next endpoint; one whose answer was lost, or that failed for a passing reason (no leader, a timeout), only when
    /// `resending`: a conditional write sent twice could find its own bytes and say it did not store them.
    func call<Body: Encodable, Answer: Decodable>(
        _ path: String, _ body: Body, resending: Bool, as answer: Answer.Type = Answer.self
    ) throws(EtcdFailure) -> Answer {
        let deadline = ContinuousClock.now + timeout
        let encoded: Data
        do {
            encoded = try JSONEncoder.etcd.encode(body)
        } catch {
            throw EtcdFailure(outcome: .notSent, description: "the request could not be encoded: \(error)")
        }
        let start = preferredIndex
        var failures: [String] = []
        for attempt in 0..<endpoints.count {
            let index = (start + attempt) % endpoints.count
            let endpoint = endpoints[index]
            let data: Data
            do throws(EtcdFailure) {
                data = try send(encoded, to: endpoint, path: path, until: deadline, reusingConnections: resending)
            } catch {
                failures.append("\(EtcdClient.describe(endpoint)): \(error.description)")
                let next = error.outcome == .notSent || (resending && error.outcome == .unknown)
                guard next, attempt + 1 < endpoints.count, ContinuousClock.now < deadline else {
                    throw EtcdFailure(outcome: error.outcome, description: failures.joined(separator: "; "))
                }
                continue
            }
            lock.withLock { preferred = index }
            do {
                return try JSONDecoder.etcd.decode(Answer.self, from: data)
            } catch {
                throw EtcdFailure(
                    outcome: .unknown,
                    description: "\(EtcdClient.describe(endpoint)): an answer that does not decode: \(error)")
            }
        }
        throw EtcdFailure(outcome: .notSent, description: failures.joined(separator: "; "))
    }

    /// Sends one request to `endpoint` and returns the body of its `200 OK` answer, with libcurl, which reads the HTTP
    /// trailer that ends etcd's error answers (`URLSession` on Linux stops at it).
    ///
    /// With `reusingConnections`, the request may go on a connection an earlier call kept open, and its handle is kept
    /// once it got an answer. Only for requests that may be sent twice: libcurl resends on a new connection when a kept
    /// one turns out closed, and the first may have been carried out.
    func send(
        _ body: Data, to endpoint: URL, path: String, until deadline: ContinuousClock.Instant,
        reusingConnections: Bool = false
    ) throws(EtcdFailure) -> Data {
        let remaining = deadline - ContinuousClock.now
        guard remaining > .zero else {
            throw EtcdFailure(outcome: .notSent, description: "the timeout passed before the request was sent")
        }
        let kept = reusingConnections ? lock.withLock { idle.popLast() } ?? CurlHandle() : nil
        let (status, bytes) = try CurlPost.post(
            endpoint.appendingPathComponent(path).absoluteString, body: body,
            milliseconds: max(1, Int(remaining.seconds * 1000)), with: kept)
        if let kept {
            // Kept only after a call that got an answer: one that failed may leave its connection in any state.
            let dropped: CurlHandle? = lock.withLock {
                guard idle.count < Self.keptHandles else { return kept }
                idle.append(kept)
                return nil
            }
            _ = dropped
        }
        guard status == 200 else {
            let failure = try? JSONDecoder.etcd.decode(GatewayError.self, from: bytes)
            let text = failure?.text ?? String(decoding: bytes.prefix(200), as: UTF8.self)
            // gRPC 1 (cancelled: the gateway's connection to its member is closing), 4 (deadline exceeded) and 14
            // (unavailable: no leader, stopping) say nothing of whether a write was carried out, nor does an answer
            // without a gRPC status from a server in trouble or a proxy; anything else is a refusal.
            let passing =
                if let status = failure?.status {
                    [1, 4, 14].contains(status)
                } else {
                    status >= 500 || status == 408
                }
            throw EtcdFailure(outcome: passing ? .unknown : .refused, description: "HTTP \(status): \(text)")
        }
        return bytes
    }

    /// Whether a request that failed with `error` reached a server.
    static func outcome(of error: any Error) -> EtcdFailure.Outcome {
        guard let error = error as? URLError else { return .unknown }
        switch error.code {
        case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet, .badURL,
            .unsupportedURL, .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
            .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot, .clientCertificateRejected:
            return .notSent
        default:
            return .unknown
        }
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? URLError {
            return "\(error.localizedDescription) (URLError \(error.code.rawValue))"
        }
        return String(describing: error)
    }

    /// `scheme://host:port` of an endpoint, as it appears in messages.
    static func describe(_ endpoint: URL) -> String {
        endpoint.absoluteString
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) * 1e-18
    }
}
