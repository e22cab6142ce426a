// "The storage's errors for an encrypted store never quote what was stored": whatever the bytes that open (another
// version's value, a value a migration refuses with an error that quotes it, bytes that are not JSON) and whichever
// path finds them (opening the storage, a change reported by the store's feed, an update), no error kept or reported
// holds the secret: not its message, its description, its reflection, or its underlying error.
import Foundation
import Testing

@testable import WLStorage

/// The type the storages read: an enum whose cases another version of the program may outgrow.
private enum Level: String, Codable, Sendable { case low, high }

/// What an earlier version stored, which the migration turns down with an error that quotes it, as user code may.
private struct Legacy: Codable { var pin: String }
private struct Refused: Error, CustomStringConvertible {
    let pin: String
    var description: String { "no level for the pin \(pin)" }
}

private let secret = "sekret-4711"

@Suite(.capturingOutput) struct SecretsNeverQuotedTests {
    enum Stored: String, CaseIterable, Sendable {
        /// Another version's enum case.
        case anotherCase
        /// An earlier shape whose migration throws, quoting the value.
        case refusedByAMigration
        /// Bytes that are not JSON.
        case notJSON

        var bytes: Data {
            switch self {
            case .anotherCase: Data(#""\#(secret)""#.utf8)
            case .refusedByAMigration: Data(#"{"pin":"\#(secret)"}"#.utf8)
            case .notJSON: Data("\(secret) is not JSON".utf8)
            }
        }
    }

    enum Path: String, CaseIterable, Sendable {
        case opening, feed, update
    }

    fileprivate static let migrations: [WLStorageMigration<Level>] = [.from(Legacy.self) { throw Refused(pin: $0.pin) }]

    @Test(arguments: Stored.allCases, Path.allCases)
    func noErrorQuotesAnEncryptedValue(stored: Stored, path: Path) throws {
        let memory = MemoryStore()
        let encrypted = try memory.encrypted(with: WLStorageEncryptionKey.random())
        let key = "level-\(UUID().uuidString)"
        var storage: WLStorage<Level>
        switch path {
        case .opening:
            try encrypted.write(key: key, data: stored.bytes)
            storage = WLStorage(
                key: key, defaultValue: .low, flushInterval: nil, store: encrypted, migrations: Self.migrations)
        case .feed:
            try encrypted.write(key: key, data: Data(#""high""#.utf8))
            storage = WLStorage(
                key: key, defaultValue: .low, flushInterval: nil, store: encrypted, migrations: Self.migrations)
            try #require(storage.wrappedValue == .high)
            try encrypted.write(key: key, data: stored.bytes)
            memory.report(.key(key))
            #expect(eventually { storage.lastError != nil }, "the change was not checked")
        case .update:
            storage = WLStorage(
                key: key, defaultValue: .low, flushInterval: nil, store: encrypted, migrations: Self.migrations)
            try encrypted.write(key: key, data: stored.bytes)
            storage.update { $0 = .high }
        }
        let errors = ReportedErrors.errors { $0.key == key } + [storage.lastError].compactMap { $0 }
        #expect(!errors.isEmpty, "nothing was reported")
        for error in errors {
            let texts = [
                error.message, String(describing: error), String(reflecting: error), error.localizedDescription,
                error.underlying.map { String(reflecting: $0) } ?? "",
            ]
            for text in texts {
                #expect(!text.contains(secret), "\(stored), \(path): \(text)")
            }
        }
        withExtendedLifetime(storage) {}
    }
}
