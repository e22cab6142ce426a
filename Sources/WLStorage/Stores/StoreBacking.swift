import Foundation
import WLStorageFiles
import WLStorageJSON

/// What a cell needs of its backer beyond ``WLStorageBacker``: telling nothing stored, saving a default only there,
/// and reading an outside change. A plain custom backer lacks it (see ``WLStorageBacker/readResult(defaultValue:)``).
protocol StoreBacking<Value>: Sendable {
    associatedtype Value: Codable & Sendable

    /// Reads what is stored: a value (reshaped by `decoding`'s steps, or not), nothing, bytes kept aside, or a failure.
    func readStored(decoding: ValueDecoding<Value>) -> ReadResult<Value>

    /// Stores `value` unless something is stored; returns whether it did.
    func create(value: Value) throws(WLStorageError) -> Bool

    /// Whether something (an empty file) stands where a read found nothing: no default is saved over it.
    var entryExists: Bool { get }

    /// What changed since this backer last wrote or read; decoded by `decoding`'s steps but never written back.
    func readExternalChange(decoding: ValueDecoding<Value>) throws(WLStorageError) -> ExternalChange<Value>

    /// Whether what it read or wrote last is a JSON object, whose unknown members a write may drop (an array has none).
    var keepsFields: Bool { get }

    /// Writes `value` whole; with `dropping`, without the stored members its type does not know.
    func write(_ value: Value, dropping: Bool) throws

    /// Writes `value`, read in an earlier shape, only while the key holds what this backer read or wrote last; returns
    /// whether it did, or `nil` when it cannot tell (a plain write).
    func rewrite(_ value: Value, dropping: Bool) throws -> Bool?

    /// Takes the version read last as unseen, so the next check reports it (after a check that was not adopted).
    func forgetLastRead()

    /// Writes `value` as its changes to the bytes it was read from (or `defaultValue`'s) onto what the key holds now
    /// (``FieldMerge``), or `.plain` for a backer that writes whole values.
    func writeChange(_ value: Value, dropping: Bool, defaultValue: () -> Value) throws(WLStorageError) -> ChangeWrite

    /// The storage took the value the last check read: later changes are taken against its bytes.
    func adoptSeen()
}

/// How ``StoreBacking/writeChange(_:dropping:defaultValue:)`` wrote a change.
enum ChangeWrite {
    /// The backer writes values whole: the change is to be written so.
    case plain
    case written
    /// Written onto another program's change, which the key now holds beside it.
    case writtenOver
}

extension StoreBacking {
    func writeChange(_ value: Value, dropping: Bool, defaultValue: () -> Value) throws(WLStorageError) -> ChangeWrite {
        .plain
    }
    func adoptSeen() {}
}

/// The version a backer saw last (by stamp: only it is no change), and the last object seen, for its unknown members.
struct KnownVersions: Sendable {
    /// The stamp of the version seen last, 0 for none; stamps are odd, 2 is a read forgotten (``forgetLastRead()``).
    private(set) var last = 0
    /// Whether the version seen last was read (not written).
    private var lastWasRead = false
    /// The JSON object bytes last read or written: their unknown members a write keeps, the base of its changes.
    private(set) var base: Data?
    /// The fields renamed by the migrations of the key's storages, which writes hold under both names.
    var renames: [FieldRename] = []
    /// ``rare`` behind one pointer, `nil` while it is empty, as it is for most keys.
    private var boxed: Boxed?
    private indirect enum Boxed { case rare(Rare) }

    /// What a key sees only after another program's change, bytes that do not decode, or a lost answer.
    var rare: Rare {
        get { if case .rare(let rare)? = boxed { rare } else { Rare() } }
        set { boxed = newValue.isEmpty ? nil : .rare(newValue) }
    }

