import Foundation
import WLStorage

// An update's write is a transaction on the key's `mod_revision` that also records its tag in a second etcd key,
// `wlstorage-tags/<escaped namespace>/<key>` (newest first, one a line): outside the store's range and its watch,
// written only by tagged writes, removed with its key. An update's write where nothing is stored also compares the
// removals key of its bucket (see WLStorageEtcdStore+Fence.swift).
//
// A write whose answer was lost, sent again by its update, is found by its tag; but a removal of the key since takes
// its tags with it, and a key where nothing is stored again (or made anew) then tells nothing of the write: sent again
// where nothing is stored, it would be made a second time, after the removal; traced on the key made anew, it would be
// taken for a write never stored, and its update run again. The store remembers the tags of its writes whose answer was
// lost, with the latest revision it had seen when it sent each: once the removals key of its bucket tells of a removal
// since, such a write where nothing was stored is not sent again, and its trace, its tag not found, says nothing is
// stored (its update then reports its outcome unknown).

extension WLStorageEtcdStore {
    /// The most tags of updates' writes a key keeps (about 33 bytes each): a write whose answer was lost finds its tag
    /// unless this many tagged writes of the key came after it meanwhile.
    public static let keptTags = 128

    /// The etcd key that holds the tags of the last tagged writes of `key`.
    func tagsKey(_ key: String) -> Data {
        Data("wlstorage-tags/".utf8) + prefix.dropFirst("wlstorage/".utf8.count) + Data(key.utf8)
    }

    /// The bytes stored under `key` and their version, the key's `mod_revision`, which every write of the key makes
    /// greater, whoever writes (a linearizable read).
    public func readVersioned(key: String) throws -> WLStorageVersionedRead {
        let answer: RangeResponse = try perform(reading: true, key: key) { () throws(EtcdFailure) in
            try client.call("v3/kv/range", RangeRequest(key: etcdKey(key)), resending: true)
        }
        guard let found = answer.kvs?.first else { return .absent }
        return .found(found.value ?? Data(), version: try revision(of: found, key: key))
    }

    /// Stores `data` under `key` only while its `mod_revision` is `version` (for `nil`, while nothing is stored), in one
    /// transaction that also puts `tag` first among the key's last ``keptTags`` tags. For `nil`, the transaction also
    /// compares the removals key of its bucket with the latest revision the store had seen (see ``write(key:data:)``):
    /// a key removed since holds nothing again, and a copy delivered late does not put it back. When only the tags
    /// changed meanwhile, it tries again, three times at most; for `nil`, a refusal by a removal since of another key
    /// of the bucket is no try, within the store's timeout. A transaction whose answer was lost is not sent again: the
    /// update resends it and asks about its tag (``trace(of:key:)``).
    ///
    /// - Returns: `.stored`, `.refused` when the key's revision is not `version`, or `.notStored` when nothing was sent
    ///   that could store (no endpoint answered, etcd refused the request, the first read failed).
    /// - Throws: ``WLStorageError`` with the code `writeFailed` when it is not known whether the transaction was carried
    ///   out.
    public func write(key: String, data: Data, ifVersion version: Int64?, tag: WLStorageWriteTag) throws
        -> WLStorageTaggedWriteResult
    {
        guard !tag.text.isEmpty, !tag.text.utf8.contains(UInt8(ascii: "\n")) else {
            return .notStored(
                WLStorageError(
                    code: .writeFailed, message: "\(identity): a write's tag must be one line of text", key: key,
                    path: identity))
        }
        // A copy of this write sent before, where nothing was stored, whose answer was lost: the revision it was fenced
        // at.
        let earlier = version == nil ? lostAnswer(tag) : nil
        var current: TaggedKey
        do {
            current = try readTagged(key: key, removals: earlier != nil)
        } catch {
            return .notStored(error)
        }
        let deadline = ContinuousClock.now + timeout
        var tries = 0
        while tries < 3 {
            // That copy may have been carried out, and its key removed since: it is not made a second time.
            if let earlier, (current.removalsRevision ?? 0) > earlier { return .refused }
            guard current.revision == version else { return .refused }
            let tags = Data(([tag.text] + current.tags.prefix(Self.keptTags - 1)).joined(separator: "\n").utf8)
            do {
                try checkSize(of: [key, key], [data, tags], key: key)
            } catch {
                return .notStored(error)
            }
            let seen = earlier ?? client.latestRevision
            let request = TxnRequest(
                compare: [
                    Self.condition(on: etcdKey(key), revision: version),
                    Self.condition(on: tagsKey(key), revision: current.tagsRevision),
                ] + (version == nil ? [removalsFence(of: key, at: seen)] : []),
                success: [
                    RequestOp(requestPut: PutRequest(key: etcdKey(key), value: data)),
                    RequestOp(requestPut: PutRequest(key: tagsKey(key), value: tags)),
                ],
                failure: readOperations(key, removals: earlier != nil))
            let answer: TxnResponse
            do {
                answer = try client.call("v3/kv/txn", request, resending: false)
            } catch {
                let failure = failure(error, reading: false, key: key)
                if error.outcome == .unknown {
                    rememberLostAnswer(tag, seen: seen)
                    throw failure
                }
                return .notStored(failure)
            }
            if answer.succeeded == true { return .stored }
            // Refused: the failure branch read both keys, at the revision of the refusal.
            let before = current
            current = try tagged(answer, key: key)
            // Nothing stored still, and the tags as read: refused by a removal of another key of the bucket since (see
            // ``fenced(key:conditions:operations:resending:fencingRemovals:)``), not counted within the timeout.
            let byRemovals = version == nil && current.revision == nil && current.tagsRevision == before.tagsRevision
            if !byRemovals || ContinuousClock.now >= deadline { tries += 1 }
        }
        guard current.revision == version else { return .refused }
        return .notStored(
            WLStorageError(
                code: .writeFailed,
                message: "\(identity): the tags of the key's writes (\(String(decoding: tagsKey(key), as: UTF8.self)))"
                    + (version == nil ? ", or the removals key of its bucket," : "")
                    + " changed at every try, while the key did not; nothing was stored",
                key: key, path: identity))
    }

