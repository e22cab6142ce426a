import Foundation

/// What a cell needs of its backer beyond ``WLStorageBacker``: to tell a stored value from nothing stored, to save a
/// default only where nothing is stored, and to read a change made elsewhere. A plain custom backer lacks it: its cell
/// reads it through ``StorageCell/read(_:defaultValue:)`` and never saves a default.
protocol StoreBacking<Value>: Sendable {
    associatedtype Value: Codable & Sendable

    /// Reads what is stored: a value (reshaped to the current type by `decoding`'s steps, or not), nothing, a value
    /// that did not decode and was kept aside, or a failure.
    func readStored(decoding: ValueDecoding<Value>) -> ReadResult<Value>

    /// Stores `value` unless something is stored; returns whether it did.
    func create(value: Value) throws(WLStorageError) -> Bool

    /// Whether something stands where the value is stored even though a read found nothing (an empty file): a default
    /// is then not saved over it.
    var entryExists: Bool { get }

    /// What changed since this backer last wrote or read: its own versions are not changes. A change is decoded by
    /// `decoding`'s steps but never written back: the program that stored it may still be at work.
    func readExternalChange(decoding: ValueDecoding<Value>) throws(WLStorageError) -> ExternalChange<Value>

    /// Makes the next write leave out the members of the stored JSON object that the value's type does not know
    /// (see ``UnknownFields``); a backer that keeps none does nothing.
    func dropUnknownFields()

    /// Writes `value`, the rewrite in the current shape of a value read in an earlier one, only while the key holds
    /// what this backer read (or wrote) last; returns whether it did, or `nil` when the backer cannot tell, for a plain
    /// write.
    func rewrite(_ value: Value) throws -> Bool?

    /// Takes the version this backer read last as not seen, so that the next check reports what the key holds then as a
    /// change. A version it wrote last stays seen. Used when a check's read was not adopted because a change of this
    /// process was written meanwhile.
    func forgetLastRead()

    /// Writes `value` as the changes it makes to the bytes it was read from (or to `defaultValue`'s), onto what the key
    /// holds now (see ``FieldMerge``). Returns `.plain` when the backer writes values whole, `.written`, or
    /// `.writtenOver` when the key holds another program's changes too.
    func writeChange(_ value: Value, defaultValue: () -> Value) throws(WLStorageError) -> ChangeWrite

    /// The storage took the value the last check read: the changes made from now on are taken against its bytes.
    func adoptSeen()
}

/// How ``StoreBacking/writeChange(_:defaultValue:)`` wrote a change.
enum ChangeWrite {
    /// The backer writes values whole: the change is to be written so.
    case plain
    case written
    /// Written onto another program's change, which the key now holds beside it.
    case writtenOver
}

extension StoreBacking {
    func writeChange(_ value: Value, defaultValue: () -> Value) throws(WLStorageError) -> ChangeWrite { .plain }
    func adoptSeen() {}
}

/// The version of a key a backer saw last, written or read, by a stamp of it (``stamp(_:)``, ``stamp(_:identity:)``).
/// Only that one is not a change: a change back to an earlier version is a change like any other. A file's stamp
/// takes in its identity, which a later version never has again; a store's stamp is of the bytes alone.
///
/// It also holds the bytes of the version seen last, when they are a JSON object, whose unknown members a write
/// keeps (see ``UnknownFields``).
struct KnownVersions: Sendable {
    /// The stamp of the version seen last, or 0 for none; a stamp is odd, and 2 stands for a version read and then
    /// forgotten (see ``forgetLastRead()``).
    private var last = 0
    /// Whether the version seen last was read (not written).
    private var lastWasRead = false
    private var unknownFieldsBase = UnknownFieldsBase()
    /// The bytes the last check saw, until the storage adopts them (see ``saw(_:_:)``).
    private var seen: Data?
    /// The fields renamed by the migrations of the key's storages, which writes hold under both names.
    var renames: [FieldRename] = []

    /// The stamp of a store's bytes.
    static func stamp(_ data: Data) -> Int {
        var hasher = Hasher()
        data.withUnsafeBytes { hasher.combine(bytes: $0) }
        return hasher.finalize() | 1
    }

