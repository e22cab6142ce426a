import Foundation
import WLStorage

/// Whether a store's watches, which share it, hear other programs' changes. A trouble is reported
/// (``WLStorageSystem/report(_:)``) when it starts and once a minute while it lasts, never under a lock: the handler
/// is the program's code.
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

    /// Says the feed cannot hear changes because of `what`: reported when new, or when the last report is a minute old.
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