    /// The latest revision the store had seen when it sent the write tagged `tag` whose answer was lost; `nil` when no
    /// such write is remembered.
    func lostAnswer(_ tag: WLStorageWriteTag) -> Int64? {
        lostAnswers.withLock { lost in lost.last { $0.tag == tag.text }?.seen }
    }

    /// Remembers that the answer to the write tagged `tag`, sent when the latest revision the store had seen was
    /// `seen`, was lost: the first such copy's revision is kept.
    private func rememberLostAnswer(_ tag: WLStorageWriteTag, seen: Int64) {
        lostAnswers.withLock { lost in
            if lost.contains(where: { $0.tag == tag.text }) { return }
            lost.append((tag.text, seen))
            if lost.count > Self.lostAnswersKept { lost.removeFirst(lost.count - Self.lostAnswersKept) }
        }
    }

    /// How many tags of writes whose answer was lost the store remembers: an update sends its write again a few times
    /// within seconds, and asks about its tag.
    static let lostAnswersKept = 256

    /// What `key` says of the write tagged `tag`: its `mod_revision`, whether the tag is among those kept, and how many
    /// are kept; `nil` when nothing is stored. Revisions are the cluster's, so a tag not found among ``keptTags`` kept
    /// tags is judged unknown rather than not written (see `WLStorageTagTrace`).
    ///
    /// A write of this store whose answer was lost, its tag not found, after a removal of a key of its bucket made since
    /// it was sent, on a key made since (or none): the key may have been removed after it (with its tags) and made
    /// anew, so it tells nothing, and this is `nil`, as for a key removed.
    public func trace(of tag: WLStorageWriteTag, key: String) throws -> WLStorageTagTrace? {
        let earlier = lostAnswer(tag)
        let found = try readTagged(key: key, removals: earlier != nil)
        // A key made before that write was sent was not removed since, whatever other key of its bucket was.
        if let earlier, !found.tags.contains(tag.text), (found.removalsRevision ?? 0) > earlier,
            (found.created ?? .max) > earlier
        {
            return nil
        }
        guard let revision = found.revision else { return nil }
        return WLStorageTagTrace(
            version: revision, tagFound: found.tags.contains(tag.text), tagsKept: found.tags.count,
            capacity: Self.keptTags)
    }

