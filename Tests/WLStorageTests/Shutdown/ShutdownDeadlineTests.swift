import Foundation
import Testing

@testable import WLStorage

/// A flush timeout of any length, `.seconds(.max)` meaning none included: the wait for the flush is as long as it
/// says, never a number that wraps around (a negative wait, which made the waiting thread spin).
@Suite(.capturingOutput)
struct ShutdownDeadlineTests {
    @Test func aWaitOfAnyLengthIsInNanosecondsOrTheLongestWait() {
        #expect(ShutdownHandling.nanoseconds(.milliseconds(1_500)) == 1_500_000_000)
        #expect(ShutdownHandling.nanoseconds(.nanoseconds(1)) == 1)
        #expect(ShutdownHandling.nanoseconds(.zero) == 0)
        #expect(ShutdownHandling.nanoseconds(.seconds(-5)) == 0)
        #expect(ShutdownHandling.nanoseconds(.seconds(Int64.max)) == .max)
        // Past the largest number of nanoseconds, by a little and by a lot.
        #expect(ShutdownHandling.nanoseconds(.seconds(9_223_372_037)) == .max)
        #expect(ShutdownHandling.nanoseconds(.seconds(10_000_000_000)) == .max)
        #expect(ShutdownHandling.nanoseconds(.seconds(9_223_372_035)) == 9_223_372_035_000_000_000)
    }

    /// A flush of some cells with a deadline writes them and is not taken for the flush at exit: the process goes on,
    /// and a store would otherwise resend its calls as if nothing were to come after it.
    @Test func aFlushWithTheLongestTimeoutWritesAndReturns() throws {
        try withTemporaryDirectory { directory in
            let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: .directory(directory))
            storage.wrappedValue = 7
            let other = WLStorage(key: "l", defaultValue: 0, flushInterval: nil, store: .directory(directory))
            other.wrappedValue = 8
            let cells: Set<ObjectIdentifier> = [ObjectIdentifier(storage.cell), ObjectIdentifier(other.cell)]
            ShutdownHandling.flushEverything(
                only: { cells.contains(ObjectIdentifier($0)) }, within: .seconds(Int64.max))
            #expect(stored(Int.self, key: "k", in: directory) == 7)
            #expect(stored(Int.self, key: "l", in: directory) == 8)
            #expect(!WLStorageSystem.isFlushingAtExit)
        }
    }
}
