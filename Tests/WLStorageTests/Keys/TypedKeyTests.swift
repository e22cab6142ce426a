import Foundation
import Synchronization
import Testing

@testable import WLStorage

extension WLStorageScope {
    /// Bound by ``TypedKeyTests/aPropertyWrapperAndALetStorageOfOneKeyShareOneValue()``.
    fileprivate static let typedKeyWrapper = WLStorageScope("typed-key-tests.wrapper")
}

extension WLStorageKey {
    /// A key declared once, as a static member, in a scope a test binds to a temporary directory.
    fileprivate static var wrapperCount: WLStorageKey<Int> {
        .init("count", default: 10, flushInterval: nil, scope: .typedKeyWrapper)
    }
}

/// A type that uses the key as a property wrapper.
private struct CounterView {
    @WLStorage(.wrapperCount) var count
}

/// A `Sendable` class: a property wrapper needs a `var`, so it keeps a `let` storage of the key.
private final class CounterService: Sendable {
    let count = WLStorage(.wrapperCount)

    func increment() {
        count.update { $0 += 1 }
    }
}

/// Typed keys: one declaration of a key, its type, default, store or scope, used as a property wrapper and as a storage.
@Suite(.capturingOutput)
struct TypedKeyTests {
    /// The stores a typed key is tried in.
    enum StoreKind: String, CaseIterable, CustomTestStringConvertible {
        case directory, suite, prefixed, encrypted
        var testDescription: String { rawValue }
    }

