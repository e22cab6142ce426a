import Dispatch

/// What the cell does after a job, outside its lock.
package struct JobEffects {
    package var errors: [WLStorageError] = []
    /// The value changed (adopted from the backer): observers are told.
    package var valueChanged = false
    package var tick: (token: UInt32, delay: UInt64)?
    /// The cell has nothing left to write and was kept alive only for that: the registry lets it go.
    package var releaseOrphan = false
    /// A check asked for while the cell was busy, to run in the background now; a failed one's retry, in nanoseconds.
    package var scheduleCheck = false
    package var checkRetry: UInt64?
    /// The backer takes its last read as unseen before the follow-up check (``StoreBacking/forgetLastRead()``).
    package var forgetLastRead = false
    /// The cell took what a check or a default's save read, or a removal (see ``StoreBacking/adoptSeen()``).
    package var adoptSeen = false
    package var waiters: [DispatchSemaphore] = []
    /// Listeners have notifications to deliver, and no one delivers them yet.
    package var drainNotifications = false
    /// Values and errors the state let go of, released after the lock: their deinit may be user code.
    package var released: [Any] = []

    package init() {}
}
