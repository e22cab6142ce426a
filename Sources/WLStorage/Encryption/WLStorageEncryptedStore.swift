import Foundation
import WLStorageCrypto
import WLStorageFiles
import WLStorageJSON

/// A store that keeps the values of another store encrypted: AES-256-GCM through OpenSSL, a fresh random nonce per
/// write, and the storage key authenticated with it, so one key's bytes cannot pass for another's.
///
/// ```swift
/// let secrets = WLStorageEncryptedStore(
///     .directory(URL(fileURLWithPath: "/var/lib/mytool/secrets")),
///     key: try WLStorageEncryptionKey(contentsOf: URL(fileURLWithPath: "/etc/mytool/storage.key")))
/// @WLStorage(key: "api_token", defaultValue: "", store: secrets)
/// var apiToken: String
/// ```
///
/// - Bytes that do not open are read as ``WLStorageError/Code/decodingFailed`` and left as they are.
/// - Keys rotate: give earlier ones as `previousKeys`; a value opened with one is resealed under the current key.
/// - Errors never quote what was stored. See <doc:KeepingSecrets> for what the encryption protects against.
public final class WLStorageEncryptedStore: WLStorageStore {
    /// The store that holds the encrypted bytes.
    public let base: any WLStorageStore
    /// The current key first, then the earlier ones.
    fileprivate let secrets: [[UInt8]]
    fileprivate let fingerprints: [[UInt8]]
    public let identity: String

    fileprivate let under: StoreCapabilities
    /// Whether the store below changes keys (a prefix): values are sealed with the key they are stored under there.
    fileprivate var changesKeys: Bool { under.resolve != nil }

    /// A store that encrypts the values of `base` with `key`, and opens values stored under `previousKeys` too.
    public convenience init(
        _ base: some WLStorageStore, key: WLStorageEncryptionKey, previousKeys: [WLStorageEncryptionKey] = []
    ) {
        self.init(
            base, secrets: [key.bytes] + previousKeys.map(\.bytes),
            fingerprints: [key.fingerprint] + previousKeys.map(\.fingerprint))
    }

    /// The store of these keys over `base` (also the store that holds the bytes under a key-changing one).
    private init(_ base: any WLStorageStore, secrets: [[UInt8]], fingerprints: [[UInt8]]) {
        self.base = base
        self.secrets = secrets
        self.fingerprints = fingerprints
        self.under = Stores.capabilities(of: base)
        // `encrypted(<fingerprints>):<base's identity>`: keeps stores of other keys apart without revealing them.
        self.identity = "encrypted(\(fingerprints.map(SHA256.hex).joined(separator: ","))):" + base.identity
    }

    /// The key the bytes of `key` are stored under in the store that holds them, which they are sealed with.
    private func sealedKey(_ key: String) -> String { changesKeys ? Stores.resolve(base, key).key : key }

    /// The bytes stored under `key`, decrypted. A value under a previous key opens too (a storage reseals it).
    ///
    /// - Throws: ``WLStorageError/Code/decodingFailed`` when the bytes do not open; what the store under it throws.
    public func read(key: String) throws -> Data? {
        var underPreviousKey = false
        return try read(key: key, underPreviousKey: &underPreviousKey)
    }

    public func write(key: String, data: Data) throws { try base.write(key: key, data: seal(data, key: key)) }

    public func create(key: String, data: Data) throws -> Bool { try base.create(key: key, data: seal(data, key: key)) }

    public func write(_ batch: [WLStorageStoreWrite]) throws {
        try base.write(batch.map { WLStorageStoreWrite(key: $0.key, data: try seal($0.data, key: $0.key)) })
    }

    public func remove(key: String) throws { try base.remove(key: key) }

    /// Removes `key` only while it holds `data` once decrypted.
    public func remove(key: String, ifItHolds data: Data) throws -> Bool {
        guard let sealed = try readSealed(key, holding: data), let box = try? opened(sealed, key: key),
            box.plaintext == data
        else { return false }
        return try base.remove(key: key, ifItHolds: sealed)
    }

    /// Keeps plain-JSON bytes of `key` (no encrypted value at all) aside under `KEY~corrupt-…` below, removed from the
    /// key while it holds them; returns that key, or `nil` for nothing or anything else (left in place).
    func keepUnsealedAside(key: String) throws -> String? {
        guard let raw = try readSealed(key, holding: nil), !raw.isEmpty, !raw.starts(with: SealedBox.magic),
            JSONSyntax.problem(in: raw) == nil
        else { return nil }
        let aside = StorageDirectory.movedAsideName(for: key)
        guard try base.create(key: aside, data: raw) else { return nil }
        guard try base.remove(key: key, ifItHolds: raw) else {
            // Changed meanwhile: what was kept is not what the key held.
            try? base.remove(key: aside)
            return nil
        }
        return aside
    }

