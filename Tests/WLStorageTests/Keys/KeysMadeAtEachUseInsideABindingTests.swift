import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// A key declared as a computed static member is made at each use. Inside a binding of its store, one-shot access
/// makes a storage for each such key: the storage goes with its key, rather than being kept until the closure ends.
@Suite(.capturingOutput)
struct KeysMadeAtEachUseInsideABindingTests {
    @Test func oneShotAccessOfKeysMadeAtEachUseInsideABindingKeepsABoundedNumberOfThemAlive() throws {
        try withTemporaryDirectory { directory in
            let live = LiveCount()
            WLStorageSystem.withDefaultDirectory(directory) {
                for round in 0..<500 {
                    // The key's default holds the token: it lives as long as the key, its storages and their cell.
                    let token = LiveToken(live)
                    let key = WLStorageKey<Int>("count", default: token.zero, flushInterval: nil)
                    WLStorageKeys[key] = round
                }
                // The cell keeps its first storage's default; the last storage waits for the next access.
                #expect(live.count.load(ordering: .relaxed) <= 2)
            }
            #expect(stored(Int.self, key: "count", in: directory) == 499)
        }
    }
}

/// The number of ``LiveToken``s alive.
private final class LiveCount: Sendable {
    let count = Atomic<Int>(0)
}

/// An object counted in a ``LiveCount`` while it lives.
private final class LiveToken: Sendable {
    private let live: LiveCount

    init(_ live: LiveCount) {
        self.live = live
        live.count.add(1, ordering: .relaxed)
    }

    var zero: Int { 0 }

    deinit {
        live.count.subtract(1, ordering: .relaxed)
    }
}
