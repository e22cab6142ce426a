import Foundation
import WLStorage
import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Runs `invocation`, writing its output, and returns the status to exit with.
///
/// - Throws: ``ToolFailure`` for a key not found, a file that does not verify or an operation that failed.
func run(_ invocation: Invocation, environment: [String: String]) throws(ToolFailure) -> ExitStatus {
    let command = invocation.command
    switch command {
    case .help(let topic):
        Console.out(topic.map(Help.text(for:)) ?? Help.tool)
        return .success
    case .hash(let key):
        Console.out(try fileName(for: key) + "\n")
        return .success
    default:
        break
    }

    if let url = invocation.options.postgres {
        let store: WLStoragePostgresStore
        do {
            store = try WLStoragePostgresStore(url: url, namespace: invocation.options.namespace ?? "default")
        } catch {
            throw ToolFailure(error.message, status: .usage)
        }
        return try run(command, on: store)
    }
    let directory = try storageDirectory(for: invocation.options, environment: environment)
    switch command {
    case .help, .hash:
        return .success
    case .get(let key):
        try get(key, in: directory)
    case .set(let key, let json):
        try set(key, json: json, in: directory)
    case .remove(let key):
        let name = try fileName(for: key)
        guard try inDirectory(directory, { () throws(WLStorageError) in try directory.remove(name) }) else {
            throw ToolFailure("no value stored for '\(key)': \(directory.filePath(name))")
        }
    case .path(let key):
        Console.out(directory.filePath(try fileName(for: key)) + "\n")
        if isStorageDirectoryMissing(directory) {
            Console.error("wlstorage: note: no storage directory at \(directory.path)\n")
        }
    case .list:
        try list(directory)
    case .verify:
        return try verify(directory)
    case .watch(let key, let count):
        try watch(key: key, fileName: try fileName(for: key), in: directory, count: count)
    }
    return .success
}

// MARK: Commands

private func get(_ key: String, in directory: StorageDirectory) throws(ToolFailure) {
    let name = try fileName(for: key)
    let contents = try inDirectory(directory) { () throws(WLStorageError) in
        try StoredFile.read(Array(name.utf8), in: directory)
    }
    switch contents {
    case nil:
        throw ToolFailure("no value stored for '\(key)': \(directory.filePath(name))")
    case .tooLarge:
        throw ToolFailure("the file of '\(key)' is \(StoredFile.tooLargeReason): \(directory.filePath(name))")
    case .bytes(let contents) where contents.isEmpty:
        throw ToolFailure("no value stored for '\(key)' (the file is empty): \(directory.filePath(name))")
    case .bytes(let contents):
        if let problem = JSONText.problem(in: contents) {
            throw ToolFailure("the file does not hold JSON (\(problem)): \(directory.filePath(name))")
        }
        Console.out(String(decoding: JSONText.pretty(contents), as: UTF8.self) + "\n")
    }
}

private func set(_ key: String, json: String, in directory: StorageDirectory) throws(ToolFailure) {
    let name = try fileName(for: key)
    let data = Data(json.utf8)
    if let problem = JSONText.problem(in: data) {
        throw ToolFailure("the value is not valid JSON: \(problem)")
    }
    try createStorageDirectoryIfMissing(directory)
    announceRemoved(try cleanTemporaryFiles(in: directory))
    _ = try library { () throws(WLStorageError) in try directory.write(name, contents: JSONText.compact(data)) }
}

private func list(_ directory: StorageDirectory) throws(ToolFailure) {
    announceRemoved(try cleanTemporaryFiles(in: directory))
    var rows = [["NAME", "KEY", "SIZE", "MODIFIED", "STATE"]]
    for name in try entryNames(of: directory) {
        guard let entry = DirectoryEntry(name: name, in: directory) else { continue }
        rows.append([
            entry.printedName, entry.key, String(entry.status.size),
            entry.status.modificationTime.formatted(.iso8601), entry.state.label,
        ])
    }
    var widths = [Int](repeating: 0, count: rows[0].count)
    for row in rows {
        for (column, cell) in row.enumerated() { widths[column] = max(widths[column], cell.count) }
    }
    var text = ""
    for row in rows {
        let cells = row.enumerated().map { column, cell in
            column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
        }
        text += cells.joined(separator: "  ") + "\n"
    }
    Console.out(text)
}

