import Foundation
import WLStorage
import WLStorageEtcd
import WLStorageFiles
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
        Console.out(Help.text(for: topic))
        return .success
    case .hash(let key):
        Console.out(try fileName(for: key) + "\n")
        return .success
    case .set(let key, let json):
        // Checked before anything is opened, for every store.
        if let problem = JSONText.problem(in: Data(json.utf8)) {
            throw ToolFailure(
                "the value is not valid JSON: \(problem)\nTo store it as a JSON string, type: "
                    + setStringCommand(invocation.options, key: key, text: json))
        }
    default:
        break
    }

    let keyFile = try invocation.options.keyFile.map { path throws(ToolFailure) in try KeyFile(path: path) }
    if let given = invocation.options.postgres {
        let url = try connectionString(given, environment: environment)
        let store: WLStoragePostgresStore
        do {
            store = try WLStoragePostgresStore(url: url, namespace: invocation.options.namespace ?? "default")
        } catch {
            throw ToolFailure(error.message, status: .usage)
        }
        let layout = StoreLayout(writtenColumn: "MODIFIED", holder: "row")
        return try run(command, on: store, layout: layout, keyFile: keyFile) { () throws(ToolFailure) in
            try calling(store) { try store.rows() }.map {
                StoreEntry(key: $0.key, size: $0.size, written: $0.written, value: $0.value)
            }
        }
    }
    if let given = invocation.options.etcd {
        let store = try etcdStore(given, namespace: invocation.options.namespace ?? "default")
        let layout = StoreLayout(writtenColumn: "REVISION", holder: "key")
        return try run(command, on: store, layout: layout, keyFile: keyFile) { () throws(ToolFailure) in
            try calling(store) { try store.entries() }.map {
                StoreEntry(key: $0.key, size: $0.value.count, written: String($0.revision), value: $0.value)
            }
        }
    }
    let directory = try storageDirectory(for: invocation.options, environment: environment)
    if isStorageDirectoryMissing(directory) {
        let otherBuild = otherBuildsFolder(for: invocation.options, environment: environment)
        let missing = "no storage directory at \(directory.path)" + (otherBuild.map { "; \($0)" } ?? "")
        switch command {
        case .path(let key):
            Console.out(directory.filePath(try fileName(for: key)) + "\n")
            Console.error("wlstorage: note: \(missing)\n")
            return .success
        case .set, .watch:
            // They create a missing directory, but not one beside the other build's, where the values likely are.
            if otherBuild != nil { throw ToolFailure(missing) }
        default:
            throw ToolFailure(missing)
        }
    }
    switch command {
    case .help, .hash:
        return .success
    case .get(let keys):
        return try printValues(of: keys) { key throws(ToolFailure) in
            try value(of: key, in: directory, keyFile: keyFile)
        }
    case .set(let key, let json):
        try set(key, json: json, in: directory, keyFile: keyFile)
    case .remove(let key):
        let name = try fileName(for: key)
        // With a key file, rm removes the file whether or not it opens with that key; without one, a sealed value
        // is left: its key was not even given.
        if keyFile == nil { try refuseSealed(name, of: key, in: directory, toDo: "remove it") }
        guard try inDirectory(directory, { () throws(WLStorageError) in try directory.remove(name) }) else {
            throw ToolFailure("no value stored for '\(key)': \(directory.filePath(name))")
        }
    case .path(let key):
        Console.out(directory.filePath(try fileName(for: key)) + "\n")
    case .list(let keys):
        return try list(directory, keys: keys, keyFile: keyFile)
    case .verify:
        return try verify(directory, keyFile: keyFile)
    case .watch(let key, let count):
        if let keyFile {
            try createStorageDirectoryIfMissing(directory)
            return try run(command, on: keyFile.store(ofDirectoryAt: directory.path), keyGiven: true)
        }
        try watch(key: key, fileName: try fileName(for: key), in: directory, count: count)
    }
    return .success
}

// MARK: Commands

/// Runs `command` on a store other than a directory: `list` and `verify` on its `entries`, the others through the
/// store protocol, with `keyFile` through an encrypted store over it.
private func run(
    _ command: Command, on store: any WLStorageStore, layout: StoreLayout, keyFile: KeyFile?,
    entries: () throws(ToolFailure) -> [StoreEntry]
) throws(ToolFailure) -> ExitStatus {
    switch command {
    case .list(let keys):
        return list(try entries(), layout: layout, keys: keys, keyFile: keyFile)
    case .verify:
        return verify(try entries(), layout: layout, in: store.identity, keyFile: keyFile)
    case .remove:
        // rm removes whatever the key holds, whether or not it opens with the key.
        return try run(command, on: store, keyGiven: keyFile != nil)
    default:
        guard let keyFile else { return try run(command, on: store, keyGiven: false) }
        return try run(command, on: WLStorageEncryptedStore(store, key: keyFile.key), keyGiven: true)
    }
}

