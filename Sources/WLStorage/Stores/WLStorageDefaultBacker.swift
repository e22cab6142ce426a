import Foundation
import Synchronization
import WLStorageFiles
import WLStorageJSON

/// The backer that keeps each value in its own JSON file in a directory.
///
/// The file is named by the key when the key is a plain file name, else by the key's SHA-256, so no key names a file
/// outside the directory or another key's file. Writes are atomic and durable, mode 0600; reads never follow a symlink.
/// See <doc:Guarantees> for names, writes and unreadable files, <doc:ChangingAStoredType> for unknown members, and
/// <doc:Architecture>: every storage of a key in a store keeps its value through this class.
public final class WLStorageDefaultBacker<T: Codable & Sendable>: WLStorageBacker, Sendable {
    /// The key the value is stored under.
    public let key: String

    /// The file that holds the value, or `nil` when no directory is available (reported on the first read or write).
    public var fileURL: URL? {
        guard let directory, let fileName else { return nil }
        return URL(fileURLWithPath: directory.filePath(fileName), isDirectory: false)
    }

    private let held: HeldMedium  // the two flags next fill its spare bytes
    /// Whether a storage keeps its value through this backer (its writes are its own, not another program's).
    private let attached = Atomic<Bool>(false)
    /// Whether the medium keeps the bytes from before the type changed, removed after a write in the current shape.
    private let keepsOriginal = Atomic<Bool>(false)

    var medium: any KeyMedium { held.medium }
    /// The version this backer last wrote or read, to tell its own versions from other programs' changes.
    let known = Lock(KnownVersions())
    /// The values decoded from objects seen last and from the base's, up to 64 KiB: the bases of a merge's comparison.
    private let decodedBases = Lock<[DecodedValue]>([])

    /// Marks the backer as a storage's own (see ``attached``).
    func attach() { attached.store(true, ordering: .relaxed) }

    /// Creates a backer for `key` in `directory`, created with mode 0700 on first use.
    ///
    /// - Parameters:
    ///   - key: The key. Any string is accepted.
    ///   - directory: The directory to keep the file in. Defaults to ``WLStorageSystem/defaultDirectory``.
    public init(key: String, directory: URL? = WLStorageSystem.defaultDirectory) {
        self.key = key
        self.held = .file(
            FileMedium(directory: directory.map(DirectoryTable.directory(for:)), fileName: FileName.forKey(key)))
    }

    /// Creates the backer of `key`, whose bytes `medium`, a key of a store other than a directory, keeps.
    init(key: String, medium: StoreMedium) {
        self.key = key
        self.held = .store(medium)
    }

    deinit { held.file?.release() }

