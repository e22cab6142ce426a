import Foundation
import Testing

@testable import WLStorage

/// One-shot access of a key that a storage of another value type had open is refused, and kept in memory only, while
/// that storage lives; once it is gone, one-shot access stores its values again and shares them with every other
/// storage of the key.
@Suite(.capturingOutput)
struct OneShotAccessAfterATypeMismatchTests {
    @Test func oneShotAccessStoresAgainOnceTheStorageOfTheOtherTypeIsGone() throws {
        try withTemporaryDirectory { directory in
            var first: WLStorageKey<Int>? = WLStorageKey<Int>(
                "shared", default: 0, flushInterval: nil, store: .directory(directory))
            WLStorageKeys[try #require(first)] = 1
            WLStorageKeys.storage(try #require(first)).flush()
            let second = WLStorageKey<String>(
                "shared", default: "none", flushInterval: nil, store: .directory(directory))
            WLStorageKeys[second] = "refused"
            #expect(WLStorageKeys.storage(second).lastError?.code == .typeMismatch)

            // The first key goes, and its one-shot storage with it.
            first = nil
            #expect(eventually { WLStorage(second).lastError?.code != .typeMismatch })
            WLStorageKeys[second] = "stored"
            #expect(WLStorage(second).wrappedValue == "stored")
            WLStorageKeys.storage(second).flush()
            #expect(stored(String.self, key: "shared", in: directory) == "stored")
        }
    }

    @Test func oneShotAccessInsideABindingStoresAgainOnceTheStorageOfTheOtherTypeIsGone() throws {
        try withTemporaryDirectory { directory in
            let scope = WLStorageScope("one-shot-after-a-type-mismatch.\(UUID().uuidString)")
            try scope.withBinding(to: .directory(directory)) {
                var first: WLStorageKey<Int>? = WLStorageKey<Int>(
                    "shared", default: 0, flushInterval: nil, scope: scope)
                WLStorageKeys[try #require(first)] = 1
                WLStorageKeys.storage(try #require(first)).flush()
                let second = WLStorageKey<String>("shared", default: "none", flushInterval: nil, scope: scope)
                WLStorageKeys[second] = "refused"
                #expect(WLStorageKeys.storage(second).lastError?.code == .typeMismatch)

                first = nil
                #expect(eventually { WLStorageKeys.storage(second).lastError?.code != .typeMismatch })
                WLStorageKeys[second] = "stored"
                #expect(WLStorage(second).wrappedValue == "stored")
                WLStorageKeys.storage(second).flush()
                #expect(stored(String.self, key: "shared", in: directory) == "stored")
            }
        }
    }
}