    public func keys() throws -> [String] { try base.keys() }

    public func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageSubscription?
    {
        base.observeChanges(changed)
    }

    /// The bytes stored under `key`, decrypted, and whether under a previous key; `allowance`: what a layer above adds.
    func read(key: String, underPreviousKey: inout Bool, allowance: Int = 0) throws -> Data? {
        guard let sealed = try readSealed(key, underPreviousKey: &underPreviousKey, allowance: allowance) else {
            return nil
        }
        guard !sealed.isEmpty else { return sealed }
        let box = try opened(sealed, key: key)
        underPreviousKey = underPreviousKey || box.keyIndex > 0
        return box.plaintext
    }

    /// `sealed`, the bytes of `key` in the store under this one, opened, and the index of the key that opened them.
    private func opened(_ sealed: Data, key: String) throws -> (plaintext: Data, keyIndex: Int) {
        do {
            return try SealedBox.open(sealed, keys: secrets, fingerprints: fingerprints, associatedKey: sealedKey(key))
        } catch let error as CipherError {
            throw failure(error, key: key, sealed: sealed)
        }
    }

    /// `sealed` opened; empty bytes stand for nothing stored and stay empty.
    fileprivate func open(_ sealed: Data, key: String) throws -> Data {
        sealed.isEmpty ? sealed : try opened(sealed, key: key).plaintext
    }

    /// The sealed bytes of `key`: a directory's file, bounded per layer, or opened by an encrypted store below.
    private func readSealed(_ key: String, underPreviousKey: inout Bool, allowance: Int) throws -> Data? {
        let (holder, storedKey) = changesKeys ? Stores.resolve(base, key) : (base, key)
        if let directory = (changesKeys ? Stores.capabilities(of: holder) : under).directory {
            return try directory.read(key: storedKey, limit: ValueSizeLimit.sealedMaximum + allowance)
        }
        if let inner = under.encrypted {
            return try inner.read(
                key: key, underPreviousKey: &underPreviousKey, allowance: allowance + SealedBox.minimumLength)
        }
        return try base.read(key: key)
    }

    /// The sealed bytes of `key`, read for a comparison with `expected` (bytes opened here; `nil` for none): larger than a
    /// value when they are an encrypted store's above this one, so read up to what sealing them adds, as a read from
    /// above is.
    fileprivate func readSealed(_ key: String, holding expected: Data?) throws -> Data? {
        var underPreviousKey = false
        let allowance = max(0, (expected?.count ?? 0) - ValueSizeLimit.maximum)
        return try readSealed(key, underPreviousKey: &underPreviousKey, allowance: allowance)
    }

    fileprivate func seal(_ data: Data, key: String) throws -> Data {
        do {
            return try SealedBox.seal(
                data, key: secrets[0], fingerprint: fingerprints[0], associatedKey: sealedKey(key))
        } catch {
            throw WLStorageError(
                code: .encodingFailed, message: "\(identity): the value could not be encrypted: \(error)", key: key,
                underlying: error)
        }
    }

    /// Why `sealed` does not open, naming the file for a directory, and the fingerprints for another key's bytes.
    private func failure(_ error: CipherError, key: String, sealed: Data) -> WLStorageError {
        let why: String
        switch error {
        case .notASealedBox: why = "they are not an encrypted value of this store, or they were cut short"
        case .unsupportedVersion(let version): why = "they are in a format this version does not know (\(version))"
        case .noMatchingKey:
            let sealedWith = SealedBox.fingerprint(ofKeyThatSealed: sealed).map { "sealed with key \(SHA256.hex($0))" }
            let keys =
                (fingerprints.count == 1 ? "key " : "keys ") + fingerprints.map(SHA256.hex).joined(separator: ", ")
            why =
                "they were encrypted with another key than this store's ("
                + (sealedWith.map { $0 + "; " } ?? "") + "this store has \(keys))"
        case .authenticationFailed:
            why = "they do not authenticate: they were changed or cut short, or they are another key's value"
        default: why = "\(error)"
        }
        var path: String?
        let (holder, storedKey) = Stores.resolve(base, key)
        if let directory = Stores.capabilities(of: holder).directory?.url, let name = FileName.forKey(storedKey) {
            path = directory.appendingPathComponent(name).path
        }
        return WLStorageError(
            code: .decodingFailed,
            message: "\(identity): the stored bytes of the key cannot be decrypted: \(why); they are left as they are",
            key: key, path: path)
    }
}