/// The store that `--etcd` names: its endpoints, separated by commas, and the namespace.
private func etcdStore(_ given: String, namespace: String) throws(ToolFailure) -> WLStorageEtcdStore {
    let endpoints = given.split(separator: ",", omittingEmptySubsequences: false).map {
        $0.trimmingCharacters(in: .whitespaces)
    }
    guard !endpoints.contains(where: \.isEmpty) else {
        throw ToolFailure(
            "--etcd needs endpoints separated by commas (http://host:port,http://host:port), without an empty one",
            status: .usage)
    }
    do {
        return try WLStorageEtcdStore(endpoints: endpoints, namespace: namespace)
    } catch {
        throw ToolFailure(error.message, status: .usage)
    }
}

/// The JSON stored for `key`, to print: opened with the key of `keyFile` when there is one.
private func value(of key: String, in directory: StorageDirectory, keyFile: KeyFile?) throws(ToolFailure) -> Data {
    let name = try fileName(for: key)
    let path = directory.filePath(name)
    let contents = try inDirectory(directory) { () throws(WLStorageError) in
        try StoredFile.read(Array(name.utf8), in: directory, sealed: keyFile != nil)
    }
    switch contents {
    case nil:
        throw ToolFailure("no value stored for '\(key)': \(path)")
    case .tooLarge:
        throw ToolFailure("the file of '\(key)' is \(StoredFile.tooLargeReason): \(path)")
    case .bytes(let contents) where contents.isEmpty:
        throw ToolFailure("no value stored for '\(key)' (the file is empty): \(path)")
    case .bytes(let contents):
        guard let keyFile else {
            if let sealed = SealedValue.description(of: contents) {
                throw ToolFailure(
                    "the value of '\(key)' is \(sealed); pass --key-file with that key to read it: \(path)")
            }
            if let problem = JSONText.problem(in: contents) {
                throw ToolFailure("the file does not hold JSON (\(problem)): \(path)")
            }
            return contents
        }
        switch keyFile.open(contents, storedUnder: key, path: path) {
        case .notEncrypted:
            throw ToolFailure(
                "the file of '\(key)' is not encrypted (it holds JSON; read it without --key-file): \(path)")
        case .doesNotOpen(let reason):
            throw ToolFailure("the file of '\(key)' does not open with the key in \(keyFile.path): \(reason): \(path)")
        case .plaintext(let plaintext):
            if plaintext.isEmpty { throw ToolFailure("no value stored for '\(key)' (the value is empty): \(path)") }
            // What is wrong in the value is not said: it could quote a byte of it.
            if JSONText.problem(in: plaintext) != nil {
                throw ToolFailure("the file opens, but its value is not JSON: \(path)")
            }
            return plaintext
        }
    }
}

private func set(
    _ key: String, json: String, in directory: StorageDirectory, keyFile: KeyFile?
) throws(ToolFailure) {
    let name = try fileName(for: key)
    let data = Data(json.utf8)  // checked by run(_:environment:)
    try createStorageDirectoryIfMissing(directory)
    announceRemoved(try cleanTemporaryFiles(in: directory))
    guard let keyFile else {
        try refuseSealed(name, of: key, in: directory, toDo: "replace it")
        _ = try library { () throws(WLStorageError) in try directory.write(name, contents: JSONText.compact(data)) }
        return
    }
    // A value that does not open with this key is not replaced: with the wrong key file, it would be lost for good.
    let existing = try inDirectory(directory) { () throws(WLStorageError) in
        try StoredFile.read(Array(name.utf8), in: directory, sealed: true)
    }
    if case .tooLarge = existing {
        throw ToolFailure(
            "the file of '\(key)' is \(StoredFile.tooLargeReason), so it cannot be opened and is left as it is;"
                + " remove it first (wlstorage rm) to store a value under this key: \(directory.filePath(name))")
    }
    if case .bytes(let contents) = existing, !contents.isEmpty,
        case .doesNotOpen(let reason) = keyFile.open(contents, storedUnder: key, path: directory.filePath(name))
    {
        throw ToolFailure(
            "the file of '\(key)' does not open with the key in \(keyFile.path) (\(reason)), so it is left as it is;"
                + " remove it first (wlstorage rm) to store a value under this key: \(directory.filePath(name))")
    }
    // The store encrypts the value and writes it as the library writes any file: 0600, atomic and durable.
    do {
        try keyFile.store(ofDirectoryAt: directory.path).write(key: key, data: JSONText.compact(data))
    } catch let error as WLStorageError {
        throw ToolFailure(error)
    } catch {
        throw ToolFailure("the value could not be stored: \(error): \(directory.filePath(name))")
    }
}

