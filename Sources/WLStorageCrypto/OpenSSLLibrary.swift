internal import CWLStorageOpenSSL
import Foundation
import Synchronization

/// An algorithm fetched from libcrypto once; OpenSSL documents fetched algorithms as safe to share between threads.
struct FetchedAlgorithm: @unchecked Sendable {  // immutable after creation; OpenSSL owns its locking
    let pointer: OpaquePointer?
}

/// libcrypto, initialized once, and closed to the package's calls as the program exits: libcrypto frees its locks at
/// exit, so a handler running before that closes the library to new calls and waits up to two seconds for those in
/// flight. One per process: there is one libcrypto whatever uses it.
package final class OpenSSLLibrary: Sendable {
    package static let shared = OpenSSLLibrary()

    package let initialized: Bool
    /// Calls in flight, with the top bit set once closed.
    private let calls = Atomic<Int>(0)
    private static let closedBit = 1 << 62

    private init() {
        initialized = OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil) == 1
        atexit { OpenSSLLibrary.shared.close() }
    }

    /// Counts a call; `false` when the library is closed, and the call must not be made.
    static func enter() -> Bool {
        var current = shared.calls.load(ordering: .acquiring)
        while current & closedBit == 0 {
            let (exchanged, original) = shared.calls.compareExchange(
                expected: current, desired: current + 1, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
        return false
    }

    static func leave() { shared.calls.subtract(1, ordering: .releasing) }

    private func close() {
        calls.bitwiseOr(Self.closedBit, ordering: .acquiringAndReleasing)
        for _ in 0..<2_000 where calls.load(ordering: .acquiring) & ~Self.closedBit != 0 {
            usleep(1_000)
        }
    }
}