    struct Rare {
        /// The bytes the last check saw, until the storage adopts them (see ``saw(_:_:)``).
        var seen: Data?
        /// Bytes that do not decode, seen last at the key: the next write keeps a copy aside before it replaces them.
        var undecodable: Data?
        /// The stamp of the bytes that do not decode a write last kept a copy of: a write tried again keeps no more.
        var copied = 0
        /// A change's write of unknown outcome, until a write or a read.
        var unsure: UnsureWrite?

        var isEmpty: Bool { seen == nil && undecodable == nil && copied == 0 && unsure == nil }
    }

    /// The stamp of a store's bytes, or of a file's version (identity and contents: an inode's time can be coarse).
    static func stamp(_ data: Data, identity: FileIdentity? = nil) -> Int {
        var hasher = Hasher()
        if let identity { hasher.combine(identity.lastingStamp ^ identity.device) }  // all five fields, mixed cheaply
        data.withUnsafeBytes { hasher.combine(bytes: $0) }
        return hasher.finalize() | 1
    }

    /// Makes `data` (read, not adopted) what the next write replaces, its unknown members kept, or a copy of it kept
    /// aside first when it is `undecodable`; the version seen stays.
    mutating func replacing(_ data: Data, undecodable: Bool) {
        base = UnknownFields.base(data)
        rare.undecodable = undecodable ? data : nil
    }

    mutating func wrote(_ stamp: Int, _ data: Data) {
        (last, lastWasRead, rare) = (stamp, false, Rare(copied: rare.copied))
        base = UnknownFields.base(data)
    }

    /// The object bytes the last check saw, not taken: another program's change a pending change is written onto.
    var seenObject: Data? { rare.seen.flatMap(UnknownFields.base) }

    /// Makes the bytes read last seen, as by a check, rather than the base: the storage has not taken them yet.
    mutating func readAsSeen() { (rare.seen, base) = (base, nil) }

    /// Records `stamp`/`data` as seen by a check (the base once adopted); returns whether it is the last seen.
    mutating func saw(_ stamp: Int, _ data: Data) -> Bool {
        let same = stamp == last
        // Bytes that do not decode, seen again, still want their copy.
        if !same { rare.undecodable = nil }
        (last, lastWasRead, rare.seen) = (stamp, true, data)
        return same
    }

    /// The storage adopted what the last check saw (a removal: the default, of no bytes): the base of later changes.
    mutating func adoptSeen() {
        if let seen = rare.seen { base = UnknownFields.base(seen) } else if last == 0 { base = nil }
        rare.seen = nil
    }

    /// Records `data` as written onto another's change: the next check reads the version, and `data` stays the base.
    mutating func wroteOver(_ data: Data) {
        wrote(2, data)
        lastWasRead = true
    }

    /// Records the version `stamp`, whose bytes are `data`, as read; returns whether it was seen last, and is an object.
    mutating func read(_ stamp: Int, _ data: Data) -> (same: Bool, object: Bool) {
        let same = stamp == last
        (last, lastWasRead, base) = (stamp, true, UnknownFields.base(data))
        if boxed != nil { rare = Rare(copied: rare.copied) }  // else it is empty already
        return (same, base != nil)
    }

    /// Takes the version read last (a removal too), if read, as one no read matches yet known, so a removal is one.
    mutating func forgetLastRead() {
        if lastWasRead { last = 2 }
    }

    /// A check found nothing stored: forgets the version, not a pending change's base; returns whether one was known.
    mutating func readRemoval() -> Bool {
        lastWasRead = forget(keepingBase: true)
        return lastWasRead
    }

    /// Forgets the version (and the base, unless `keepingBase`); returns whether one was known.
    mutating func forget(keepingBase: Bool = false) -> Bool {
        defer {
            (last, lastWasRead, rare) = (0, false, Rare(copied: rare.copied, unsure: rare.unsure))
            if !keepingBase { base = nil }
        }
        return last != 0
    }
}

/// A change's write of unknown outcome: the bytes sent, the value's own, and those it was to replace.
struct UnsureWrite: Sendable {
    let sent: Data
    let own: Data
    let over: Data?
}