/// Lists the entries of `directory`, or, when `keys` are given, the entries of each of them in turn, named by their
/// key (a file named by a hash too), and a line that says so for a key with no file.
///
/// - Returns: ``ExitStatus/failure`` when a key given has no file.
private func list(_ directory: StorageDirectory, keys: [String], keyFile: KeyFile?) throws(ToolFailure) -> ExitStatus {
    announceRemoved(try cleanTemporaryFiles(in: directory))
    let names = try entryNames(of: directory)
    var rows = [["NAME", "KEY", "SIZE", "MODIFIED", "STATE"]]
    func append(_ entry: DirectoryEntry?) {
        guard let entry else { return }  // removed since it was listed
        rows.append([
            entry.printedName, entry.key, String(entry.status.size),
            entry.status.modificationTime.formatted(.iso8601), entry.state.label,
        ])
    }
    if keys.isEmpty {
        for name in names { append(DirectoryEntry(name: name, in: directory, keyFile: keyFile)) }
    }
    var status = ExitStatus.success
    for key in keys {
        let file = try fileName(for: key)
        let belonging = names.filter { DirectoryEntry.keyFileName(of: $0) == file }
        for name in belonging { append(DirectoryEntry(name: name, in: directory, keyFile: keyFile, storageKey: key)) }
        if !belonging.contains(Array(file.utf8)) {
            rows.append([printableName(file), printableName(key), "-", "-", "no value (no file)"])
            status = .failure
        }
    }
    Console.out(table(rows))
    return status
}

/// `rows` as a table: each column as wide as its widest cell, two spaces between columns, the last one unpadded.
func table(_ rows: [[String]]) -> String {
    var widths = [Int](repeating: 0, count: rows.first?.count ?? 0)
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
    return text
}

