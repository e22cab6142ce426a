import Foundation

/// One version of a key's bytes as a backer read them: the bytes, the stamp that tells the version (see
/// ``KnownVersions``), and, for a file, its identity, which a file moved aside must still have.
struct ReadBytes {
    let data: Data
    let stamp: Int
    var identity: FileIdentity? = nil
}

/// What became of bytes that do not decode, which a backer tried to keep aside.
enum KeptAside {
    /// Kept, under another name or key; the key holds nothing now.
    case kept(WLStorageError)
    /// The key changed while they were being kept aside: it is read again, or, when it was already, the error says so.
    case changed(WLStorageError)
    /// Not kept: they stay where they are.
    case failed(WLStorageError)
}

/// Where a backer keeps its key's bytes: a file of a directory (``WLStorageDefaultBacker``) or a key of a store
/// (``StoreBacker``). The steps from the bytes read to what the cell adopts, and the record of what was written, are
/// the same for both and written once, in this protocol's extension; a medium supplies what only it can do: read its
/// bytes, and keep bytes elsewhere (a file renamed or created beside it, a store's bytes copied to another key).
protocol KeyMedium<Value>: StoreBacking, AnyObject {
    /// The key the storage was created with.
    var key: String { get }
    /// The version of the key this backer saw last.
    var known: Lock<KnownVersions> { get }
    /// Where the bytes are, as messages name it.
    var place: StoredPlace { get }

    /// Keeps `data`, bytes in an earlier shape (`reshape` says how they were read), as they are until the value is
    /// written back in the current shape; returns why they could not be kept, in which case they are left in their
    /// old shape.
    func keepOriginal(_ data: Data, _ reshape: ValueDecoding<Value>.Reshape) -> WLStorageError?

    /// Removes the bytes kept by ``keepOriginal(_:_:)``.
    func removeKeptOriginal() throws

    /// Keeps `read`, bytes that do not decode (`judged` says how, `error` why), aside, out of the key's way.
    func keepAside(_ read: ReadBytes, judged: String, _ error: (any Error)?) -> KeptAside
}

extension KeyMedium {
    /// The value of what is stored, or `defaultValueClosure()` when nothing is: the custom backer's read
    /// (``WLStorageBacker/read(defaultValueClosure:)``), through the same steps as a storage's.
    func readValue(defaultValueClosure: () -> Value) throws -> Value {
        let found = withoutActuallyEscaping(defaultValueClosure) { makeDefault in
            readStored(decoding: ValueDecoding(defaultValue: makeDefault, migrations: []))
        }
        switch found {
        case .value(let value), .reshaped(let value, _, _):
            return value
        case .absent:
            return defaultValueClosure()
        case .movedAside(let error), .failed(let error), .anotherVersion(let error):
            throw error
        }
    }

    /// What `read`, the bytes the key holds, are to the storage opening it (see ``StoredBytes``): the value; the value
    /// reshaped, with the bytes kept as they were until it is written back (`rewrite` also when the bytes are in the
    /// current shape but to be written again, sealed under the current key); bytes of another version, left as they
    /// are; or bytes kept aside, when they do not decode. When the key changed while they were being kept aside,
    /// `readAgain` reads it again; without it, the read fails.
    func opening(
        _ read: ReadBytes, decoding: ValueDecoding<Value>, rewrite: Bool = false,
        readAgain: (() -> ReadResult<Value>)? = nil
    ) -> ReadResult<Value> {
        _ = known.withLock { $0.read(read.stamp, read.data) }
        switch StoredBytes.read(read.data, at: place, decoding: decoding) {
        case .value(let value):
            return rewrite ? .reshaped(value, rewrite: true, note: nil) : .value(value)
        case .reshaped(let value, let reshape):
            if let note = keepOriginal(read.data, reshape) { return .reshaped(value, rewrite: false, note: note) }
            KeptOriginals.keep(self)
            return .reshaped(value, rewrite: true, note: nil)
        case .anotherVersion(let error):
            return .anotherVersion(error)
        case .sealedElsewhere(let error):
            // Another key's secret: not kept aside, and nothing of this storage replaces it.
            return .failed(error)
        case .undecodable(let judged, let error):
            switch keepAside(read, judged: judged, error) {
            case .kept(let error):
                _ = known.withLock { $0.forget() }
                return .movedAside(error)
            case .changed(let error):
                return readAgain?() ?? .failed(error)
            case .failed(let error):
                return .failed(error)
            }
        }
    }

    /// What `read`, the bytes a check found (`nil` for nothing stored), change: nothing when they are the version seen
    /// last, a removal when a version was known, and else the value (see ``StoredBytes/change(_:at:decoding:)``).
    func change(_ read: ReadBytes?, decoding: ValueDecoding<Value>) throws(WLStorageError) -> ExternalChange<Value> {
        guard let read else { return known.withLock { $0.forget() } ? .removed : .unchanged }
        if known.withLock({ $0.read(read.stamp, read.data) }) { return .unchanged }
        return try StoredBytes.change(read.data, at: place, decoding: decoding)
    }

    /// Records `data`, version `stamp`, as written by this backer. Bytes kept from before the type changed go now:
    /// what is stored is in the current shape.
    func recordWrite(_ data: Data, stamp: Int) {
        known.withLock { $0.wrote(stamp, data) }
        KeptOriginals.settle(self) { try removeKeptOriginal() }
    }

    /// The bytes of `value`, with the members of the bytes this backer last read or wrote that its type does not know
    /// (see ``UnknownFields``), checked against the size limit.
    func encode(_ value: Value) throws(WLStorageError) -> Data {
        try JSONCoders.encode(value, key: key, keepingUnknownOf: known.withLock { $0.takeBase() })
    }

    func dropUnknownFields() {
        known.withLock { $0.dropUnknownFields() }
    }

    func forgetLastRead() {
        known.withLock { $0.forgetLastRead() }
    }
}
