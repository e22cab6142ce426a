import Dispatch
import Synchronization

/// Everything the package keeps for the whole process, in one object: the live cells, the file monitor, the write
/// scheduler, the store feeds, and the tables and settings the package's namespaces (``DirectoryTable``,
/// ``OwnRenames``, ``ShutdownHandling``…) work on. No other type of the package holds process state in a static
/// property, but for the libcrypto once-only start (``OpenSSLLibrary``) and the key of a thread's updates in flight
/// (``UpdatesOnThisThread``), which must outlive it or be made once.
///
/// Parts are made with the runtime and refer to one another through ``shared`` only when used, never while being
/// made.
package final class Runtime: Sendable {
    /// The process's runtime.
    package static let shared = Runtime()

    /// Every live cell, by its key.
    let registry = StorageRegistry()
    /// Changes made elsewhere, to the cells they concern.
    let router = ChangeRouter()
    /// The inotify monitor of the directories of live storages.
    package let monitor = FileMonitor()
    /// The timer of the cells' delayed writes.
    let scheduler = DispatchWriteScheduler()
    /// The change feeds of stores, one per store.
    let feeds = StoreFeeds()

    /// The directories prepared, by path (see ``DirectoryTable``).
    let directories = Lock(DirectoryTable.Records())
    /// The renames of this process, so that the monitor does not take them for others' (see ``OwnRenames``).
    let ownRenames = Lock(OwnRenames.State())
    /// The parent directories synced once (see ``StorageDirectory``).
    let syncedParents = Lock<Set<StorageDirectory>>([])
    /// The number of temporary file names made, which with ``temporaryNameSeed`` makes each one unique.
    let temporaryNames = Atomic<UInt64>(0)
    /// A random start for temporary file names, so that two processes name theirs differently.
    let temporaryNameSeed = UInt64.random(in: .min ... .max)
    /// The bindings of scopes to stores (see ``WLStorageScope``).
    let scopeBindings = Lock<[String: ScopeBinding]>([:])
    /// The fault plans of tests, by directory path, and how many there are (see ``FaultInjection``).
    let faultPlans = Lock<[String: FaultInjection.Plan]>([:])
    let faultPlanCount = Atomic<Int>(0)
    /// The largest value a storage writes (see ``WLStorageSystem/maximumValueSize``).
    let maximumValueSize = Atomic<Int>(ValueSizeLimit.defaultMaximum)
    /// The handler of the errors no caller sees (see ``WLStorageSystem/errorHandler``), in a box: a function held by
    /// the lock itself is converted on its way in and out of each access, and the layers pile up at every report.
    let errorHandler = Lock<ErrorHandlerBox?>(nil)
    /// The flush at exit and on signals (see ``ShutdownHandling``).
    let shutdown = ShutdownHandling.Parts()
    /// The calls into libcrypto in flight, and whether it is closed to new ones (see ``OpenSSLLibrary``).
    let openSSLCalls = Atomic<Int>(0)
}
