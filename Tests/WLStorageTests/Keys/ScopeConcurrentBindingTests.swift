import Dispatch
import Foundation
import Testing

@testable import WLStorage

/// Two threads that bind one scope to different stores and make a storage of its key at once: whatever the order,
/// both storages share one value, in the store the scope ends bound to, and a binding is either kept or refused.
@Suite(.capturingOutput)
struct ScopeConcurrentBindingTests {
    @Test func twoThreadsBindingAScopeAtItsFirstUseEndWithOneStoreAndOneValue() throws {
        try withTemporaryDirectory { directory in
            for round in 0..<100 {
                let scope = WLStorageScope("scope-concurrent-binding.\(UUID().uuidString)")
                let key = WLStorageKey<Int>("count", default: 0, flushInterval: nil, scope: scope)
                let places = [0, 1].map { directory.appendingPathComponent("\(round)-\($0)") }
                let storages = Lock<[Int: WLStorage<Int>]>([:])
                let refusals = Lock<[Int: WLStorageError]>([:])
                DispatchQueue.concurrentPerform(iterations: 2) { side in
                    do throws(WLStorageError) {
                        try scope.bind(to: .directory(places[side]))
                    } catch {
                        refusals.withLock { $0[side] = error }
                    }
                    let storage = WLStorage(key)
                    storages.withLock { $0[side] = storage }
                }
                let (first, second) = try storages.withLock { (try #require($0[0]), try #require($0[1])) }
                #expect(
                    first.lastError == nil && second.lastError == nil,
                    "\(String(describing: first.lastError)), \(String(describing: second.lastError))")
                // At most one binding is refused, and a refusal says why.
                #expect(refusals.withLock { $0.count } <= 1)
                for refusal in refusals.withLock({ Array($0.values) }) {
                    #expect(refusal.code == .invalidConfiguration)
                }
                first.wrappedValue = round + 1
                #expect(second.wrappedValue == round + 1)
                first.flush()
                let bound = try #require(scope.store?.identity)
                let place = try #require(places.first { WLStorageDirectoryStore.directory($0).identity == bound })
                #expect(stored(Int.self, key: "count", in: place) == round + 1)
                #expect(places.filter { stored(Int.self, key: "count", in: $0) != nil }.count == 1)
            }
        }
    }

    @Test func twoKeysOfOneNameWithDifferentTypesMadeAtOnceShareNothing() throws {
        try withTemporaryDirectory { directory in
            for round in 0..<100 {
                let name = "mixed-\(round)"
                let number = WLStorageKey<Int>(name, default: 7, flushInterval: nil, store: .directory(directory))
                let text = WLStorageKey<String>(
                    name, default: "seven", flushInterval: nil, store: .directory(directory))
                let numbers = Lock<WLStorage<Int>?>(nil)
                let texts = Lock<WLStorage<String>?>(nil)
                DispatchQueue.concurrentPerform(iterations: 2) { side in
                    if side == 0 {
                        let storage = WLStorage(number)
                        numbers.withLock { $0 = storage }
                    } else {
                        let storage = WLStorage(text)
                        texts.withLock { $0 = storage }
                    }
                }
                let numberStorage = try #require(numbers.withLock { $0 })
                let textStorage = try #require(texts.withLock { $0 })
                // Exactly one of the two is the key's; the other reports the mismatch.
                let mismatches = [numberStorage.lastError, textStorage.lastError].compactMap { $0 }
                #expect(mismatches.count == 1)
                #expect(mismatches.allSatisfy { $0.code == .typeMismatch })
                #expect(numberStorage.wrappedValue == 7 && textStorage.wrappedValue == "seven")
            }
        }
    }
}
