import Synchronization
import WLStorageCrypto

/// The largest value read or written, in bytes of JSON (``WLStorageSystem/maximumValueSize``).
package enum ValueSizeLimit {
    package static let defaultMaximum = 16 * 1024 * 1024

    /// The highest limit that can be set: 1 GiB (a value is held in memory whole, more than once while coded).
    package static let ceiling = 1 << 30

    /// The largest file of an encrypted value: the limit, and what encryption adds to a value (its header and tag).
    package static var sealedMaximum: Int { maximum + SealedBox.minimumLength }

    package static var maximum: Int {
        get { Runtime.shared.maximumValueSize.load(ordering: .relaxed) }
        set { Runtime.shared.maximumValueSize.store(clamped(newValue), ordering: .relaxed) }
    }

    /// The limit that setting `size` gives: at least 1 byte, at most ``ceiling``.
    package static func clamped(_ size: Int) -> Int { min(max(1, size), ceiling) }
}
