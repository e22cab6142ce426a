import Dispatch

/// What the cell does after a job, outside its lock.
struct JobEffects {
    var errors: [WLStorageError] = []
    /// The value changed (adopted from the backer): observers are told.
    var valueChanged = false
    var tick: (token: UInt32, delay: UInt64)?
    /// The cell has nothing left to write and was kept alive only for that: the registry lets it go.
    var releaseOrphan = false
    /// A check asked for while the cell was busy, to run in the background now; a failed one's retry, in nanoseconds.
    var scheduleCheck = false
    var checkRetry: UInt64?
    /// The backer takes its last read as unseen before the follow-up check (``StoreBacking/forgetLastRead()``).
    var forgetLastRead = false
    /// The cell took the value the check read: its bytes are the base of later changes (``StoreBacking/adoptSeen()``).
    var adoptSeen = false
    var waiters: [DispatchSemaphore] = []
    /// Listeners have notifications to deliver, and no one delivers them yet.
    var drainNotifications = false
    /// Values and errors the state let go of, released after the lock: their deinit may be user code.
    var released: [Any] = []
}
