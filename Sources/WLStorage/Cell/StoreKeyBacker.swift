/// The backer of a key in a store other than a directory, with its medium: what a cross-process update writes through.
struct StoreKeyBacker<T: Codable & Sendable> {
    let backer: WLStorageDefaultBacker<T>
    let medium: StoreMedium
}
