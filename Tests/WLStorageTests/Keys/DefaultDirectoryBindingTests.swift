import Foundation
import Testing

@testable import WLStorage

extension WLStorageKeys {
    /// A key of the default directory, with no store named.
    fileprivate static let defaultDirectoryVisits = WLStorageKey<Int>("visits", default: 0, flushInterval: nil)
    /// A key of the default directory named as `.standard`, first used (and so made) inside a test's directory.
    fileprivate static let standardVisits = WLStorageKey<Int>(
        "standard-visits", default: 0, flushInterval: nil, store: .standard)
}

/// The default directory set for a closure (`WLStorageSystem.withDefaultDirectory(_:_:)`), and its home without a
/// type parameter.
@Suite(.capturingOutput)
struct DefaultDirectoryBindingTests {
    @Test func everyWayOfNamingTheDefaultDirectoryInsideTheClosureKeepsTheFileInItsDirectory() throws {
        try withTemporaryDirectory { directory in
            WLStorageSystem.withDefaultDirectory(directory) {
                #expect(WLStorageSystem.defaultDirectory == directory)
                #expect(WLStorageDirectoryStore.standard.url == directory)
                let byKey = WLStorage(key: "by-key", defaultValue: 0, flushInterval: nil)
                let inStandard = WLStorage(key: "in-standard", defaultValue: 0, flushInterval: nil, store: .standard)
                let typed = WLStorage(.defaultDirectoryVisits)
                for (value, storage) in [byKey, inStandard, typed].enumerated() {
                    storage.wrappedValue = value + 1
                    storage.flush()
                }
                WLStorageKeys[.standardVisits] = 4
            }
            #expect(stored(Int.self, key: "by-key", in: directory) == 1)
            #expect(stored(Int.self, key: "in-standard", in: directory) == 2)
            #expect(stored(Int.self, key: "visits", in: directory) == 3)
            // The one-shot storage of the closure is released, and flushed, when the closure returns.
            #expect(stored(Int.self, key: "standard-visits", in: directory) == 4)
            #expect(WLStorageSystem.defaultDirectory == StorageLocation.processDefaultDirectory)
        }
    }

    @Test func aKeyOfTheDefaultDirectoryMadeInsideOneClosureFollowsTheNextOneAndTheProcessOutside() throws {
        try withTemporaryDirectory { directory in
            let first = directory.appendingPathComponent("first")
            let second = directory.appendingPathComponent("second")
            for key in [WLStorageKeys.standardVisits, WLStorageKeys.defaultDirectoryVisits] {
                WLStorageSystem.withDefaultDirectory(first) {
                    #expect(key.store?.identity == WLStorageDirectoryStore.directory(first).identity)
                }
                WLStorageSystem.withDefaultDirectory(second) {
                    #expect(key.store?.identity == WLStorageDirectoryStore.directory(second).identity)
                }
                #expect(key.store?.identity == WLStorageDirectoryStore(url: WLStorageSystem.defaultDirectory).identity)
            }
        }
    }

    @Test func tasksWithDifferentDefaultDirectoriesSideBySideSeeOnlyTheirOwnValues() async throws {
        try await withTemporaryDirectory { directory in
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<4 {
                    let place = directory.appendingPathComponent("task-\(index)")
                    group.addTask {
                        await WLStorageSystem.withDefaultDirectory(place) {
                            for round in 1...50 {
                                WLStorageKeys[.defaultDirectoryVisits] = index * 1000 + round
                                await Task.yield()
                                #expect(WLStorageKeys[.defaultDirectoryVisits] == index * 1000 + round)
                            }
                            await flushOffThePool(WLStorageKeys.storage(.defaultDirectoryVisits))
                            #expect(stored(Int.self, key: "visits", in: place) == index * 1000 + 50)
                        }
                    }
                }
            }
        }
    }

    @Test func theSuitesDirectoryHoldsTheFolderOfEverySuiteWhateverTheDefaultDirectory() throws {
        let suites = try #require(WLStorageSystem.suitesDirectory)
        let editor = suites.appendingPathComponent("editor", isDirectory: true)
        #expect(WLStorageDirectoryStore.suite("editor").url == editor)
        try withTemporaryDirectory { directory in
            WLStorageSystem.withDefaultDirectory(directory) {
                #expect(WLStorageSystem.suitesDirectory == suites)
            }
        }
    }
}
