import Foundation
import Testing

@testable import WLStorage

/// The folder of the keys declared below: one per test process, made when the first key is used.
private let keyConstantsDirectory: URL = {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent(
        "wlstorage-key-constants-" + UUID().uuidString)
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}()

extension WLStorageKeys {
    /// Keys declared once, as constants, as a program declares them. Each test uses keys of its own.
    fileprivate static let constantCount = WLStorageKey<Int>(
        "count", default: 10, flushInterval: nil, store: .directory(keyConstantsDirectory))
    fileprivate static let constantTheme = WLStorageKey<String>(
        "theme", default: "dark", flushInterval: nil, store: .directory(keyConstantsDirectory))
    fileprivate static let constantRacing = WLStorageKey<Int>(
        "racing", default: 0, flushInterval: nil, store: .directory(keyConstantsDirectory))
    fileprivate static let constantStreamed = WLStorageKey<Int>(
        "streamed", default: 1, flushInterval: nil, store: .directory(keyConstantsDirectory))
}

/// A type that uses a constant key as a property wrapper.
private struct CountView {
    @WLStorage(.constantCount) var count
}

/// Keys declared once as constants of ``WLStorageKeys``, and one-shot access to their values.
@Suite(.capturingOutput)
struct KeyConstantsTests {
    private func stored(_ key: String) -> String? {
        let url = keyConstantsDirectory.appendingPathComponent(key)
        return (try? Data(contentsOf: url)).map { String(decoding: $0, as: UTF8.self) }
    }

    @Test func aConstantKeyIsOneValueForAPropertyWrapperAStorageAndOneShotAccess() {
        let view = CountView()
        let storage = WLStorage(.constantCount)
        #expect(WLStorageKeys[.constantCount] == 10)
        WLStorageKeys[.constantCount] = 5
        #expect(view.count == 5)
        #expect(storage.wrappedValue == 5)
        WLStorageKeys[.constantCount] += 1
        WLStorageKeys.update(.constantCount) { $0 += 1 }
        view.count += 1
        #expect(WLStorageKeys[.constantCount] == 8)
        // One-shot access goes through one storage, kept as long as the key.
        #expect(WLStorageKeys.storage(.constantCount) === WLStorageKeys.storage(.constantCount))
        WLStorageKeys.storage(.constantCount).flush()
        #expect(stored("count") == "8")
    }

    @Test func resetSetsTheDefaultAndWritesIt() {
        WLStorageKeys[.constantTheme] = "light"
        WLStorageKeys.storage(.constantTheme).flush()
        #expect(stored("theme") == "\"light\"")
        WLStorageKeys.reset(.constantTheme)
        #expect(WLStorageKeys[.constantTheme] == "dark")
        WLStorageKeys.storage(.constantTheme).flush()
        #expect(stored("theme") == "\"dark\"")
    }

    @Test func updatesOfOneShotAccessFromManyThreadsAllCount() {
        // The first uses race to make the key's storage: one is kept, and no update is lost on another.
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            WLStorageKeys.update(.constantRacing) { $0 += 1 }
        }
        #expect(WLStorageKeys[.constantRacing] == 16)
    }

    @Test func valuesGivesTheValueThenItsChanges() async {
        var values = WLStorageKeys.values(.constantStreamed).makeAsyncIterator()
        #expect(await values.next() == 1)
        WLStorageKeys[.constantStreamed] = 2
        #expect(await values.next() == 2)
    }

    @Test func typeNamesAreWrittenAsInSwift() {
        #expect(TypeName.of([String: Int?].self) == "[String: Int?]")
        #expect(TypeName.of([Int]?.self) == "[Int]?")
        #expect(TypeName.of(Set<String>.self) == "Set<String>")
        #expect(TypeName.of((Int, [String]).self) == "(Int, [String])")
        #expect(TypeName.of(Date.self) == "Date")
        #expect(TypeName.of(WLStorageError.self) == "WLStorage.WLStorageError")
        #expect(TypeName.of([WLStorageError.Code: Double].self) == "[WLStorage.WLStorageError.Code: Double]")
    }
}
