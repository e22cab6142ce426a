import Foundation
import WLStorage
import WLStoragePostgres

/// `list` on a PostgreSQL store: the columns of a directory's `list`, for rows. Each row's key, the size of its bytes,
/// when it was written last (the row's `updated_at`, in UTC), and what it holds, as the STATE column of a directory
/// says it. With a key file, each value is opened with the key. When `keys` are given, only their rows are listed, in
/// that order, and a key without a row is listed as having no value.
///
/// - Returns: ``ExitStatus/failure`` when a key given has no row.
func list(_ store: WLStoragePostgresStore, keys: [String], keyFile: KeyFile?) throws(ToolFailure) -> ExitStatus {
    let rows: [WLStoragePostgresStore.Row]
    do {
        rows = try store.rows()
    } catch let error as WLStorageError {
        throw ToolFailure(error)
    } catch {
        throw ToolFailure("\(store.identity): \(error)")
    }
    var lines = [["KEY", "SIZE", "MODIFIED", "STATE"]]
    var status = ExitStatus.success
    for key in keys.isEmpty ? rows.map(\.key) : keys {
        guard let row = rows.first(where: { $0.key == key }) else {
            lines.append([printableName(key), "-", "-", "no value (no row)"])
            status = .failure
            continue
        }
        lines.append([printableName(row.key), String(row.size), row.written, state(of: row, keyFile: keyFile).label])
    }
    Console.out(table(lines))
    return status
}

/// What a row holds.
private func state(of row: WLStoragePostgresStore.Row, keyFile: KeyFile?) -> DirectoryEntry.State {
    guard let value = row.value else { return .tooLarge }
    if value.isEmpty { return .empty }
    guard let keyFile else {
        guard let problem = JSONText.problem(in: value) else { return .json }
        if let sealed = SealedValue.description(of: value) { return .sealed(sealed) }
        return .invalid(problem.description)
    }
    switch keyFile.open(value, storedUnder: row.key, path: "") {
    case .plaintext(let plaintext): return JSONText.problem(in: plaintext) == nil ? .encrypted : .encryptedNotJSON
    case .notEncrypted: return .notEncrypted
    case .doesNotOpen(let reason): return .doesNotOpen(reason)
    }
}
