import Dispatch
import Foundation

/// The parts of a cell's state that most cells never use.
@usableFromInline
package final class CellExtras<T: Sendable>: @unchecked Sendable {  // read and written only under the cell's state lock
    package var listeners: [UInt64: @Sendable (T) -> Void] = [:]
    package var nextListenerID: UInt64 = 0
    /// Values waiting to be delivered to the listeners (all of them, or one), in the order of the changes.
    package var pendingNotifications: [(value: T, listener: UInt64?)] = []
    package var draining = false
    package var lastError: WLStorageError?
    /// When ``lastError`` is a misuse, the version then: a write of a later version clears it.
    package var misuseVersion: UInt64?
    package var waiters: [DispatchSemaphore] = []
    /// A check for another program's change came while the cell was busy.
    package var checkRequested = false
    /// Every storage of the cell was released with work left: the registry keeps the cell until it is done.
    package var orphaned = false
    package var externalChecks = 0  // for tests
    /// The version that only rewrites the value read in an earlier type's shape (see ``CellState/markRewrite()``).
    package var rewriteVersion: UInt64?
    /// The version that only drops the stored object's unknown members (see ``CellState/dropUnknownFields()``).
    package var dropVersion: UInt64?
    /// The change of the value pending when the drop was asked for, which the drop goes with until it is written.
    package var dropRidesOn: UInt64?
    /// Unreadable bytes replaced a read value: the next read that finds nothing is a removal.
    package var unreadableSinceKnown = false
    /// What is stored is JSON that another version stored and this one cannot read: left as it is until a set.
    package var storedByAnotherVersion = false
    /// Checks in a row that could not read the file; whether a retry is armed (no other is armed meanwhile).
    package var failedChecks: UInt32 = 0
    package var checkRetryArmed = false
    /// The bytes an update stored and the cell took while a job ran: the next job records them as written first.
    package var adoptedWrite: Data?

    package init() {}
}