extension WLStorageEncryptedStore: CustomReflectable {
    /// The store under it and the fingerprints of the keys: `dump` and debuggers never see the keys' bytes.
    public var customMirror: Mirror {
        Mirror(self, children: ["base": base as Any, "keyFingerprints": fingerprints.map(SHA256.hex) as Any])
    }
}

extension WLStorageEncryptedStore: DeclaresCapabilities {
    /// Its values are secret; over a key prefix, keys are the holding store's under the same encryption. It writes on
    /// condition when the holding store does, and passes its carried changes through, sealed, when keys are its own.
    package var capabilities: StoreCapabilities {
        let holding = changesKeys ? Stores.capabilities(of: Stores.resolve(base, "").store) : under
        var resolve: (@Sendable (String) -> (store: any WLStorageStore, key: String))?
        if changesKeys {
            resolve = { [self] key in
                let (holder, storedKey) = Stores.resolve(base, key)
                return (WLStorageEncryptedStore(holder, secrets: secrets, fingerprints: fingerprints), storedKey)
            }
        }
        return StoreCapabilities(
            resolve: resolve,
            encrypted: self,
            conditional: holding.conditional != nil ? ConditionalEncryptedStore(store: self) : nil,
            versioned: holding.versioned.map {
                ConditionalEncryptedStore(store: self, settlesLostAnswers: $0.settlesLostAnswers)
            },
            rewrites: holding.rewrites != nil ? ConditionalEncryptedStore(store: self, rewriting: true) : nil,
            carried: !changesKeys ? under.carried.map { EncryptedCarriedFeed(store: self, base: $0) } : nil)
    }

    fileprivate func versionedBase(_ key: String) throws -> (store: any WLStorageVersionedStore, key: String) {
        let (resolved, storedKey) = Stores.resolve(base, key)
        guard let base = Stores.capabilities(of: resolved).versioned else {
            throw WLStorageError(
                code: .writeFailed, message: "\(identity): the store under it does not write on condition of a version",
                key: key)
        }
        return (base, storedKey)
    }
}

/// An encrypted store over a conditional or versioned store, seen as one too (``StoreCapabilities/versioned``).
private struct ConditionalEncryptedStore: WLStorageVersionedStore, StoreView {
    let store: WLStorageEncryptedStore
    /// Whether its writes on condition are rewrites (see ``StoreCapabilities/rewrites``).
    var rewriting = false
    /// Whether the store below settles its lost answers: its writes on condition of bytes are this store's.
    var settlesLostAnswers = false
    var viewed: any WLStorageStore { store }

