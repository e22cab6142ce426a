import Foundation
import WLStorage

// A batch of writes on condition, as a flush of every storage sends a store's objects: one transaction per chunk of
// the batch, which compares each key's bytes (or, where nothing should be stored, its creation revision) with what its
// write expects, and the fence (with, when a write expects nothing stored, the removals key of its bucket); it puts
// every key when all hold, and reads every key when one does not. A transaction is all or nothing: a write whose key
// does not hold what it expects is refused, and the others are sent again without it.

extension WLStorageEtcdStore {
    /// Stores each write of `batch` only while its key holds the bytes at the same index of `expected` (for `nil`, while
    /// nothing is stored), and returns for each whether it did: in transactions of at most 126 writes (etcd's default
    /// `--max-txn-ops` of comparisons, less the fence's and the removals') and about 1 MiB of keys and values, sent one
    /// after the other. A batch that names a key twice is written one write at a time, by
    /// ``write(key:data:ifItHolds:)``.
    ///
    /// A transaction compares each of its keys, and is fenced as a batch's puts are (see ``write(_:)``): no key from its
    /// first to its last, in byte order, written after the latest revision the store had seen, and, when a write
    /// expects nothing stored, no key of its bucket removed since (a key removed since holds nothing again; see
    /// ``write(key:data:)``): one comparison per bucket, or of every bucket's when they would make more than 128
    /// comparisons with the others. When it is refused, its failure branch reads its keys: a write whose key does not
    /// hold what it expects is refused (`false`), and the others go in a new transaction, fenced at the revision of that
    /// answer, four tries in all; those left then count as refused (their caller writes each on its own, onto what the
    /// key holds). A write too large for a transaction of its own is refused too: written on its own, it is reported as
    /// ``WLStorageError/Code/valueTooLarge``.
    ///
    /// A transaction whose answer was lost is judged by what its keys hold, read in one transaction: it was carried out
    /// when each holds its write's bytes, all written at one revision after the fence's; it was not when one of them was
    /// not written since the fence's revision, and it is then sent again as it is, fence and all, at most once per
    /// endpoint: only one copy can be carried out (the first writes every key, which the others' fence then refuses),
    /// and a copy refused while one of its keys was not written since tells that none was, nor can be. A transaction
    /// that reached no endpoint is sent again with a backoff within the store's timeout from the batch's start.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when a transaction failed, or it is not known whether it
    ///   was carried out; the transactions before it were, those after it were not sent: its
    ///   ``WLStorageError/storedWrites`` counts the writes up to the failed transaction's end (its start, when no copy of
    ///   it reached etcd), and ``WLStorageError/storedAnswers`` gives the answers of those before it.
    public func write(_ batch: [WLStorageStoreWrite], ifTheyHold expected: [Data?]) throws -> [Bool] {
        guard batch.count == expected.count, Set(batch.map(\.key)).count == batch.count else {
            return try zip(batch, expected).map { try write(key: $0.key, data: $0.data, ifItHolds: $1) }
        }
        let deadline = ContinuousClock.now + timeout
        var written = [Bool](repeating: false, count: batch.count)
        // Each key three times (in its comparison, its put and its read), with the prefix; the fence's comparison and
        // the removals' are two operations more.
        let chunks = Self.chunks(count: batch.count, operations: Self.transactionOperations - 2) { index in
            3 * (prefix.count + batch[index].key.utf8.count) + batch[index].data.count + (expected[index]?.count ?? 0)
        }
        for chunk in chunks {
            do throws(WLStorageError) {
                try write(Array(chunk), of: batch, ifTheyHold: expected, until: deadline, written: &written)
            } catch {
                var error = error
                let stored = written.filter { $0 }.count
                error.message += " (a batch of \(batch.count) writes on condition, \(stored) of them stored before it)"
                // The writes after the chunk were not sent, nor were the chunk's when no copy of it reached etcd.
                let unsent = (error.underlying as? EtcdFailure)?.outcome == .notSent
                error.storedWrites = unsent ? chunk.lowerBound : chunk.upperBound
                error.storedAnswers = Array(written[..<chunk.lowerBound])
                throw error
            }
        }
        return written
    }

