import Synchronization

/// The largest value the package reads or writes, in bytes of JSON: ``WLStorageSystem/maximumValueSize``.
///
/// Files are read into memory whole, so without a bound a file of any size (a sparse file of a terabyte takes no
/// disk) would be allocated in full. A larger file is reported with ``WLStorageError/Code/valueTooLarge`` and left
/// as it is; a larger value is not written and stays pending.
package enum ValueSizeLimit {
    /// 16 MiB.
    package static let defaultMaximum = 16 * 1024 * 1024

    /// The highest limit that can be set: 1 GiB. A value is held in memory whole, and more than once while it is
    /// encoded or decoded.
    package static let ceiling = 1 << 30

    /// The largest file of an encrypted value: the limit, and what encryption adds to a value (its header and tag).
    package static var sealedMaximum: Int { maximum + SealedBox.minimumLength }

    /// The limit now.
    package static var maximum: Int {
        get { Runtime.shared.maximumValueSize.load(ordering: .relaxed) }
        set { Runtime.shared.maximumValueSize.store(clamped(newValue), ordering: .relaxed) }
    }

    /// The limit that setting `size` gives: at least 1 byte, at most ``ceiling``.
    package static func clamped(_ size: Int) -> Int {
        min(max(1, size), ceiling)
    }
}