    // MARK: - The key with its tags

    /// A key's revision and the tags its tagged writes left, read at one revision.
    struct TaggedKey {
        /// The key's `mod_revision`; `nil` when nothing is stored.
        var revision: Int64?
        /// The `mod_revision` of the key of its tags; `nil` when there is none.
        var tagsRevision: Int64?
        /// The tags kept, newest first.
        var tags: [String]
        /// The `mod_revision` of the removals key of the key's bucket, when read; `nil` when not, or there is none.
        var removalsRevision: Int64? = nil
        /// The key's `create_revision`; `nil` when nothing is stored.
        var created: Int64? = nil
    }

    /// Reads `key` and its tags in one transaction, and with `removals` the removals key of its bucket.
    func readTagged(key: String, removals: Bool = false) throws(WLStorageError) -> TaggedKey {
        let request = TxnRequest(compare: [], success: readOperations(key, removals: removals))
        let answer: TxnResponse = try perform(reading: true, key: key) { () throws(EtcdFailure) in
            try client.call("v3/kv/txn", request, resending: true)
        }
        return try tagged(answer, key: key)
    }

    /// The reads of `key` and of its tags, in that order, and with `removals` of the removals key of its bucket.
    private func readOperations(_ key: String, removals: Bool = false) -> [RequestOp] {
        [
            RequestOp(requestRange: RangeRequest(key: etcdKey(key))),
            RequestOp(requestRange: RangeRequest(key: tagsKey(key))),
        ] + (removals ? [RequestOp(requestRange: RangeRequest(key: removalsKey(key)))] : [])
    }

    /// The key and its tags, from the answers of ``readOperations(_:)`` in `answer`.
    private func tagged(_ answer: TxnResponse, key: String) throws(WLStorageError) -> TaggedKey {
        guard let responses = answer.responses, responses.count == 2 || responses.count == 3 else {
            throw WLStorageError(
                code: .readFailed, message: "\(identity): a transaction's answer lacks its reads", key: key,
                path: identity)
        }
        let value = responses[0].responseRange?.kvs?.first
        let tags = responses[1].responseRange?.kvs?.first
        let removals = responses.count == 3 ? responses[2].responseRange?.kvs?.first : nil
        return TaggedKey(
            revision: try value.map { kv throws(WLStorageError) in try revision(of: kv, key: key) },
            tagsRevision: try tags.map { kv throws(WLStorageError) in try revision(of: kv, key: key) },
            tags: Self.tags(in: tags?.value),
            removalsRevision: try removals.map { kv throws(WLStorageError) in try revision(of: kv, key: key) },
            created: value?.createRevision.flatMap { Int64($0) })
    }

    /// The tags kept in the bytes of a key of tags, newest first.
    private static func tags(in data: Data?) -> [String] {
        guard let data else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// Compares `etcdKey`'s `mod_revision` with `revision`, or for `nil` its creation revision with 0 (nothing stored).
    private static func condition(on etcdKey: Data, revision: Int64?) -> Compare {
        if let revision {
            return Compare(target: "MOD", key: etcdKey, modRevision: String(revision))
        }
        return Compare(target: "CREATE", key: etcdKey, createRevision: "0")
    }

    /// The `mod_revision` of `kv`.
    private func revision(of kv: KeyValue, key: String) throws(WLStorageError) -> Int64 {
        guard let text = kv.modRevision, let revision = Int64(text) else {
            throw WLStorageError(
                code: .readFailed, message: "\(identity): etcd answered a key without its revision", key: key,
                path: identity)
        }
        return revision
    }
}

/// The store's updates write on condition of the key's `mod_revision`, tagged (see `WLStorageVersionedStore`).
extension WLStorageEtcdStore: WLStorageVersionedStore {
    /// `true`: a write on condition of the key's bytes whose answer was lost is judged by the key's history
    /// (``write(key:data:ifItHolds:)``), so a storage's change is written in one transaction, with no read before it.
    public var settlesLostAnswers: Bool { true }
}