    /// Writes the writes of `batch` at `indices` on condition, in a transaction (and again for those whose keys hold
    /// what they expect, when it is refused), and marks those stored in `written`.
    private func write(
        _ indices: [Int], of batch: [WLStorageStoreWrite], ifTheyHold expected: [Data?],
        until deadline: ContinuousClock.Instant, written: inout [Bool]
    ) throws(WLStorageError) {
        let keys = indices.map { batch[$0].key }
        // The fence names two keys more.
        let longest = keys.max { $0.utf8.count < $1.utf8.count } ?? ""
        let values = indices.map { batch[$0].data } + indices.compactMap { expected[$0] }
        guard (try? checkSize(of: keys + keys + keys + [longest, longest], values, key: nil)) != nil else {
            return  // Refused: written on its own, the write reports its size.
        }
        try learnRevision(key: nil)
        var pending = indices
        for _ in 0..<Self.fenceTries {
            guard !pending.isEmpty else { return }
            let seen = client.latestRevision
            let etcdKeys = pending.map { etcdKey(batch[$0].key) }
            // A removal since of a key of the bucket of a write where nothing may be stored refuses it, as the fence
            // does: its keys still hold what their writes expect, and go again. One comparison per bucket while they
            // fit, else one of every bucket's.
            let removals = removalsFences(
                of: pending.filter { expected[$0] == nil }.map { batch[$0].key }, at: seen, besides: pending.count + 1)
            let request = TxnRequest(
                compare: zip(etcdKeys, pending).map { Self.comparison(of: $0, holding: expected[$1]) }
                    + [Self.fence(of: etcdKeys, at: seen)] + removals,
                success: zip(etcdKeys, pending).map {
                    RequestOp(requestPut: PutRequest(key: $0, value: batch[$1].data))
                },
                failure: etcdKeys.map { RequestOp(requestRange: RangeRequest(key: $0)) })
            let data = pending.map { batch[$0].data }
            guard let found = try send(request, keys: etcdKeys, data: data, seen: seen, until: deadline) else {
                for index in pending { written[index] = true }
                return
            }
            // Refused: the writes whose keys hold what they expect go again, fenced at the revision of the answer.
            pending = zip(pending, found).filter { index, kv in
                if let bytes = expected[index] { kv.map { ($0.value ?? Data()) == bytes } ?? false } else { kv == nil }
            }.map(\.0)
        }
    }

    /// Sends `request`, the transaction of a batch on condition that puts `data` under `keys` (etcd keys), fenced at
    /// `seen`, until it is answered or judged (see ``write(_:ifTheyHold:)``), and returns `nil` when it (or a copy of it)
    /// was carried out, or else what its failure branch read: each key's entry, `nil` where nothing is stored.
    private func send(
        _ request: TxnRequest, keys: [Data], data: [Data], seen: Int64, until deadline: ContinuousClock.Instant
    ) throws(WLStorageError) -> [KeyValue?]? {
        var sentAgain = 0
        var failures = 0
        while true {
            let answer: TxnResponse
            do throws(EtcdFailure) {
                answer = try client.call("v3/kv/txn", request, resending: false)
            } catch {
                // 10 ms, doubling, up to a quarter of a second, and never past the deadline.
                failures += 1
                let pause = Duration.milliseconds(min(10 << min(failures - 1, 5), 250))
                if error.outcome == .notSent, ContinuousClock.now + pause < deadline {
                    usleep(UInt32(pause / .microseconds(1)))
                    continue
                }
                // Once a copy was sent again, one of those sent before may have been carried out.
                let failed = failure(
                    EtcdFailure(outcome: sentAgain > 0 ? .unknown : error.outcome, description: error.description),
                    reading: false, key: nil)
                guard error.outcome == .unknown, let found = read(keys) else { throw failed }
                switch Self.judge(found, data: data, seen: seen) {
                case .made?: return nil
                case .noWrite? where sentAgain < client.endpoints.count: sentAgain += 1
                default: throw failed
                }
                continue
            }
            if answer.succeeded == true { return nil }
            guard let responses = answer.responses, responses.count == keys.count else {
                throw WLStorageError(
                    code: .writeFailed,
                    message: "\(identity): etcd refused a batch's transaction on condition, and its answer lacks the"
                        + " reads of its keys", path: identity)
            }
            let found = responses.map { $0.responseRange?.kvs?.first }
            guard sentAgain > 0 else { return found }
            switch Self.judge(found, data: data, seen: seen) {
            case .made?: return nil
            case .noWrite?: return found
            default:
                throw WLStorageError(
                    code: .writeFailed,
                    message: "\(identity): a batch's transaction on condition whose answer was lost, sent again, was"
                        + " refused; it is not known whether a copy sent before was carried out", path: identity)
            }
        }
    }

