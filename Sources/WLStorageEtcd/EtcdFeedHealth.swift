import Foundation
import WLStorage

/// Whether a store's watches hear the changes of other programs, and the reports of the times they cannot: shared by
/// the watches of one store.
///
/// A trouble is reported (``WLStorageSystem/report(_:)``: to the error handler, or standard error) when it starts and
/// once a minute while it lasts, never under a lock: the handler is the program's code.
final class EtcdFeedHealth: @unchecked Sendable {  // `state` under `lock`; the rest is immutable
    private struct State {
        var trouble: WLStorageError?
        var lastReport: ContinuousClock.Instant?
    }

    /// The store's identity, which the reports name.
    let identity: String
    /// An `NSLock`, which ThreadSanitizer sees (it does not see `Synchronization.Mutex` on Linux).
    private let lock = NSLock()
    private var state = State()
    /// How often a trouble that lasts is reported again.
    static let reportInterval: Duration = .seconds(60)

    init(identity: String) {
        self.identity = identity
    }

    /// Why the feed cannot hear changes now, or `nil` while it does.
    var trouble: WLStorageError? { lock.withLock { state.trouble } }

    /// Says that the feed cannot hear changes, because of `what`: reported at once when it is the first trouble since
    /// the feed last heard, or when the last report is a minute old.
    func noteTrouble(_ what: String) {
        let error = WLStorageError(
            code: .readFailed,
            message: "the change feed of \(identity) \(what); until it watches again, this program does not see the"
                + " changes other programs make",
            path: identity)
        let now = ContinuousClock.now
        let (due, replaced) = lock.withLock {
            let replaced = state.trouble
            state.trouble = error
            let due = replaced == nil || state.lastReport.map { now - $0 >= Self.reportInterval } ?? true
            if due { state.lastReport = now }
            return (due, replaced)
        }
        _ = replaced
        if due { WLStorageSystem.report(error) }
    }

    /// Says that the feed hears changes again.
    func noteWatching() {
        let replaced = lock.withLock {
            defer {
                state.trouble = nil
                state.lastReport = nil
            }
            return state.trouble
        }
        _ = replaced
    }
}
