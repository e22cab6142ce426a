import Dispatch
import Synchronization
import WLStorageFiles

/// Everything the package keeps for the whole process, in one object. No other type holds process state in a static
/// property, but the file layer's (`FileSystemState`, which sees nothing above it) and libcrypto's (in
/// `WLStorageCrypto`). Parts refer to one another through ``shared`` only when used, never while made.
package final class Runtime: Sendable {
    package static let shared = Runtime()

    let registry = StorageRegistry()
    let router: ChangeRouter
    package let monitor: FileMonitor
    let scheduler = DispatchWriteScheduler()
    let feeds = StoreFeeds()

    let scopeBindings = Lock<[String: ScopeBinding]>([:])
    let maximumValueSize = Atomic<Int>(ValueSizeLimit.defaultMaximum)
    /// The error handler, boxed: a function held by the lock itself gains a conversion layer at every access.
    let errorHandler = Lock<ErrorHandlerBox?>(nil)
    let shutdown = ShutdownHandling.Parts()
    /// The thread key of ``UpdatesOnThisThread``, made once: the runtime is never released.
    let updatesKey = UpdatesOnThisThread.makeKey()

    private init() {
        router = ChangeRouter()
        monitor = FileMonitor(reportingTo: router)
    }
}