    /// Stores `data`, sealed, only while the key holds `expected` once opened; the store below compares the sealed
    /// bytes read. A rewrite goes through it as a rewriting store (``StoreCapabilities/rewrites``).
    func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
        let (resolved, storedKey) = Stores.resolve(store.base, key)
        let under = Stores.capabilities(of: resolved)
        guard let base = rewriting ? under.rewrites : under.conditional else {
            throw WLStorageError(
                code: .writeFailed, message: "\(store.identity): the store under it does not write on condition",
                key: key)
        }
        let current = try store.readSealed(key, holding: expected)
        guard holds(current, expected, key: key) else { return false }
        return try base.write(key: storedKey, data: store.seal(data, key: key), ifItHolds: current)
    }

    /// What the store below holds under each of `keys`, read in one call; a key whose value is too large to read (see
    /// ``WLStorageConditionalStore/read(keys:)``) is left out (`nil`), and the others are read again without it.
    private func read(_ keys: [String], from base: any WLStorageConditionalStore) throws -> [Data??] {
        var (found, left) = ([Data??](repeating: nil, count: keys.count), Array(keys.indices))
        while !left.isEmpty {
            do {
                let values = try base.read(keys: left.map { keys[$0] })
                guard values.count == left.count else {
                    throw WLStorageError(
                        code: .readFailed, message: "\(store.identity): the store below read too few keys")
                }
                for (index, value) in zip(left, values) { found[index] = .some(value) }
                return found
            } catch let error as WLStorageError where error.code == .valueTooLarge {
                guard let out = left.firstIndex(where: { keys[$0] == error.key }) else { throw error }
                left.remove(at: out)
            }
        }
        return found
    }

    /// Whether `sealed` (what the store below holds) opens to `expected`; nothing (or no bytes) only for nothing.
    private func holds(_ sealed: Data?, _ expected: Data?, key: String) -> Bool {
        guard let sealed, !sealed.isEmpty else { return expected?.isEmpty ?? true }
        return expected?.isEmpty == false && (try? store.open(sealed, key: key)) == expected
    }

    /// Stores each write, sealed, only while its key holds what is expected once opened: the keys are read in one call,
    /// and those that hold it are written in one batch on condition of the sealed bytes read, by the store below. A key
    /// whose value is too large to read is left out, answered not written (its storage's own flush reports it).
    func write(_ batch: [WLStorageStoreWrite], ifTheyHold expected: [Data?]) throws -> [Bool] {
        guard !store.changesKeys, !rewriting, let base = store.under.conditional else {
            return try writeOneByOne(batch, ifTheyHold: expected)
        }
        var (current, sent, sealed): ([Data??], [Int], [WLStorageStoreWrite]) = ([], [], [])
        do {
            current = try read(batch.map(\.key), from: base)
            // The writes whose keys were read and hold what they expect (nothing stored, or bytes that open to it).
            sent = batch.indices.filter { index in
                current[index].map { holds($0, expected[index], key: batch[index].key) } ?? false
            }
            sealed = try sent.map {
                WLStorageStoreWrite(key: batch[$0].key, data: try store.seal(batch[$0].data, key: batch[$0].key))
            }
        } catch {
            var failure =
                error as? WLStorageError ?? WLStorageError(code: .writeFailed, message: "\(error)", underlying: error)
            failure.storedWrites = 0  // none was sent
            throw failure
        }
        var answers = [Bool](repeating: false, count: batch.count)
        do {
            for (written, index) in zip(try base.write(sealed, ifTheyHold: sent.map { current[$0] ?? nil }), sent) {
                answers[index] = written
            }
        } catch {
            // Every write's answer: left out, refused; sent, as the store below says, or not known up to what it may
            // have stored, refused past it (not sent).
            var error =
                error as? WLStorageError ?? WLStorageError(code: .writeFailed, message: "\(error)", underlying: error)
            let (said, tried) = (error.storedAnswers ?? [], max(error.storedWrites ?? sent.count, 0))
            var whole = answers.map { Optional($0) }
            for (position, index) in sent.enumerated() {
                whole[index] = position < said.count ? said[position] : position < tried ? nil : false
            }
            (error.storedAnswers, error.storedWrites) = (whole, batch.count)
            throw error
        }
        return answers
    }

    /// The bytes of `key`, opened, with the sealed bytes' version (each seal differs: the version tells writes apart).
    func readVersioned(key: String) throws -> WLStorageVersionedRead {
        let (base, storedKey) = try store.versionedBase(key)
        let read = try base.readVersioned(key: storedKey)
        guard case .found(let sealed, let version) = read else { return read }
        return .found(try store.open(sealed, key: key), version: version)
    }

    /// Stores `data`, sealed, on condition of the version and tagged, through the store under this one.
    func write(key: String, data: Data, ifVersion version: Int64?, tag: WLStorageWriteTag) throws
        -> WLStorageTaggedWriteResult
    {
        let (base, storedKey) = try store.versionedBase(key)
        return try base.write(key: storedKey, data: store.seal(data, key: key), ifVersion: version, tag: tag)
    }

    func trace(of tag: WLStorageWriteTag, key: String) throws -> WLStorageTagTrace? {
        let (base, storedKey) = try store.versionedBase(key)
        return try base.trace(of: tag, key: storedKey)
    }
}

extension WLStorageStore {
    /// This store, with its values encrypted under `key` (see ``WLStorageEncryptedStore``).
    public func encrypted(
        with key: WLStorageEncryptionKey, previousKeys: [WLStorageEncryptionKey] = []
    ) -> WLStorageEncryptedStore {
        WLStorageEncryptedStore(self, key: key, previousKeys: previousKeys)
    }
}

/// The carried changes of the store below when the keys are its own: bytes travel sealed and are opened here.
private struct EncryptedCarriedFeed: CarriedChangeFeed {
    let store: WLStorageEncryptedStore
    let base: any CarriedChangeFeed

    func observeCarriedChanges(_ changed: @escaping @Sendable (WLStorageFeedEvent) -> Void) -> WLStorageSubscription? {
        base.observeCarriedChanges(changed)
    }

    func readWithVersion(key: String) throws -> (data: Data, version: Int64)? {
        guard let found = try base.readWithVersion(key: key) else { return nil }
        return (try store.open(found.data, key: key), found.version)
    }

    func opened(_ carried: Data, key: String) throws -> Data {
        try store.open(try base.opened(carried, key: key), key: key)
    }
}