    /// Reads the file. A missing or empty file gives `defaultValueClosure()`, which also fills fields a file lacks (see
    /// <doc:ChangingAStoredType>).
    ///
    /// - Parameter defaultValueClosure: Makes the value for a missing or empty file, and the fields a file lacks.
    /// - Returns: The decoded value, or the default.
    /// - Throws: ``WLStorageError``: ``WLStorageError/Code/decodingFailed`` (not JSON, moved aside; or sealed, left),
    ///   ``WLStorageError/Code/storedByAnotherVersion`` (left), ``WLStorageError/Code/notARegularFile``,
    ///   ``WLStorageError/Code/valueTooLarge``, ``WLStorageError/Code/readFailed`` or
    ///   ``WLStorageError/Code/directoryUnavailable``.
    public func read(defaultValueClosure: () -> T) throws -> T {
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

    /// Writes `value` as JSON, atomically and durably, with mode 0600.
    ///
    /// - Parameter value: The value to store.
    /// - Throws: ``WLStorageError`` (the file unchanged): ``WLStorageError/Code/encodingFailed``,
    ///   ``WLStorageError/Code/valueTooLarge``, ``WLStorageError/Code/writeFailed``,
    ///   ``WLStorageError/Code/notARegularFile`` or ``WLStorageError/Code/directoryUnavailable``.
    public func write(value: T) throws { _ = try place(value, replacing: true, dropping: false) }

    // MARK: What the storage uses beyond the protocol

    package var directory: StorageDirectory? { held.file?.directory }

    package var fileName: String? { held.file?.fileName }

    /// Where the storage follows changes made elsewhere, and how the registry knows its cell.
    var source: MediumSource {
        switch held {
        case .file(let file): file.source
        case .store(let store): .store(store)
        }
    }

    var storeMedium: StoreMedium? {
        if case .store(let medium) = held { medium } else { nil }
    }

    /// Writes `value` unless something (even an empty file) is stored; a secret store saves no default.
    func create(value: T) throws(WLStorageError) -> Bool {
        guard savesDefault else { return true }
        return try place(value, replacing: false, dropping: false)
    }

    /// Whether a default is saved where nothing is stored (see ``create(value:)``).
    var savesDefault: Bool { held.file != nil || medium.savesDefault }

    var entryExists: Bool { medium.entryExists(key: key) }

    /// Where the bytes are, as messages name them.
    var place: StoredPlace { medium.place(key: key) }

    /// Reads the key: its value, its absence (nothing or empty bytes), or why not. Bytes that do not decode even
    /// through `decoding` are kept aside and count as absent; `prepared`: the directory was just prepared; `again`: a
    /// key changed while being kept aside is read once more.
    @inline(__always)
    func readStored(
        prepared: Bool = false, again: Bool = true, decoding: @autoclosure () -> ValueDecoding<T>
    ) -> ReadResult<T> {
        let read: ReadBytes
        let rewrite: Bool
        switch held.file?.read(key: key, prepared: prepared) ?? medium.read(key: key, prepared: prepared) {
        case .bytes(let bytes, let underPreviousKey):
            (read, rewrite) = (bytes, underPreviousKey)
        case .absent:
            return .absent
        case .keptAside(let error):
            _ = known.withLock { $0.forget() }
            return .movedAside(error)
        case .failed(let error):
            return .failed(error)
        }
        // The plain decode first, unless a rename is declared; its error goes on, so `init(from:)` runs once.
        var plainError: (any Error)?
        if !rewrite, known.withLock({ $0.renames.isEmpty }) {
            do {
                let value = try JSONCoders.decoder.decode(T.self, from: read.data)
                decoded(value, from: read.data, readObject: known.withLock { $0.read(read.stamp, read.data).object })
                return .value(value)
            } catch {
                plainError = error
            }
        }
        return readStored(read, rewrite: rewrite, decoding: decoding(), plainError: plainError, again: again)
    }

    /// What `read` is to the storage opening it (``StoredBytes``): the value, reshaped (original kept, marked for a
    /// rewrite), another version's (left), or kept aside; a key changed meanwhile is read again when `again`.
    @inline(never)
    private func readStored(
        _ read: ReadBytes, rewrite: Bool, decoding: ValueDecoding<T>, plainError: (any Error)?, again: Bool
    ) -> ReadResult<T> {
        let object = known.withLock { $0.read(read.stamp, read.data).object }
        switch StoredBytes.read(read.data, at: place, decoding: decoding, plainError: plainError) {
        case .value(let value):
            decoded(value, from: read.data, readObject: object)
            guard rewrite else { return .value(value) }
            medium.willRewrite(read)
            return .reshaped(value, rewrite: true, note: nil)
        case .migrated(let value, let type):
            if let note = medium.keepOriginal(read.data, "were in the shape of \(type), and were migrated", key: key) {
                return .reshaped(value, rewrite: false, note: note)
            }
            keepsOriginal.store(true, ordering: .relaxed)
            medium.willRewrite(read)
            return .reshaped(value, rewrite: true, note: nil)
        case .anotherVersion(let error):
            return .anotherVersion(error)
        case .sealedElsewhere(let error):
            // Another key's secret: not kept aside, and never replaced.
            return .failed(error)
        case .undecodable(let judged, let error):
            switch medium.keepAside(read, judged: judged, type: "\(T.self)", error, key: key) {
            case .kept(let error):
                _ = known.withLock { $0.forget() }
                return .movedAside(error)
            case .changed(let error):
                // Kept aside only while the key holds the version read; a key changed meanwhile is read again, once.
                return again ? readStored(prepared: true, again: false, decoding: decoding) : .failed(error)
            case .failed(let error):
                return .failed(error)
            }
        }
    }

    /// What another program did to the key since this backer last wrote or read it (``KnownVersions``). Bytes that do
    /// not decode are reported and left as they are, until this backer's next write keeps a copy of them aside.
    func readExternalChange(decoding: ValueDecoding<T>) throws(WLStorageError) -> ExternalChange<T> {
        switch try medium.readForCheck(key: key) {
        case .unchanged:
            return .unchanged
        case .unreadable(let error):
            _ = known.withLock { $0.forget() }
            return .unreadable(error)
        case .bytes(nil):
            return known.withLock { $0.readRemoval() } ? .removed : .unchanged
        case .bytes(let read?):
            if known.withLock({ $0.saw(read.stamp, read.data) }) { return .unchanged }
            do throws(WLStorageError) {
                let change = try StoredBytes.change(read.data, at: place, decoding: decoding)
                if case .changed(let value) = change { decoded(value, from: read.data) }
                return change
            } catch {
                if error.code == .decodingFailed { known.withLock { $0.rare.undecodable = read.data } }
                throw error
            }
        }
    }

    func write(_ value: T, dropping: Bool) throws {
        try keepUndecodableCopy()
        _ = try place(value, replacing: true, dropping: dropping)
    }

    /// Keeps a copy of bytes that do not decode aside before a write replaces them: those seen last at the key, or
    /// `found` there by the write when they are not JSON; once for the same bytes, however often the write is tried.
    private func keepUndecodableCopy(found: Data? = nil) throws(WLStorageError) {
        if let found, JSONSyntax.problem(in: found) == nil { return }
        guard let bytes = found ?? known.withLock({ $0.rare.undecodable }) else { return }
        let stamp = KnownVersions.stamp(bytes)
        guard known.withLock({ $0.rare.copied != stamp }) else { return }
        let copy = try medium.keepCopy(bytes, key: key)
        known.withLock { known in
            if known.rare.undecodable == bytes { known.rare.undecodable = nil }
            known.rare.copied = stamp
        }
        WLStorageSystem.report(
            WLStorageError(
                code: .decodingFailed,
                message: "what another program stored does not decode as \(T.self), and this program's value replaces"
                    + " it; a copy of it was kept aside at \(copy)",
                key: key, path: place.path))
    }

    func rewrite(_ value: T, dropping: Bool) throws -> Bool? {
        let outcome = try medium.rewrite(
            key: key, announced: attached.load(ordering: .relaxed),
            isLast: { stamp in known.withLock { $0.last == stamp } },
            encode: { () throws(WLStorageError) -> Data in
                try encode(value, dropping: dropping)
            })
        switch outcome {
        case .plain:
            return nil
        case .gaveWay:
            return false
        case .written(let data, let stamp):
            recordWrite(data, stamp: stamp)
            return true
        }
    }

    /// A file's key is written field by field onto what it holds; a store's whole, unless another program's change was
    /// seen since the read (see the store's below). `defaultValue` is the base of a value not read from the key.
    func writeChange(_ value: T, dropping: Bool, defaultValue: () -> T) throws(WLStorageError) -> ChangeWrite {
        try keepUndecodableCopy()
        guard let (base, renames) = try changeBase(defaultValue) else { return .plain }
        // The unknown members kept are those of the bytes read or written (another program's go in the merge).
        func encode() throws(WLStorageError) -> Data {
            let keeping = dropping ? nil : known.withLock { $0.base }
            return try JSONCoders.encode(value, key: key, renaming: renames, keepingUnknownOf: keeping)
        }
        switch held {
        case .file(let file): return try writeChange(encode(), to: file, base: base)
        case .store(let medium): return try writeChange(encode, to: medium, base: base)
        }
    }

    /// The bytes a change is taken against: read, written, or the default's where none were or another's object was.
    private func changeBase(_ defaultValue: () -> T) throws(WLStorageError) -> (Data, [FieldRename])? {
        let (base, seen, last, renames) = known.withLock { ($0.base, $0.seenObject, $0.last, $0.renames) }
        if let base { return (base, renames) }
        guard seen != nil || last == 0 else { return nil }
        let made = try JSONCoders.encode(defaultValue(), key: key, renaming: renames, keepingUnknownOf: nil)
        return UnknownFields.base(made).map { ($0, renames) }
    }

    /// The bytes for `data`, changed against `base` (as this program encodes its value), onto `stored` (another's, a
    /// renamed field's names holding the old one's value): the first that decodes of the merge (``FieldMerge``), with
    /// other enum cases whole, filled from `data`; else `data` whole, unless `stored` did not decode; `nil`: none.
    private func merging(_ data: Data, base read: Data, onto other: Data) -> Data? {
        let stored = FieldRename.reading(other, known.withLock { $0.renames })
        // After a write whose outcome is unknown, `stored`'s changes to what it replaced go onto the bytes sent, the
        // value's since its own bytes then onto that: a field another program changed wins (no tag tells whether the
        // write was made: one not made loses a later change of it), and one `stored` holds as before gets it again.
        if let unsure = known.withLock({ $0.rare.unsure }), unsure.own != read,
            let made = FieldMerge.merge(base: unsure.over ?? read, value: stored, stored: unsure.sent)
        {
            return merging(data, base: unsure.own, onto: made)
        }
        // Cast once found: nothing cast to an optional `T` would be a value of it, `nil`, taken for the bytes read.
        let found = decodedBases.withLock { $0.first { $0.bytes == read } }
        let base = found.flatMap { ($0.value as? T).flatMap { try? encode($0, replacing: read) } } ?? read
        guard let merged = FieldMerge.merge(base: base, value: data, stored: stored) else { return nil }
        func decodes(_ bytes: Data) -> Bool { (try? JSONCoders.decoder.decode(T.self, from: bytes)) != nil }
        if decodes(merged) { return merged }
        if let cases = FieldMerge.merge(base: base, value: data, stored: stored, replacingCases: true), cases != merged,
            decodes(cases)
        {
            return cases
        }
        if let filled = FieldMerge.filling(merged, from: data), decodes(filled) { return filled }
        return decodes(stored) ? data : merged
    }

    /// The error of a change that could not go onto other programs' changes, which kept coming: it stays pending.
    private var changesKeptComing: WLStorageError {
        WLStorageError(
            code: .writeFailed,
            message: "other programs kept changing the value while this program's change was written onto it; the"
                + " change stays pending and is tried again",
            key: key)
    }

    /// Refuses `merged`, a change written onto another program's, when it is larger than the maximum value size.
    private func checkSize(_ merged: Data) throws(WLStorageError) {
        guard merged.count > ValueSizeLimit.maximum else { return }
        throw WLStorageError(
            code: .valueTooLarge,
            message: "the value's changes, written onto what another program stored since it was read, make"
                + " \(merged.count) bytes, more than the maximum value size of \(ValueSizeLimit.maximum) bytes;"
                + " it is not written and stays pending",
            key: key)
    }

    private func writeChange(_ data: Data, to file: FileMedium, base: Data) throws(WLStorageError) -> ChangeWrite {
        var over = false
        let written = try file.write(key: key, announced: attached.load(ordering: .relaxed)) {
            stored throws(WLStorageError) -> Data? in
            over = false
            if let stored, stored != base { try keepUndecodableCopy(found: stored) }
            guard let stored, stored != base, let merged = merging(data, base: base, onto: stored) else { return data }
            over = true
            if merged == stored { return nil }
            try checkSize(merged)
            return merged
        }
        guard let (bytes, stamp) = written else { throw changesKeptComing }
        guard over else {
            recordWrite(bytes, stamp: stamp)
            return .written
        }
        known.withLock { $0.wroteOver(data) }
        settleKeptOriginal()
        return .writtenOver
    }

    /// How a change, `data`, goes in a store's batch: on its own after a write of unknown outcome or bytes that do not
    /// decode (a copy is kept); in a store that writes on condition, an object read or to store where nothing was (or a
    /// secret) on condition of the bytes read, never over another's change unheard of (on its own, merged, once seen).
    func batchCondition(_ data: Data) -> BatchCondition {
        guard let medium = storeMedium else { return .whole }
        return known.withLock { known in
            if known.rare.undecodable != nil || known.rare.unsure != nil { return .onItsOwn }
            guard medium.writesOnCondition,
                known.base != nil || known.seenObject != nil
                    || (known.last == 0 && (medium.conceals || data.first == UInt8(ascii: "{")))
            else { return .whole }
            return known.seenObject.map({ $0 == known.base }) ?? true ? .ifItHolds(known.base) : .onItsOwn
        }
    }

    /// A conditional store (secret too: no bytes unheard of are replaced) gets it whole while the key holds the bytes
    /// read or written (or none), or after another's change, the changed fields onto it, a few rounds; others, whole.
    /// A versioned store whose writes on condition of bytes cannot tell a lost answer's outcome gets them tagged.
    private func writeChange(
        _ encode: () throws(WLStorageError) -> Data, to medium: StoreMedium, base: Data
    ) throws(WLStorageError) -> ChangeWrite {
        let capabilities = medium.capabilities
        guard let conditional = capabilities.conditional else { return .plain }
        let tagging = capabilities.versioned.flatMap { $0.settlesLostAnswers ? nil : $0 }
        var stored = known.withLock { $0.seenObject ?? $0.base }
        let data = try encode()
        // A write made (its tag told), its answer lost, and written over since by a program that read it: that write is
        // newer in every field, a field set back to what this one found too, and the key is taken as it is.
        var madeAndWrittenOver = false
        func writeOnCondition(_ bytes: Data, ifItHolds expected: Data?) throws(WLStorageError) -> Bool {
            let outcome =
                tagging.flatMap { medium.write(bytes, ifItHolds: expected, through: $0, key: key) }
                ?? medium.write(bytes, ifItHolds: expected, through: conditional, key: key)
            switch outcome {
            case .stored(let overwritten):
                madeAndWrittenOver = overwritten
                return true
            case .refused: return false
            case .notStored(let error): throw error
            case .unknown(let error):
                // A versioned store makes it again: it told what it could (a claimed tag, the key's history, a traced
                // tag), and it was mostly never sent.
                if capabilities.versioned == nil {
                    let unsure = UnsureWrite(sent: bytes, own: data, over: expected)
                    known.withLock { $0.rare.unsure = unsure }
                }
                throw medium.failure(error, writing: true, key: key)
            }
        }
        func writtenOver() -> ChangeWrite {
            known.withLock { $0.wroteOver(data) }
            medium.wrote()
            settleKeptOriginal()
            return .writtenOver
        }
        for _ in 0..<8 {
            let merged = stored.map { $0 == base ? data : merging(data, base: base, onto: $0) ?? data } ?? data
            if merged != stored || stored == base {
                try checkSize(merged)
                let written = try writeOnCondition(merged, ifItHolds: stored)
                if written, !madeAndWrittenOver, stored == base || stored == nil {
                    wrote(merged)
                    return .written
                }
                if !written {
                    let current = try Result { try medium.store.read(key: medium.storedKey) }
                        .mapError { medium.failure($0, writing: false, key: key) }.get()
                    guard let current, !current.isEmpty else {
                        // Removed meanwhile: written whole while nothing is stored; a value stored anew is merged onto.
                        known.withLock { $0.rare.seen = nil }
                        guard try writeOnCondition(data, ifItHolds: current) else { continue }
                        guard madeAndWrittenOver else {
                            wrote(data)
                            return .written
                        }
                        return writtenOver()
                    }
                    try keepUndecodableCopy(found: current)
                    stored = current
                    continue
                }
            }
            return writtenOver()
        }
        throw changesKeptComing
    }

    /// Records `value` as decoded from `bytes` (an object of 64 KiB at most), beside the base's entry unless just read:
    /// a merge compares with this program's encoding of it (a `Set`'s order, digits). Dropped ones go after the lock.
    private func decoded(_ value: T, from bytes: Data, readObject: Bool? = nil) {
        guard bytes.count <= 65_536 else { return }
        let read = readObject != nil
        let base = read ? nil : known.withLock { $0.base }
        var entries = readObject ?? (UnknownFields.base(bytes) != nil) ? [DecodedValue(bytes: bytes, value: value)] : []
        decodedBases.withLock { kept in
            if !read, bytes != base, let entry = kept.first(where: { $0.bytes == base }) { entries.append(entry) }
            swap(&kept, &entries)
        }
    }

    func adoptSeen() { known.withLock { $0.adoptSeen() } }

    var keepsFields: Bool { known.withLock { $0.base != nil } }

    func forgetLastRead() { known.withLock { $0.forgetLastRead() } }

    // MARK: Writes

    /// Encodes `value` and writes it, replacing or only where nothing is; returns whether it was written.
    private func place(_ value: T, replacing: Bool, dropping: Bool) throws(WLStorageError) -> Bool {
        guard
            let (data, stamp) = try medium.write(
                key: key, replacing: replacing, announced: attached.load(ordering: .relaxed),
                encode: { () throws(WLStorageError) -> Data in try encode(value, dropping: dropping) })
        else { return false }
        recordWrite(data, stamp: stamp)
        return true
    }

    /// Records `data`, version `stamp`, as written; bytes kept from before the type changed go now.
    private func recordWrite(_ data: Data, stamp: Int) {
        known.withLock { $0.wrote(stamp, data) }
        settleKeptOriginal()
    }

    /// After a write in the current shape, removes the bytes kept from an earlier shape (failing, after the next one).
    private func settleKeptOriginal() {
        guard keepsOriginal.load(ordering: .relaxed), keepsOriginal.exchange(false, ordering: .relaxed) else { return }
        if (try? medium.removeKeptOriginal()) == nil { keepsOriginal.store(true, ordering: .relaxed) }
    }

    /// `value`'s bytes, size-checked, with the last bytes' unknown members (a check's, if kept over) unless `dropping`.
    func encode(_ value: T, dropping: Bool) throws(WLStorageError) -> Data {
        let (base, renames) = known.withLock { (dropping ? nil : $0.seenObject ?? $0.base, $0.renames) }
        return try JSONCoders.encode(value, key: key, renaming: renames, keepingUnknownOf: base)
    }

    /// Has writes hold each of `renames`' fields under its old name too. Returns whether any was new.
    @discardableResult
    func addRenames(_ renames: [FieldRename]) -> Bool {
        known.withLock { known in
            let added = renames.filter { !known.renames.contains($0) }
            known.renames += added
            return !added.isEmpty
        }
    }

    // MARK: A store's writes on condition and in batches

    /// Makes `data`, undecodable here, what the next write replaces, keeping its unknown members (or a copy).
    func willReplace(_ data: Data, undecodable: Bool) {
        known.withLock { $0.replacing(data, undecodable: undecodable) }
    }

    /// The bytes of `value` to replace `stored`, with the members of `stored` that its type does not know.
    func encode(_ value: T, replacing stored: Data?) throws(WLStorageError) -> Data {
        try JSONCoders.encode(
            value, key: key, renaming: known.withLock { $0.renames },
            keepingUnknownOf: stored.flatMap(UnknownFields.base))
    }

    /// Records `data` as the version written to a store's key (update or batch); bytes kept from before go now.
    func wrote(_ data: Data) {
        storeMedium?.wrote()
        recordWrite(data, stamp: KnownVersions.stamp(data))
    }
}

extension WLStorageDefaultBacker: StoreBacking {
    func readStored(decoding: ValueDecoding<T>) -> ReadResult<T> { readStored(prepared: false, decoding: decoding) }
}

/// How a store's pending change goes in a flush of every storage (``WLStorageDefaultBacker/batchCondition(_:)``).
enum BatchCondition: Equatable {
    case whole, onItsOwn
    /// In the batch written on condition, while the key holds these bytes (`nil`: nothing).
    case ifItHolds(Data?)
}

/// A value decoded from bytes, by those bytes. Not generic: a nested generic type would slow every opening.
private struct DecodedValue { let bytes: Data, value: any Sendable }

/// The medium of a backer in three words: a file's inline, a store's by reference (an existential takes five).
private enum HeldMedium: Sendable {
    case file(FileMedium)
    case store(StoreMedium)

    var medium: any KeyMedium {
        switch self {
        case .file(let file): file
        case .store(let store): store
        }
    }

    var file: FileMedium? {
        if case .file(let file) = self { file } else { nil }
    }
}
