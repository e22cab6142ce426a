import Foundation
import WLStorage

// A write that reaches etcd late (a network that held it for seconds while its caller gave up, sent it again
// elsewhere, and wrote newer values) must not be carried out over what came after it. Every write of one key but an
// update's (which compares the key's `mod_revision` itself) is a transaction that also compares the key's
// `mod_revision` with the latest revision of the cluster the store had seen when it sent it: any write made after that
// has a greater one, so the late write finds the key written since, and does nothing.
//
// A key removed since holds nothing, and has no revision to compare: a write where nothing may be stored (a put, a
// write on condition that nothing is, a batch's) would pass the fence and put the key back. etcd has no comparison
// that a removal since a revision fails, so every removal by the store also writes an etcd key of its namespace,
// `wlstorage-removals/<escaped namespace>/<bucket>`, in the transaction that removes: one of 64, by a hash of the key
// removed. A write of one key also compares its bucket's `mod_revision` with the same revision, and a removal since of
// a key of that bucket refuses it as the fence does; a batch's transaction compares the buckets of its keys (all of
// them at once when one comparison each would pass etcd's limit). One key for the whole namespace refused a write at
// each of its tries whenever another program removed keys of the namespace more often than a round trip takes (a
// fleet, a slow link): a write on condition of nothing stored was then reported as finding something stored. The keys
// are outside the range of the namespace's keys: neither `keys()`, `entries()` nor the feed names them; there are 64
// at most.

extension WLStorageEtcdStore {
    /// How many times a write is sent with the fence when the key was written after the latest revision the store had
    /// seen (by another program, or by this one's write sent twice); each answer brings a later revision.
    static let fenceTries = 4

    /// How many removals keys a namespace has at most: a removal writes the one of its key's bucket.
    static let removalBuckets: UInt32 = 64

    /// The start of the namespace's removals keys, `wlstorage-removals/<escaped namespace>/`: outside the range of the
    /// namespace's keys (which start `wlstorage/`), and of every other namespace's (an escaped namespace holds no `/`).
    var removalsPrefix: Data {
        Data("wlstorage-removals/".utf8) + prefix.dropFirst("wlstorage/".utf8.count)
    }

    /// The removals key of `key`'s bucket, which every removal of a key of that bucket by the store writes in its
    /// transaction: ``removalsPrefix`` and the bucket (FNV-1a, 32 bits, of the key's UTF-8 bytes, modulo
    /// ``removalBuckets``) in two hexadecimal digits. Its `mod_revision` is the revision of the bucket's last removal.
    func removalsKey(_ key: String) -> Data {
        let hash = key.utf8.reduce(UInt32(2_166_136_261)) { ($0 ^ UInt32($1)) &* 16_777_619 }
        let bucket = hash % Self.removalBuckets
        let digits = Array("0123456789abcdef".utf8)
        return removalsPrefix + [digits[Int(bucket / 16)], digits[Int(bucket % 16)]]
    }

    /// The write of `key`'s removals key that a removal's transaction makes (empty bytes: only its revision tells).
    func removalMark(_ key: String) -> RequestOp {
        RequestOp(requestPut: PutRequest(key: removalsKey(key), value: Data()))
    }

    /// The comparison that no key of `key`'s bucket was removed after the revision `seen`: its removals key's
    /// `mod_revision` is at most `seen` (0 when no removal wrote it).
    func removalsFence(of key: String, at seen: Int64) -> Compare {
        Compare(target: "MOD", key: removalsKey(key), modRevision: String(seen + 1), result: "LESS")
    }

    /// The comparison that no key of the namespace was removed after the revision `seen`: every removals key's
    /// `mod_revision` is at most `seen`, in one comparison of their range.
    func removalsFence(at seen: Int64) -> Compare {
        // The range ends where `/` is followed by `0`.
        Compare(
            target: "MOD", key: removalsPrefix, rangeEnd: removalsPrefix.dropLast() + [UInt8(ascii: "0")],
            modRevision: String(seen + 1), result: "LESS")
    }

    /// The comparisons that no key of the buckets of `keys` was removed after the revision `seen`: one per bucket, while
    /// they and `others` comparisons make at most etcd's 128; else one of every bucket's (``removalsFence(at:)``). None
    /// for no key.
    func removalsFences(of keys: [String], at seen: Int64, besides others: Int) -> [Compare] {
        guard !keys.isEmpty else { return [] }
        let buckets = Set(keys.map { removalsKey($0) }).sorted { $0.lexicographicallyPrecedes($1) }
        guard others + buckets.count <= Self.transactionOperations else { return [removalsFence(at: seen)] }
        return buckets.map { Compare(target: "MOD", key: $0, modRevision: String(seen + 1), result: "LESS") }
    }

