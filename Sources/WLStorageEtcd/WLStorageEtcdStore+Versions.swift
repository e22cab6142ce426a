import Foundation
import WLStorage

// An update's write is a transaction on the key's `mod_revision` that also records its tag in a second etcd key,
// `wlstorage-tags/<escaped namespace>/<key>` (newest first, one a line): outside the store's range and its watch,
// written only by tagged writes, removed with its key. An update's write where nothing is stored also compares the
// namespace's removals' key (see WLStorageEtcdStore+Fence.swift).

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
    /// compares the namespace's removals' key with the latest revision the store had seen (see ``write(key:data:)``):
    /// a key removed since holds nothing again, and a copy delivered late does not put it back. When only the tags
    /// changed meanwhile (or, for `nil`, a key of the namespace was removed), it tries again, three times at most. A
    /// transaction whose answer was lost is not sent again: the update resends it and asks about its tag
    /// (``trace(of:key:)``).
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
        var current: TaggedKey
        do {
            current = try readTagged(key: key)
        } catch {
            return .notStored(error)
        }
        for _ in 0..<3 {
            guard current.revision == version else { return .refused }
            let tags = Data(([tag.text] + current.tags.prefix(Self.keptTags - 1)).joined(separator: "\n").utf8)
            do {
                try checkSize(of: [key, key], [data, tags], key: key)
            } catch {
                return .notStored(error)
            }
            let request = TxnRequest(
                compare: [
                    Self.condition(on: etcdKey(key), revision: version),
                    Self.condition(on: tagsKey(key), revision: current.tagsRevision),
                ] + (version == nil ? [removalsFence(at: client.latestRevision)] : []),
                success: [
                    RequestOp(requestPut: PutRequest(key: etcdKey(key), value: data)),
                    RequestOp(requestPut: PutRequest(key: tagsKey(key), value: tags)),
                ],
                failure: readOperations(key))
            let answer: TxnResponse
            do {
                answer = try client.call("v3/kv/txn", request, resending: false)
            } catch {
                let failure = failure(error, reading: false, key: key)
                if error.outcome == .unknown { throw failure }
                return .notStored(failure)
            }
            if answer.succeeded == true { return .stored }
            // Refused: the failure branch read both keys, at the revision of the refusal.
            current = try tagged(answer, key: key)
        }
        guard current.revision == version else { return .refused }
        return .notStored(
            WLStorageError(
                code: .writeFailed,
                message: "\(identity): the tags of the key's writes (\(String(decoding: tagsKey(key), as: UTF8.self)))"
                    + (version == nil ? ", or the namespace's removals," : "")
                    + " changed at every try, while the key did not; nothing was stored",
                key: key, path: identity))
    }

    /// What `key` says of the write tagged `tag`: its `mod_revision`, whether the tag is among those kept, and how many
    /// are kept; `nil` when nothing is stored. Revisions are the cluster's, so a tag not found among ``keptTags`` kept
    /// tags is judged unknown rather than not written (see `WLStorageTagTrace`).
    public func trace(of tag: WLStorageWriteTag, key: String) throws -> WLStorageTagTrace? {
        let found = try readTagged(key: key)
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
    }

    /// Reads `key` and its tags in one transaction.
    func readTagged(key: String) throws(WLStorageError) -> TaggedKey {
        let request = TxnRequest(compare: [], success: readOperations(key))
        let answer: TxnResponse = try perform(reading: true, key: key) { () throws(EtcdFailure) in
            try client.call("v3/kv/txn", request, resending: true)
        }
        return try tagged(answer, key: key)
    }

    /// The reads of `key` and of its tags, in that order.
    private func readOperations(_ key: String) -> [RequestOp] {
        [
            RequestOp(requestRange: RangeRequest(key: etcdKey(key))),
            RequestOp(requestRange: RangeRequest(key: tagsKey(key))),
        ]
    }

    /// The key and its tags, from the answers of ``readOperations(_:)`` in `answer`.
    private func tagged(_ answer: TxnResponse, key: String) throws(WLStorageError) -> TaggedKey {
        guard let responses = answer.responses, responses.count == 2 else {
            throw WLStorageError(
                code: .readFailed, message: "\(identity): a transaction's answer lacks its reads", key: key,
                path: identity)
        }
        let value = responses[0].responseRange?.kvs?.first
        let tags = responses[1].responseRange?.kvs?.first
        return TaggedKey(
            revision: try value.map { kv throws(WLStorageError) in try revision(of: kv, key: key) },
            tagsRevision: try tags.map { kv throws(WLStorageError) in try revision(of: kv, key: key) },
            tags: Self.tags(in: tags?.value))
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
extension WLStorageEtcdStore: WLStorageVersionedStore {}
