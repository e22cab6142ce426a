import Dispatch

/// The parts of a cell's state that most cells never use.
final class CellExtras<T: Sendable>: @unchecked Sendable {  // read and written only under the cell's state lock
    var listeners: [UInt64: @Sendable (T) -> Void] = [:]
    var nextListenerID: UInt64 = 0
    /// Values waiting to be delivered to the listeners (all of them, or one), in the order of the changes.
    var pendingNotifications: [(value: T, listener: UInt64?)] = []
    var draining = false
    var lastError: WLStorageError?
    /// When ``lastError`` is a misuse, the version then: a write of a later version clears it.
    var misuseVersion: UInt64?
    var waiters: [DispatchSemaphore] = []
    /// A check for another program's change came while the cell was busy.
    var checkRequested = false
    /// Every storage of the cell was released with work left: the registry keeps the cell until it is done.
    var orphaned = false
    var externalChecks = 0  // for tests
    /// The version that only rewrites the value read in an earlier type's shape (see ``CellState/markRewrite()``).
    var rewriteVersion: UInt64?
    /// The version that only drops the stored object's unknown members (see ``CellState/dropUnknownFields()``).
    var dropVersion: UInt64?
    /// The change of the value pending when the drop was asked for, which the drop goes with until it is written.
    var dropRidesOn: UInt64?
    /// Unreadable bytes replaced a read value: the next read that finds nothing is a removal.
    var unreadableSinceKnown = false
    /// What is stored is JSON that another version stored and this one cannot read: left as it is until a set.
    var storedByAnotherVersion = false
    /// Checks in a row that could not read the file; whether a retry is armed (no other is armed meanwhile).
    var failedChecks: UInt32 = 0
    var checkRetryArmed = false
}
