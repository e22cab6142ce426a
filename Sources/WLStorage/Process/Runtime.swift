import Dispatch
import Synchronization

/// Everything the package keeps for the whole process, in one object. No other type holds process state in a static
/// property, but libcrypto's (in `WLStorageCrypto`) and the thread key of ``UpdatesOnThisThread``, which must
/// outlive it or be made once. Parts refer to one another through ``shared`` only when used, never while made.
package final class Runtime: Sendable {
    package static let shared = Runtime()

    let registry = StorageRegistry()
    let router: ChangeRouter
    package let monitor: FileMonitor
    let scheduler = DispatchWriteScheduler()
    let feeds = StoreFeeds()

    /// The directories prepared, by path (see ``DirectoryTable``).
    let directories = Lock(DirectoryTable.Records())
    /// The renames of this process, so that the monitor does not take them for others' (see ``OwnRenames``).
    let ownRenames = Lock(OwnRenames.State())
    /// The parent directories synced once (see ``StorageDirectory``).
    let syncedParents = Lock<Set<StorageDirectory>>([])
    /// Temporary file names made, and a random start so that two processes name theirs differently.
    let temporaryNames = Atomic<UInt64>(0)
    let temporaryNameSeed = UInt64.random(in: .min ... .max)
    let scopeBindings = Lock<[String: ScopeBinding]>([:])
    /// The fault plans of tests, by directory path, and how many there are (see ``FaultInjection``).
    let faultPlans = Lock<[String: FaultInjection.Plan]>([:])
    let faultPlanCount = Atomic<Int>(0)
    let maximumValueSize = Atomic<Int>(ValueSizeLimit.defaultMaximum)
    /// The error handler, boxed: a function held by the lock itself gains a conversion layer at every access.
    let errorHandler = Lock<ErrorHandlerBox?>(nil)
    let shutdown = ShutdownHandling.Parts()

    private init() {
        router = ChangeRouter()
        monitor = FileMonitor(reportingTo: router)
    }
}