    /// The stamp of a file's version: its identity and its contents together, as a file system with coarse timestamps
    /// can reuse an inode with our identity.
    static func stamp(_ data: Data, identity: FileIdentity) -> Int {
        var hasher = Hasher()
        hasher.combine(identity)
        data.withUnsafeBytes { hasher.combine(bytes: $0) }
        return hasher.finalize() | 1
    }

    /// The bytes whose unknown members a write keeps: none when the next write is to drop them, which it then does.
    ///
    /// Those of the bytes a check saw last, when the storage kept its own change over them.
    mutating func takeBase() -> Data? {
        let dropping = unknownFieldsBase.drops
        let taken = unknownFieldsBase.take()
        guard !dropping else { return nil }
        return seen.flatMap(UnknownFields.base) ?? taken
    }

    mutating func dropUnknownFields() { unknownFieldsBase.dropUnknownFields() }

    /// Takes `data`, read but not adopted (bytes another version stored), as what the next write replaces: its unknown
    /// members are kept. The version seen last stays, so that a check still reports the bytes.
    mutating func replacing(_ data: Data) { unknownFieldsBase.record(data) }

    /// Records the version `stamp`, whose bytes are `data`, as written.
    mutating func wrote(_ stamp: Int, _ data: Data) {
        last = stamp
        lastWasRead = false
        unknownFieldsBase.record(data)
        unknownFieldsBase.wrote()
        seen = nil
    }

    /// The bytes the last check saw, when they are a JSON object and the storage has not taken them: another
    /// program's change that a change of the storage, pending then, is to be written onto.
    var seenObject: Data? { seen.flatMap(UnknownFields.base) }

    /// The bytes whose unknown members a write of a change keeps, that change being taken against them (see
    /// ``base``): none when the write is to drop them, which it then does.
    mutating func takeOrigin() -> Data? { unknownFieldsBase.take() }

    /// Forgets what the last check saw.
    mutating func forgetSeen() { seen = nil }

    /// The bytes the value was read from or written as, which a write takes its changes against (see ``FieldMerge``);
    /// `nil` when they are not a JSON object, or not known.
    var base: Data? { unknownFieldsBase.bytes }

    /// Records the version `stamp`, whose bytes are `data`, as seen by a check; they become the base only when the
    /// storage adopts them (``adoptSeen()``). Returns whether it is the version seen last.
    mutating func saw(_ stamp: Int, _ data: Data) -> Bool {
        defer {
            last = stamp
            lastWasRead = true
            seen = data
        }
        return stamp == last
    }

    /// The storage adopted what the last check saw: its bytes are the base of the changes made from now on.
    mutating func adoptSeen() {
        if let seen { unknownFieldsBase.record(seen) }
        seen = nil
    }

    /// Records `data` as written onto another program's change: the version written is taken as not seen, so that the
    /// next check reads it, while `data` stays the base of the changes made until then.
    mutating func wroteOver(_ data: Data) {
        last = 2
        lastWasRead = true
        unknownFieldsBase.record(data)
        unknownFieldsBase.wrote()
        seen = nil
    }

    /// Records the version `stamp`, whose bytes are `data`, as read; returns whether it is the version seen last.
    mutating func read(_ stamp: Int, _ data: Data) -> Bool {
        defer {
            last = stamp
            lastWasRead = true
            unknownFieldsBase.record(data)
            seen = nil
        }
        return stamp == last
    }

    /// Whether `stamp` is the version seen last.
    func isLast(_ stamp: Int) -> Bool { stamp == last }

    /// Takes the version read last, if the last version seen was read, as one no read matches, while a version is still
    /// known (so that a removal is one). A version written last stays seen.
    mutating func forgetLastRead() {
        if lastWasRead && last != 0 { last = 2 }
    }

    /// Forgets the version; returns whether one was known.
    mutating func forget() -> Bool {
        defer {
            last = 0
            lastWasRead = false
            unknownFieldsBase.record(nil)
            seen = nil
        }
        return last != 0
    }
}
