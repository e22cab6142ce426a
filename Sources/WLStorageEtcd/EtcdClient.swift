import Dispatch
import Foundation
import WLStorage

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

/// Calls etcd's gRPC JSON gateway (`POST /v3/…` over HTTP/1.1) with libcurl, trying the endpoints in turn from the
/// last one that answered.
final class EtcdClient: @unchecked Sendable {  // `preferred`, `idle` and `revision` under `lock`; the rest is immutable
    let endpoints: [URL]
    let timeout: Duration
    private let lock = NSLock()
    private var preferred = 0
    /// The latest revision of the cluster an answer gave; 0 before the first.
    private var revision: Int64 = 0
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

    /// The latest revision of the cluster that an answer gave (0 before the first): every write made after it has a
    /// greater one.
    var latestRevision: Int64 { lock.withLock { revision } }

    /// Sends `body` to `path` and decodes the answer, within the timeout.
    ///
    /// A request that reached no server is sent to the next endpoint. One whose answer was lost, or that a server
    /// could not carry out for a passing reason (no leader, a timeout of its own), is sent again to the next endpoint
    /// only when `resending`: a conditional write sent twice could find its own bytes the second time and say it did not
    /// store them. Such a call gives each endpoint its share of the time left, and an endpoint that failed (anything
    /// but a refusal) is the last one the next call tries.
    ///
    /// Once the flush at exit has begun, a call that reached no member (or whose answer was lost, when `resending`) is
    /// made again with a backoff (10 ms, doubling up to a quarter of a second) within the timeout: a member restarting
    /// is waited for.
    func call<Body: Encodable, Answer: Decodable>(
        _ path: String, _ body: Body, resending: Bool, as answer: Answer.Type = Answer.self
    ) throws(EtcdFailure) -> Answer {
        let deadline = ContinuousClock.now + timeout
        var failures = 0
        while true {
            do throws(EtcdFailure) {
                return try call(path, body, resending: resending, until: deadline)
            } catch {
                failures += 1
                let pause = Duration.milliseconds(min(10 << min(failures - 1, 5), 250))
                let passes = error.outcome == .notSent || (resending && error.outcome == .unknown)
                guard passes, WLStorageSystem.isFlushingAtExit, ContinuousClock.now + pause < deadline else {
                    throw error
                }
                usleep(UInt32(pause / .microseconds(1)))
            }
        }
    }

    private func call<Body: Encodable, Answer: Decodable>(
        _ path: String, _ body: Body, resending: Bool, until deadline: ContinuousClock.Instant
    ) throws(EtcdFailure) -> Answer {
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
            // A call that may go to the next endpoint keeps time for it: an endpoint that stops answering without a
            // word (a partition, a member that hangs) would take it all.
            let left = endpoints.count - attempt
            let now = ContinuousClock.now
            let attemptDeadline = resending && left > 1 && now < deadline ? now + (deadline - now) / left : deadline
            let data: Data
            do throws(EtcdFailure) {
                data = try send(
                    encoded, to: endpoint, path: path, until: attemptDeadline, reusingConnections: resending)
            } catch {
                // The next call starts from the next endpoint, unless this one answered (a refusal).
                if error.outcome != .refused {
                    lock.withLock { if preferred == index { preferred = (index + 1) % endpoints.count } }
                }
                failures.append("\(EtcdClient.describe(endpoint)): \(error.description)")
                let next = error.outcome == .notSent || (resending && error.outcome == .unknown)
                guard next, attempt + 1 < endpoints.count, ContinuousClock.now < deadline else {
                    throw EtcdFailure(outcome: error.outcome, description: failures.joined(separator: "; "))
                }
                continue
            }
            lock.withLock { preferred = index }
            do {
                let answer = try JSONDecoder.etcd.decode(Answer.self, from: data)
                if let seen = (answer as? any EtcdAnswer)?.header?.revisionNumber, seen > 0 {
                    lock.withLock { revision = max(revision, seen) }
                }
                return answer
            } catch {
                throw EtcdFailure(
                    outcome: .unknown,
                    description: "\(EtcdClient.describe(endpoint)): an answer that does not decode: \(error)")
            }
        }
        throw EtcdFailure(outcome: .notSent, description: failures.joined(separator: "; "))
    }

    /// Sends one request to `endpoint` and returns the body of its `200 OK` answer, with libcurl: etcd's error answers
    /// end with an HTTP trailer, which stops a program that reads them with `URLSession` on Linux (Swift 6.3), and
    /// which libcurl reads as the protocol says.
    ///
    /// With `reusingConnections`, the request goes on a connection kept open by an earlier call, when there is one, and
    /// its handle is kept for the next call once it succeeded. Only for requests that may be sent twice: libcurl sends a
    /// request again, on a new connection, when a kept one turns out closed before any answer came, and it may have
    /// been carried out. A conditional write goes on a connection of its own.
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
            endpoint.absoluteString + "/" + path, body: body,
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