private func verify(_ directory: StorageDirectory) throws(ToolFailure) -> ExitStatus {
    var report = ""
    for removed in try cleanTemporaryFiles(in: directory) {
        report += "note: \(printableName(removed)): removed: the temporary file of a writer that crashed\n"
    }
    var problems = 0
    var checked = 0
    for name in try entryNames(of: directory) {
        guard let entry = DirectoryEntry(name: name, in: directory) else { continue }
        let problem: String?
        switch entry.state {
        case .json, .empty:
            checked += 1
            problem = nil
        case .movedAside:
            report += "note: \(entry.printedName): moved aside by the library because it did not decode; not checked\n"
            problem = nil
        case .keptOriginal:
            report +=
                "note: \(entry.printedName): what the key's file held before its type changed; the library keeps it"
                + " until it has written the value in the new shape, and then removes it; not checked\n"
            problem = nil
        case .temporary(inUse: true):
            report += "note: \(entry.printedName): the temporary file of a writer at work; not checked\n"
            problem = nil
        case .temporary(inUse: false):
            problem = "the temporary file of a writer that crashed; it could not be removed"
        case .invalid(let reason):
            checked += 1
            problem = "does not hold JSON: \(reason)"
        case .tooLarge:
            checked += 1
            problem = StoredFile.tooLargeReason
        case .unreadable(let reason):
            checked += 1
            problem = "cannot be read: \(reason)"
        case .notRegular(let kind):
            problem = "not a regular file (\(kind))"
        case .other:
            let why = entry.role == .foreign(isUTF8: false) ? "its name is not UTF-8" : "no key maps to this name"
            problem = "not a file the library writes (\(why))"
        }
        if let problem {
            problems += 1
            report += "bad: \(entry.printedName): \(problem)\n"
        }
    }
    let summary = problems == 0 ? "no problems" : problems == 1 ? "1 problem" : "\(problems) problems"
    report += "\(checked) key file\(checked == 1 ? "" : "s") checked in \(directory.path): \(summary)\n"
    Console.out(report)
    return problems == 0 ? .success : .failure
}

// MARK: Helpers

/// The file name `key` maps to.
func fileName(for key: String) throws(ToolFailure) -> String {
    guard let name = FileName.forKey(key) else {
        throw ToolFailure("cannot hash the key: SHA-256 is not available from OpenSSL")
    }
    return name
}

/// The names of the entries of `directory`, as bytes; a missing directory is a failure with a plain message.
private func entryNames(of directory: StorageDirectory) throws(ToolFailure) -> [[UInt8]] {
    try inDirectory(directory) { () throws(WLStorageError) in try directory.rawEntryNames() }
}

/// Removes the temporary files of crashed writers from `directory`, and returns their names; a missing directory is
/// a failure with a plain message.
private func cleanTemporaryFiles(in directory: StorageDirectory) throws(ToolFailure) -> [String] {
    try inDirectory(directory) { () throws(WLStorageError) in try removeAbandonedTemporaryFiles(in: directory) }
}

/// Names on standard error the temporary files `cleanTemporaryFiles(in:)` removed.
private func announceRemoved(_ names: [String]) {
    for name in names {
        Console.error("wlstorage: removed the temporary file of a writer that crashed: \(printableName(name))\n")
    }
}

/// Runs a library call on `directory`, turning a missing directory into a failure with a plain message.
func inDirectory<R>(
    _ directory: StorageDirectory, _ body: () throws(WLStorageError) -> R
) throws(ToolFailure) -> R {
    do {
        return try body()
    } catch {
        if error.code == .directoryUnavailable, error.errno == ENOENT {
            throw ToolFailure("no storage directory at \(directory.path)")
        }
        throw ToolFailure(error)
    }
}

/// Runs a library call, turning its error into a ``ToolFailure``.
func library<R>(_ body: () throws(WLStorageError) -> R) throws(ToolFailure) -> R {
    do {
        return try body()
    } catch {
        throw ToolFailure(error)
    }
}
