import Foundation

@testable import WLStorage

/// The store's writes on condition of a version, tagged, as the PostgreSQL store makes them.
extension VersionedMemoryStore: VersionedConditionalStore, DeclaresCapabilities {
    var capabilities: StoreCapabilities { StoreCapabilities(versioned: self) }

    func readVersioned(key: String) throws -> VersionedRead {
        guard let row = row(key) else { return .absent }
        return .found(row.data, version: row.version)
    }

    func write(key: String, data: Data, ifVersion version: Int64?, tag: WriteTag) throws -> TaggedWriteResult {
        try conditionalWrite(key: key, data: data, tag: tag.text) { $0?.version == version } ? .stored : .refused
    }

    func trace(of tag: WriteTag, key: String) throws -> TagTrace? {
        row(key).map {
            TagTrace(
                version: $0.version, tagFound: $0.tags.contains(tag.text), tagsKept: $0.tags.count, capacity: capacity)
        }
    }
}
