import Foundation
import WLStorage

/// A key of a store other than a directory (`--postgres`, `--etcd`), as `list` and `verify` show it.
struct StoreEntry {
    var key: String
    /// The size of the stored bytes.
    var size: Int
    /// When (PostgreSQL: the row's `updated_at`, in UTC) or at which revision (etcd) it was written last.
    var written: String
    /// The bytes, or `nil` when they are larger than the largest value read.
    var value: Data?
}

/// What `list` and `verify` say of a store's keys: its name for the column of when a key was written, and for a key
/// that has no value.
struct StoreLayout {
    /// The heading of the third column: `MODIFIED` for PostgreSQL's rows, `REVISION` for etcd's keys.
    var writtenColumn: String
    /// What holds a value: `row` or `key`.
    var holder: String
}

/// `list` on a store: the columns of a directory's `list`, for the store's keys. Each key, the size of its bytes, when
/// or at which revision it was written last, and what it holds, as the STATE column of a directory says it. With a key
/// file, each value is opened with the key. When `keys` are given, only theirs are listed, in that order, and a key
/// without a value is listed as having none.
///
/// - Returns: ``ExitStatus/failure`` when a key given has no value.
func list(_ entries: [StoreEntry], layout: StoreLayout, keys: [String], keyFile: KeyFile?) -> ExitStatus {
    var lines = [["KEY", "SIZE", layout.writtenColumn, "STATE"]]
    var status = ExitStatus.success
    for key in keys.isEmpty ? entries.map(\.key) : keys {
        guard let entry = entries.first(where: { $0.key == key }) else {
            lines.append([printableName(key), "-", "-", "no value (no \(layout.holder))"])
            status = .failure
            continue
        }
        lines.append([
            printableName(entry.key), String(entry.size), entry.written, state(of: entry, keyFile: keyFile).label,
        ])
    }
    Console.out(table(lines))
    return status
}

/// `verify` on a store: every key holds JSON, or, with a key file, a value sealed with that key whose plaintext is
/// JSON. Prints one line for each key that does not, and a summary.
///
/// - Returns: ``ExitStatus/failure`` when a key does not.
func verify(_ entries: [StoreEntry], layout: StoreLayout, in identity: String, keyFile: KeyFile?) -> ExitStatus {
    var report = ""
    var problems = 0
    for entry in entries {
        let problem: String? =
            switch state(of: entry, keyFile: keyFile) {
            case .json, .empty, .encrypted: nil
            case .invalid(let reason): "does not hold JSON: \(reason)"
            case .sealed(let sealed): "\(sealed); pass --key-file with that key to check it"
            case .encryptedNotJSON: "opens with the key, but its value is not JSON"
            case .doesNotOpen(let reason): "does not open with the key: \(reason)"
            case .notEncrypted: "not encrypted: it holds JSON as a store without encryption keeps it"
            case .tooLarge: StoredFile.tooLargeReason
            default: "cannot be checked"
            }
        if let problem {
            problems += 1
            report += "bad: \(printableName(entry.key)): \(problem)\n"
        }
    }
    let summary = problems == 0 ? "no problems" : problems == 1 ? "1 problem" : "\(problems) problems"
    let checked = entries.count
    report += "\(checked) \(layout.holder)\(checked == 1 ? "" : "s") checked in \(identity): \(summary)\n"
    Console.out(report)
    return problems == 0 ? .success : .failure
}

/// What a store's key holds.
private func state(of entry: StoreEntry, keyFile: KeyFile?) -> DirectoryEntry.State {
    guard let value = entry.value else { return .tooLarge }
    if value.isEmpty { return .empty }
    guard let keyFile else {
        guard let problem = JSONText.problem(in: value) else { return .json }
        if let sealed = SealedValue.description(of: value) { return .sealed(sealed) }
        return .invalid(problem.description)
    }
    switch keyFile.open(value, storedUnder: entry.key, path: "") {
    case .plaintext(let plaintext): return JSONText.problem(in: plaintext) == nil ? .encrypted : .encryptedNotJSON
    case .notEncrypted: return .notEncrypted
    case .doesNotOpen(let reason): return .doesNotOpen(reason)
    }
}