    /// Runs `operations` in one transaction on condition of `conditions` and of the fence: the key's `mod_revision` is
    /// at most the latest revision the store has seen (a store that has seen none reads one first), and, with
    /// `fencingRemovals` (a write that may find nothing stored), no removal of a key of its bucket was made since. When
    /// only the fence failed, it tries again with the revision of that answer; a refusal by a removal (which a write
    /// with conditions reads) is no try, within the store's timeout.
    ///
    /// A key that other programs write without a pause can fail the fence at every try: a write without conditions is
    /// then sent once more without the fence (a plain write, which other writers' writes may follow in any order), and
    /// one with conditions is not stored (`false`), as when they do not hold.
    ///
    /// - Returns: The answer of the transaction carried out, or `nil` when it was not.
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when a transaction failed, or it is not known whether it
    ///   was carried out.
    func fenced(
        key: String, conditions: [Compare], operations: [RequestOp], resending: Bool, fencingRemovals: Bool
    ) throws(WLStorageError) -> TxnResponse? {
        let etcdKey = etcdKey(key)
        try learnRevision(key: key)
        let deadline = ContinuousClock.now + timeout
        var attempt = 0
        while attempt <= Self.fenceTries {
            let seen = client.latestRevision
            var compare = conditions
            if attempt < Self.fenceTries {
                compare.append(Compare(target: "MOD", key: etcdKey, modRevision: String(seen + 1), result: "LESS"))
                if fencingRemovals { compare.append(removalsFence(of: key, at: seen)) }
            } else if !conditions.isEmpty {
                return nil
            }
            // A refusal reads the key (and the removals key), to tell the fence's from the conditions'; without
            // conditions, only the fence refuses, and the refusal's revision is at least the key's (and the removals
            // key's).
            var reads = [RequestOp(requestRange: RangeRequest(key: etcdKey))]
            if fencingRemovals { reads.append(RequestOp(requestRange: RangeRequest(key: removalsKey(key)))) }
            let request = TxnRequest(
                compare: compare, success: operations, failure: conditions.isEmpty ? nil : reads)
            // A put on conditions whose answer was lost: the key's history tells, when it can. When it tells of no
            // write since `seen`, the same transaction is sent again, fence and all (to the next endpoint first): of
            // the copies, only one can be carried out, as the key's first write after `seen`, and the first one,
            // delivered late, does nothing once another was.
            let judged = !conditions.isEmpty && operations.count == 1 ? operations[0].requestPut : nil
            var sentAgain = 0
            var sent: TxnResponse?
            while sent == nil {
                do {
                    sent = try client.call("v3/kv/txn", request, resending: resending) as TxnResponse
                } catch {
                    guard error.outcome == .unknown, let put = judged else {
                        throw failure(error, reading: false, key: key)
                    }
                    switch firstWrite(since: seen, of: etcdKey, was: put.value) {
                    case .made?: return TxnResponse(succeeded: true)
                    case .another?: return nil
                    case .noWrite? where sentAgain < client.endpoints.count: sentAgain += 1
                    default: throw failure(error, reading: false, key: key)
                    }
                }
            }
            guard let answer = sent else { break }
            if answer.succeeded == true { return answer }
            let modified =
                conditions.isEmpty
                ? answer.header?.revisionNumber ?? 0
                : answer.responses?.first?.responseRange?.kvs?.first?.modRevision.flatMap { Int64($0) } ?? 0
            // A copy sent before this one may have been carried out.
            if sentAgain > 0, modified > seen, let put = judged,
                firstWrite(since: seen, of: etcdKey, was: put.value) == .made
            {
                return TxnResponse(succeeded: true)
            }
            // Refused by a removal of a key of its bucket since `seen`, as by the fence: it goes again, fenced at the
            // revision of the answer. Unless a copy sent before may have been carried out, and its key removed since.
            // Not counted as a try within the store's timeout: removals of other keys of the bucket, more frequent
            // than a round trip (a fleet, a slow link), would refuse every try.
            let removals = fencingRemovals ? answer.responses?.dropFirst().first?.responseRange?.kvs?.first : nil
            if let removed = removals?.modRevision.flatMap({ Int64($0) }), removed > seen {
                guard sentAgain == 0 else {
                    let unknown = EtcdFailure(
                        outcome: .unknown,
                        description: "a copy of the write sent again was refused by a removal made since; one sent"
                            + " before may have been carried out")
                    throw failure(unknown, reading: false, key: key)
                }
                if ContinuousClock.now >= deadline { attempt += 1 }
                continue
            }
            // Refused by its own conditions, not by the fence.
            guard modified > seen else {
                if conditions.isEmpty { break }
                return nil
            }
            attempt += 1
        }
        // Without conditions of its own, only the fence can refuse, and a refusal says what came after it.
        throw WLStorageError(
            code: .writeFailed, message: "\(identity): etcd refused the write without saying why; nothing was stored",
            key: key, path: identity)
    }