private func verify(_ directory: StorageDirectory, keyFile: KeyFile?) throws(ToolFailure) -> ExitStatus {
    var report = ""
    for removed in try cleanTemporaryFiles(in: directory) {
        if isExchangeFile(removed) {
            report +=
                "note: \(printableName(removed)): resolved: the file of a rewrite that crashed during its exchange (a"
                + " value another program stored meanwhile is put back in place, anything else removed)\n"
        } else {
            report += "note: \(printableName(removed)): removed: the temporary file of a writer that crashed\n"
        }
    }
    var problems = 0
    var checked = 0
    for name in try entryNames(of: directory) {
        guard let entry = DirectoryEntry(name: name, in: directory, keyFile: keyFile) else { continue }
        let problem: String?
        switch entry.state {
        case .json, .empty, .encrypted:
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
        case .sealed(let sealed):
            checked += 1
            problem = "\(sealed); pass --key-file with that key to check it"
        case .encryptedNotJSON:
            checked += 1
            problem = "opens with the key, but its value is not JSON"
        case .doesNotOpen(let reason):
            checked += 1
            problem = "does not open with the key: \(reason)"
        case .notEncrypted:
            checked += 1
            problem = "not encrypted: it holds JSON as a directory without encryption keeps it"
        case .encryptedUnchecked:
            report +=
                "note: \(entry.printedName): laid out as a value encrypted with the key, but its name is the hash of"
                + " its key, which the tag authenticates too; not opened\n"
            problem = nil
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

/// Prints the values `value` gives for `keys`: one key's as indented JSON, several as one line each, `KEY: JSON`.
/// With several keys, a key without a value is said on standard error, and the others are still printed.
///
/// - Returns: ``ExitStatus/failure`` when a key of several has no value to print.
func printValues(
    of keys: [String], _ value: (String) throws(ToolFailure) -> Data
) throws(ToolFailure) -> ExitStatus {
    if keys.count == 1 {
        Console.out(String(decoding: JSONText.pretty(try value(keys[0])), as: UTF8.self) + "\n")
        return .success
    }
    var status = ExitStatus.success
    for key in keys {
        do {
            let json = JSONText.compact(try value(key), forTerminal: true)
            Console.out(printableName(key) + ": " + String(decoding: json, as: UTF8.self) + "\n")
        } catch {
            Console.error("wlstorage: \(error.message)\n")
            status = .failure
        }
    }
    return status
}

/// The command line that stores `text` as a JSON string under `key`, with the global `options` given, quoted for a
/// POSIX shell. A PostgreSQL connection string may hold a password, and is shown as URL unless it names where it is
/// (`env:NAME`, `file:PATH`).
private func setStringCommand(_ options: GlobalOptions, key: String, text: String) -> String {
    var words = ["wlstorage"]
    if let directory = options.directory { words += ["--dir", directory] }
    if let program = options.program { words += ["--program", program] }
    if options.debug { words.append("--debug") }
    if let suite = options.suite { words += ["--suite", suite] }
    if let postgres = options.postgres {
        words += ["--postgres", postgres.hasPrefix("env:") || postgres.hasPrefix("file:") ? postgres : "URL"]
    }
    if let etcd = options.etcd { words += ["--etcd", etcd] }
    if let namespace = options.namespace { words += ["--namespace", namespace] }
    if let keyFile = options.keyFile { words += ["--key-file", keyFile] }
    // A key that starts with '-' goes after '--', where it cannot be taken for an option.
    words += key.hasPrefix("-") ? ["set", "--string", text, "--", key] : ["set", key, "--string", text]
    return words.map(shellQuoted).joined(separator: " ")
}

/// `word` as a POSIX shell reads it back: as it is when every character is one no shell treats specially, otherwise
/// in single quotes (a quote in it as `'\''`).
func shellQuoted(_ word: String) -> String {
    let plain = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@%+,"
    if !word.isEmpty, word.allSatisfy(plain.contains) { return word }
    return "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

/// Refuses to `toDo` ("replace it", "remove it") the value of `key`, the file `name`, without a key file when it is
/// sealed: it would be lost for good, and the key that sealed it was not given.
private func refuseSealed(
    _ name: String, of key: String, in directory: StorageDirectory, toDo: String
) throws(ToolFailure) {
    let sealed = try inDirectory(directory) { () throws(WLStorageError) in
        try SealedValue.description(ofFile: Array(name.utf8), in: directory)
    }
    guard let sealed else { return }
    throw ToolFailure(
        "the value of '\(key)' is \(sealed), so it is left as it is; pass --key-file with that key to \(toDo):"
            + " \(directory.filePath(name))")
}

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

/// Names on standard error the temporary files `cleanTemporaryFiles(in:)` removed, and the exchange files it resolved.
private func announceRemoved(_ names: [String]) {
    for name in names {
        if isExchangeFile(name) {
            Console.error(
                "wlstorage: resolved the file of a rewrite that crashed during its exchange: \(printableName(name))\n")
        } else {
            Console.error("wlstorage: removed the temporary file of a writer that crashed: \(printableName(name))\n")
        }
    }
}

/// Whether `name` is the file a rewrite gives its written value for its exchange with the file in place, which the
/// clean-up resolves rather than removes (see ``StorageDirectory/removeAbandonedTemporaryFiles()``).
private func isExchangeFile(_ name: String) -> Bool {
    StorageDirectory.interruptedExchange(name) != nil
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

/// The connection string that `--postgres` gives: itself, or, so that a password never shows in the process list,
/// the value of an environment variable (`env:NAME`) or the first line of a file (`file:PATH`).
func connectionString(_ given: String, environment: [String: String]) throws(ToolFailure) -> String {
    if given.hasPrefix("env:") {
        let name = String(given.dropFirst(4))
        guard let value = environment[name], !value.isEmpty else {
            throw ToolFailure("--postgres env:\(name): the environment variable \(name) is not set", status: .usage)
        }
        return value
    }
    if given.hasPrefix("file:") {
        let path = String(given.dropFirst(5))
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ToolFailure("--postgres file:\(path): the file cannot be read", status: .usage)
        }
        let line = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first
        guard let line, !line.allSatisfy(\.isWhitespace) else {
            throw ToolFailure("--postgres file:\(path): the file holds no connection string", status: .usage)
        }
        return line.trimmingCharacters(in: .whitespaces)
    }
    return given
}
