import Dispatch
import Synchronization
import WLStorageCore

/// What the file layer keeps for the whole process, in one object: the directories prepared, this process's own
/// renames, the parents synced, the names of temporary files, and the fault plans of tests. The layers above keep
/// theirs in their runtime; this layer sees none of them.
package final class FileSystemState: Sendable {
    package static let shared = FileSystemState()

    /// The directories prepared, by path (see ``DirectoryTable``).
    let directories = Lock(DirectoryTable.Records())
    /// The renames of this process, so that the monitor does not take them for others' (see ``OwnRenames``).
    let ownRenames = Lock(OwnRenames.State())
    /// The parent directories synced once (see ``StorageDirectory``).
    let syncedParents = Lock<Set<StorageDirectory>>([])
    /// Temporary file names made, and a random start so that two processes name theirs differently.
    let temporaryNames = Atomic<UInt64>(0)
    let temporaryNameSeed = UInt64.random(in: .min ... .max)
    /// The fault plans of tests, by directory path, and how many there are (see ``FaultInjection``).
    let faultPlans = Lock<[String: FaultInjection.Plan]>([:])
    let faultPlanCount = Atomic<Int>(0)
    /// Where a preparation that could not wait for a directory's lock removes abandoned temporary files later; each
    /// waits for its directory's lock, so that one held elsewhere holds up no other directory's.
    let cleanUps = DispatchQueue(label: "WLStorage.directories", qos: .utility, attributes: .concurrent)
    /// The directories with a job on ``cleanUps`` not finished: one at a time for a directory, however often it is
    /// prepared anew meanwhile (each job would hold a thread while another holds the directory's lock).
    let cleanUpsWaiting = Lock<Set<StorageDirectory>>([])

    private init() {}
}