    /// A store of `kind` over `directory` (a suite of a name of its own, removed by the caller), and the directory its
    /// files are in.
    private static func store(_ kind: StoreKind, in directory: URL) throws -> (any WLStorageStore, URL) {
        switch kind {
        case .directory:
            return (WLStorageDirectoryStore.directory(directory), directory)
        case .suite:
            let name = "wlstorage-typed-key-tests-" + UUID().uuidString
            let suite = WLStorageDirectoryStore.suite(name)
            return (suite, try #require(suite.url))
        case .prefixed:
            return (WLStorageDirectoryStore.directory(directory).prefixed("app."), directory)
        case .encrypted:
            return (WLStorageDirectoryStore.directory(directory).encrypted(with: try .random()), directory)
        }
    }

    private struct Settings: Codable, Sendable, Equatable {
        var theme = "dark"
        var size = 12
    }

    @Test(arguments: StoreKind.allCases)
    func aTypedKeyRoundTripsAndItsStoragesShareOneValue(_ kind: StoreKind) throws {
        try withTemporaryDirectory { directory in
            let (store, files) = try Self.store(kind, in: directory)
            defer { if kind == .suite { try? FileManager.default.removeItem(at: files) } }
            let key = WLStorageKey<Settings>("settings", default: Settings(), flushInterval: nil, store: store)
            do {
                let first = WLStorage(key)
                let second = WLStorage(key)
                #expect(first.wrappedValue == Settings())
                first.wrappedValue.theme = "light"
                // One value in the process: the second storage sees the set at once.
                #expect(second.wrappedValue.theme == "light")
                second.update { $0.size = 14 }
                #expect(first.wrappedValue == Settings(theme: "light", size: 14))
                first.flush()
                #expect(first.lastError == nil)
            }
            // Written to the store, and read back by a storage made once the others are gone.
            let bytes = try #require(try store.read(key: "settings"))
            #expect(try JSONDecoder().decode(Settings.self, from: bytes) == Settings(theme: "light", size: 14))
            let fileName = kind == .prefixed ? "app.settings" : "settings"
            #expect(entries(of: files).contains(fileName))
            let again = WLStorage(key)
            #expect(again.wrappedValue == Settings(theme: "light", size: 14))
        }
    }

    @Test func theDefaultIsNotMadeWhenAValueIsStored() throws {
        try withTemporaryDirectory { directory in
            let made = Atomic<Int>(0)
            let key = WLStorageKey<String>(
                "theme",
                default: {
                    made.add(1, ordering: .relaxed)
                    return "dark"
                }(), flushInterval: nil, store: .directory(directory))
            try WLStorageDirectoryStore.directory(directory).write(key: "theme", data: Data(#""light""#.utf8))
            let theme = WLStorage(key)
            #expect(theme.wrappedValue == "light")
            theme.wrappedValue = "blue"
            theme.flush()
            #expect(made.load(ordering: .relaxed) == 0)

            // Another program's removal returns the value to the default, made then.
            try FileManager.default.removeItem(at: directory.appendingPathComponent("theme"))
            #expect(eventually { theme.wrappedValue == "dark" })
            #expect(made.load(ordering: .relaxed) == 1)
        }
    }

    @Test func theDefaultIsMadeOnceWhenNothingIsStoredAndSaved() throws {
        try withTemporaryDirectory { directory in
            let made = Atomic<Int>(0)
            let key = WLStorageKey<Int>(
                "count",
                default: {
                    made.add(1, ordering: .relaxed)
                    return 5
                }(), flushInterval: nil, store: .directory(directory))
            let first = WLStorage(key)
            let second = WLStorage(key)
            #expect(first.wrappedValue == 5 && second.wrappedValue == 5)
            #expect(made.load(ordering: .relaxed) == 1)
            #expect(eventually { stored(Int.self, key: "count", in: directory) == 5 })
        }
    }

    @Test func twoDeclarationsOfOneKeyWithDifferentTypesAreRefusedNamingBothTypes() throws {
        try withTemporaryDirectory { directory in
            let asNumber = WLStorageKey<Int>("limit", default: 3, flushInterval: nil, store: .directory(directory))
            let asText = WLStorageKey<String>("limit", default: "3", flushInterval: nil, store: .directory(directory))
            let number = WLStorage(asNumber)
            let text = WLStorage(asText)
            let error = try #require(text.lastError)
            #expect(error.code == .typeMismatch)
            #expect(error.message.contains("a storage of Int") && error.message.contains("type is String"), "\(error)")
            #expect(!error.message.contains("StorageCell"))
            // The refused storage never writes: the file keeps the first declaration's value.
            text.wrappedValue = "many"
            text.flush()
            number.flush()
            #expect(stored(Int.self, key: "limit", in: directory) == 3)
            #expect(number.lastError == nil)
        }
    }

    @Test func aPropertyWrapperAndALetStorageOfOneKeyShareOneValue() throws {
        try withTemporaryDirectory { directory in
            try WLStorageScope.typedKeyWrapper.bind(to: .directory(directory))
            let view = CounterView()
            let service = CounterService()
            #expect(view.count == 10)
            service.increment()
            #expect(view.count == 11)
            view.count = 20
            #expect(service.count.wrappedValue == 20)
            service.count.flush()
            #expect(stored(Int.self, key: "count", in: directory) == 20)
        }
    }

    @Test func aScopeIsBoundToAStoreAndItsKeysLiveThere() throws {
        try withTemporaryDirectory { directory in
            let scope = WLStorageScope("typed-key-tests.bound")
            let first = directory.appendingPathComponent("first")
            let second = directory.appendingPathComponent("second")
            #expect(scope.store == nil)
            try scope.bind(to: .directory(first))
            // Before the first use, a binding may be replaced: the last one holds.
            try scope.bind(to: .directory(second))
            #expect(scope.store?.identity == WLStorageDirectoryStore.directory(second).identity)
            let key = WLStorageKey<String>("name", default: "none", flushInterval: nil, scope: scope)
            #expect(key.scope == scope)
            let name = WLStorage(key)
            name.wrappedValue = "ada"
            name.flush()
            #expect(stored(String.self, key: "name", in: second) == "ada")
            #expect(!FileManager.default.fileExists(atPath: first.path))

            // After the first use: the same store again does nothing, another store is refused, saying why.
            try scope.bind(to: .directory(second))
            let refusal = #expect(throws: WLStorageError.self) { try scope.bind(to: .directory(first)) }
            #expect(refusal?.code == .invalidConfiguration)
            #expect(refusal?.message.contains("typed-key-tests.bound") == true)
            #expect(refusal?.message.contains(second.path) == true)
            #expect(scope.store?.identity == WLStorageDirectoryStore.directory(second).identity)
            #expect(WLStorage(key).wrappedValue == "ada")
        }
    }

    @Test func aStorageOfAnUnboundScopeReportsItAndKeepsItsValueInMemory() throws {
        let scope = WLStorageScope("typed-key-tests.unbound")
        let key = WLStorageKey<Int>("retries", default: 3, flushInterval: nil, scope: scope)
        let retries = WLStorage(key)
        #expect(retries.wrappedValue == 3)
        let error = try #require(retries.lastError)
        #expect(error.code == .invalidConfiguration)
        #expect(error.message.contains("\"typed-key-tests.unbound\" is not bound"))
        #expect(ReportedErrors.errors { $0.message.contains("typed-key-tests.unbound") }.count >= 1)
        // Its value lives in memory, shared by the key's storages; nothing is written.
        retries.wrappedValue = 4
        #expect(WLStorage(key).wrappedValue == 4)
        retries.flush()
        #expect(retries.hasPendingChanges)
        // The scope was used unbound: binding it now is refused.
        try withTemporaryDirectory { directory in
            let refusal = #expect(throws: WLStorageError.self) { try scope.bind(to: .directory(directory)) }
            #expect(refusal?.message.contains("used while not bound") == true)
        }
    }
}
