import Foundation

// The messages of etcd's v3 API as its gRPC JSON gateway takes and gives them: field names in snake case, bytes
// (keys, values) in Base64 (`Data`'s own coding), 64-bit integers as decimal strings, fields at their zero value left
// out of answers.

struct RangeRequest: Encodable {
    var key: Data
    var rangeEnd: Data?
    var limit: String?
    var revision: String?
    var keysOnly: Bool?
    var countOnly: Bool?
    enum CodingKeys: String, CodingKey {
        case key, rangeEnd = "range_end", limit, revision, keysOnly = "keys_only", countOnly = "count_only"
    }
}

struct PutRequest: Encodable {
    var key: Data
    var value: Data
}

struct DeleteRangeRequest: Encodable {
    var key: Data
    var rangeEnd: Data?
    enum CodingKeys: String, CodingKey { case key, rangeEnd = "range_end" }
}

struct Compare: Encodable {
    /// `VALUE`, `CREATE` or `MOD`.
    var target: String
    var key: Data
    /// The end of the range of keys compared (each of them), from `key`; `nil` for `key` alone.
    var rangeEnd: Data?
    /// Compared with the key's bytes. A comparison of bytes fails where nothing is stored.
    var value: Data?
    /// Compared with the revision the key was created at: `0` where nothing is stored.
    var createRevision: String?
    /// Compared with the revision the key was last written at.
    var modRevision: String?
    var result = "EQUAL"
    enum CodingKeys: String, CodingKey {
        case target, key, rangeEnd = "range_end", value, createRevision = "create_revision"
        case modRevision = "mod_revision", result
    }
}

struct RequestOp: Encodable {
    var requestRange: RangeRequest?
    var requestPut: PutRequest?
    var requestDeleteRange: DeleteRangeRequest?
    enum CodingKeys: String, CodingKey {
        case requestRange = "request_range", requestPut = "request_put", requestDeleteRange = "request_delete_range"
    }
}

struct TxnRequest: Encodable {
    var compare: [Compare]
    var success: [RequestOp]
    var failure: [RequestOp]?
}

struct WatchCreateRequest: Encodable {
    struct Create: Encodable {
        var key: Data
        var rangeEnd: Data
        var startRevision: String?
        enum CodingKeys: String, CodingKey { case key, rangeEnd = "range_end", startRevision = "start_revision" }
    }
    var createRequest: Create
    enum CodingKeys: String, CodingKey { case createRequest = "create_request" }
}

struct ResponseHeader: Decodable {
    var clusterId: String?
    var revision: String?

    var revisionNumber: Int64 { revision.flatMap { Int64($0) } ?? 0 }
    enum CodingKeys: String, CodingKey { case clusterId = "cluster_id", revision }
}

struct KeyValue: Decodable {
    var key: Data
    var value: Data?
    var modRevision: String?
    /// The key's version: 1 when it is made, one more at every put, and the key made anew after a delete starts again.
    var version: String?
    /// The revision at which the key was made (made anew after a delete, it has a later one).
    var createRevision: String?
    enum CodingKeys: String, CodingKey {
        case key, value, modRevision = "mod_revision", version, createRevision = "create_revision"
    }
}

/// An answer with etcd's header, whose revision is the cluster's when it answered.
protocol EtcdAnswer: Decodable {
    var header: ResponseHeader? { get }
}

struct RangeResponse: EtcdAnswer {
    var header: ResponseHeader?
    var kvs: [KeyValue]?
    var more: Bool?
}

struct WriteResponse: EtcdAnswer {
    var header: ResponseHeader?
}

/// A transaction's answer without the answers to its operations, which a batch's puts do not need decoded.
struct TxnOutcome: EtcdAnswer {
    var header: ResponseHeader?
    var succeeded: Bool?
}

struct TxnResponse: EtcdAnswer {
    struct Response: Decodable {
        var responseRange: RangeResponse?
        enum CodingKeys: String, CodingKey { case responseRange = "response_range" }
    }
    var header: ResponseHeader?
    var succeeded: Bool?
    /// The answers to the operations of the branch carried out, in order (reads' only are decoded).
    var responses: [Response]?
}

/// One line of a watch's answer: a response, or the error that ended the stream.
struct WatchLine: Decodable {
    struct Result: Decodable {
        struct Event: Decodable {
            /// `DELETE` for a removal; absent for a put (etcd leaves out a field that holds its default).
            var type: String?
            var kv: KeyValue?
        }
        var header: ResponseHeader?
        var created: Bool?
        var canceled: Bool?
        var compactRevision: String?
        var cancelReason: String?
        var events: [Event]?
        enum CodingKeys: String, CodingKey {
            case header, created, canceled, compactRevision = "compact_revision", cancelReason = "cancel_reason", events
        }
    }
    var result: Result?
    var error: GatewayError?
}

/// What the gateway answers with an HTTP status other than 200, or ends a stream with.
struct GatewayError: Decodable {
    /// The gRPC status code: 1 (cancelled), 4 (deadline exceeded) and 14 (unavailable) are passing troubles.
    var code: Int?
    var grpcCode: Int?
    var message: String?
    var error: String?

    var text: String { message ?? error ?? "no message" }
    var status: Int? { code ?? grpcCode }
    enum CodingKeys: String, CodingKey { case code, grpcCode = "grpc_code", message, error }
}

extension JSONEncoder {
    /// Field names are spelled out by each message's coding keys: a conversion of every key (`convertToSnakeCase`)
    /// took a third of the time a batch's transaction took to encode.
    static let etcd = JSONEncoder()
}

extension JSONDecoder {
    static let etcd = JSONDecoder()
}