    /// The bytes stored under each of `keys` (`nil`: nothing), read as ``read(key:)`` reads: a transaction of ranges
    /// for each chunk of 128 keys (etcd's default `--max-txn-ops`).
    ///
    /// - Throws: As ``read(key:)``.
    public func read(keys: [String]) throws -> [Data?] {
        var values: [Data?] = []
        for start in stride(from: 0, to: keys.count, by: Self.transactionOperations) {
            let chunk = keys[start..<min(start + Self.transactionOperations, keys.count)]
            let request = TxnRequest(
                compare: [], success: chunk.map { RequestOp(requestRange: RangeRequest(key: etcdKey($0))) })
            let answer: TxnResponse = try perform(reading: true, key: chunk.first) { () throws(EtcdFailure) in
                try client.call("v3/kv/txn", request, resending: true)
            }
            guard let responses = answer.responses, responses.count == chunk.count else {
                throw WLStorageError(
                    code: .readFailed, message: "\(identity): etcd answered a read of \(chunk.count) keys with fewer",
                    path: identity)
            }
            values += responses.map { $0.responseRange?.kvs?.first.map { $0.value ?? Data() } }
        }
        return values
    }

    /// What `keys` (etcd keys) hold, read in one transaction, at one revision: each key's entry, `nil` where nothing is
    /// stored; `nil` when the read failed.
    private func read(_ keys: [Data]) -> [KeyValue?]? {
        let request = TxnRequest(compare: [], success: keys.map { RequestOp(requestRange: RangeRequest(key: $0)) })
        let answer: TxnResponse? = try? client.call("v3/kv/txn", request, resending: true)
        guard let responses = answer?.responses, responses.count == keys.count else { return nil }
        return responses.map { $0.responseRange?.kvs?.first }
    }

    /// What the keys of a transaction fenced at `seen` that puts `data` tell of it, `found` at one revision: `made` when
    /// each holds its bytes, all written at one revision after `seen` (a transaction's puts share its revision);
    /// `noWrite` when one of them was not written since `seen`, so that it was not carried out; `nil` when they cannot
    /// tell (a key removed, or written since by another).
    private static func judge(_ found: [KeyValue?], data: [Data], seen: Int64) -> FirstWrite? {
        var revisions = Set<Int64>()
        var told = true
        for (kv, bytes) in zip(found, data) {
            guard let kv, let modified = kv.modRevision.flatMap({ Int64($0) }) else {
                told = false
                continue
            }
            if modified <= seen { return .noWrite }
            revisions.insert(modified)
            if (kv.value ?? Data()) != bytes { told = false }
        }
        return told && revisions.count == 1 ? .made : nil
    }

    /// The comparison of a write on condition: `etcdKey` holds `expected`, or, for `nil`, nothing (its creation revision
    /// is 0). A comparison of bytes fails where nothing is stored.
    private static func comparison(of etcdKey: Data, holding expected: Data?) -> Compare {
        if let expected {
            return Compare(target: "VALUE", key: etcdKey, value: expected)
        }
        return Compare(target: "CREATE", key: etcdKey, createRevision: "0")
    }

    /// The fence of a transaction of `keys` (etcd keys): no key from the first to the last, in etcd's order, written
    /// after the revision `seen`. One comparison of a range, which any key in it written since fails, one of `keys` or
    /// not: a batch in the keys' order, as the package's flush sends, keeps the range to the transaction's own keys.
    private static func fence(of keys: [Data], at seen: Int64) -> Compare {
        let first = keys.min { $0.lexicographicallyPrecedes($1) } ?? Data()
        let last = keys.max { $0.lexicographicallyPrecedes($1) } ?? Data()
        // The range ends just after its last key.
        return Compare(target: "MOD", key: first, rangeEnd: last + [0], modRevision: String(seen + 1), result: "LESS")
    }
}
