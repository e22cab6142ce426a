import Foundation
import WLStorageJSON

/// A custom backer with a feed, wrapped so its cell tells its own versions (by JSON encoding) from outside changes.
final class ObservedBacker<T: Codable & Sendable>: WLStorageBacker, StoreBacking {
    let base: any WLStorageObservableBacker<T>
    /// The default, made when the storage began following the feed.
    let defaultValue: T
    /// The backer's feed, which ends with this wrapper, and so with the cell.
    private let observation: WLStorageSubscription
    private let known = Lock(KnownVersions())

    init(_ base: any WLStorageObservableBacker<T>, defaultValue: T, observation: WLStorageSubscription) {
        self.base = base
        self.defaultValue = defaultValue
        self.observation = observation
    }

    var key: String { base.key }

    func read(defaultValueClosure: () -> T) throws -> T { try base.read(defaultValueClosure: defaultValueClosure) }

    func write(value: T) throws {
        try base.write(value: value)
        if let data = try? JSONCoders.encoder.encode(value) {
            known.withLock { $0.wrote(KnownVersions.stamp(data), data) }
        }
    }

    /// Reads the backer as any backer is read, recording a value read; `isKnown`: it is the backer's own last version.
    private func readBase() -> (result: ReadResult<T>, isKnown: Bool) {
        let result = base.readResult { defaultValue }
        guard case .value(let value) = result, let data = try? JSONCoders.encoder.encode(value) else {
            return (result, false)
        }
        return (result, known.withLock { $0.read(KnownVersions.stamp(data), data).same })
    }

    /// The custom backer decodes by itself: `decoding` has no part.
    func readStored(decoding: ValueDecoding<T>) -> ReadResult<T> { readBase().result }

    /// Saves nothing: a custom backer is written with changes only, never a default, even after a failed first read.
    func create(value: T) throws(WLStorageError) -> Bool { true }

    /// A custom backer encodes by itself: it keeps no fields, and a removal of them gets the value written.
    var keepsFields: Bool { true }

    func write(_ value: T, dropping: Bool) throws { try write(value: value) }

    /// A custom backer's versions are known by their encoding alone, which tells nothing of who stored them.
    func rewrite(_ value: T, dropping: Bool) throws -> Bool? { nil }

    func forgetLastRead() { known.withLock { $0.forgetLastRead() } }

    var entryExists: Bool { false }

    func readExternalChange(decoding: ValueDecoding<T>) throws(WLStorageError) -> ExternalChange<T> {
        switch readBase() {
        case (.value(let value), let isKnown): isKnown ? .unchanged : .changed(value)
        case (.failed(let error), _): throw error
        default: known.withLock { $0.readRemoval() } ? .removed : .unchanged
        }
    }
}