    /// Whether the first write of `etcdKey` after the revision `seen` put `data`, read back through the key's history
    /// from its current version: a put fenced at `seen` whose answer was lost was carried out only as that first write
    /// (the fence refuses it after any other, so one found not to be can never be). `noWrite` when there was no write
    /// since (the put may still arrive); `nil` when the history cannot tell: the key removed meanwhile, more than a few
    /// writes since, the revisions needed compacted, or etcd not reached.
    func firstWrite(since seen: Int64, of etcdKey: Data, was data: Data) -> FirstWrite? {
        var (revision, first): (Int64?, Data?) = (nil, nil)
        for _ in 0..<16 {
            let request = RangeRequest(key: etcdKey, revision: revision.map { String($0) })
            let answer: RangeResponse? = try? client.call("v3/kv/range", request, resending: true)
            guard let found = answer?.kvs?.first, let modified = found.modRevision.flatMap({ Int64($0) }) else {
                return nil
            }
            if modified <= seen { return first.map { $0 == data ? .made : .another } ?? .noWrite }
            (revision, first) = (modified - 1, found.value ?? Data())
        }
        return nil
    }

    /// What the key's history tells of a put fenced at a revision: ``firstWrite(since:of:was:)``.
    enum FirstWrite {
        /// The key's first write after it put the put's bytes: the put was carried out.
        case made
        /// Another write came first: the put can never be carried out.
        case another
        /// No write since: the put may still arrive.
        case noWrite
    }

    /// Runs the puts of one transaction of a batch on condition that none of `keys` (distinct) was written after the
    /// latest revision the store has seen, and no key of their buckets was removed since (a key of the batch removed
    /// since holds nothing, and passes the fence; one comparison per bucket while they fit, else of every bucket's);
    /// when one was, tries again with the revision of that answer, and at the last try without the fence, as
    /// ``fenced(key:conditions:operations:resending:fencingRemovals:)`` does for a put.
    ///
    /// The first try compares the keys from the first of `keys` to the last, in etcd's order, as one range, and every
    /// bucket's removals key as another: etcd checks one comparison of a range in a fraction of the time it takes for
    /// one comparison per key (a batch of 1,000 keys took 7% longer with one per bucket). Any key of the range written
    /// since, or any key of the namespace removed, refuses it; the next tries compare the batch's keys and their
    /// buckets one by one.
    ///
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when the transaction failed, or it is not known whether
    ///   it was carried out.
    func fencedBatch(_ names: [String], operations: [RequestOp]) throws(WLStorageError) {
        try learnRevision(key: nil)
        let keys = names.map(etcdKey)
        let first = keys.min { $0.lexicographicallyPrecedes($1) }
        let last = keys.max { $0.lexicographicallyPrecedes($1) }
        for attempt in 0...Self.fenceTries {
            let seen = client.latestRevision
            let revision = String(seen + 1)
            let compare =
                if attempt == 0, keys.count > 1, let first, let last {
                    // The range ends just after its last key.
                    [Compare(target: "MOD", key: first, rangeEnd: last + [0], modRevision: revision, result: "LESS")]
                        + [removalsFence(at: seen)]
                } else if attempt < Self.fenceTries {
                    keys.map { Compare(target: "MOD", key: $0, modRevision: revision, result: "LESS") }
                        + removalsFences(of: names, at: seen, besides: keys.count)
                } else {
                    [Compare]()
                }
            let request = TxnRequest(compare: compare, success: operations)
            let answer: TxnOutcome = try perform(reading: false, key: nil) { () throws(EtcdFailure) in
                try client.call("v3/kv/txn", request, resending: true)
            }
            if answer.succeeded == true { return }
            // Only the fence can refuse, and the refusal's answer brings a later revision.
            guard client.latestRevision > seen else { break }
        }
        throw WLStorageError(
            code: .writeFailed,
            message: "\(identity): etcd refused a batch's write without saying why; nothing was stored",
            path: identity)
    }

    /// Reads the cluster's revision when the store has seen none yet (no answer so far), so that a write has one to
    /// fence with. Nothing was written when it fails.
    func learnRevision(key: String?) throws(WLStorageError) {
        guard client.latestRevision == 0 else { return }
        do throws(EtcdFailure) {
            let _: RangeResponse = try client.call(
                "v3/kv/range", RangeRequest(key: key.map(etcdKey) ?? prefix, countOnly: true), resending: true)
        } catch {
            let before = EtcdFailure(
                outcome: .notSent, description: "reading the cluster's revision first: \(error.description)")
            throw failure(before, reading: false, key: key)
        }
    }
}
