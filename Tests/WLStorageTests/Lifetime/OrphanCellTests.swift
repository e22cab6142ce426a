// A storage released while its orphaned cell is let go keeps its pending value: the cell stays until it is written.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

/// Holds the only reference to a storage, so that a closure can release it.
private final class StorageHolder<T: Codable & Sendable>: @unchecked Sendable {  // used on one thread at a time
    var storage: WLStorage<T>?
}

@Suite(.capturingOutput) struct OrphanCellTests {
    /// Guarantees, "Storages released with a write left to do": a storage whose `deinit` cannot write its pending
    /// value "still owns it. The value stays pending in memory and is retried with the backoff ... until it is
    /// written"; "Threads": for an adopted value, the `onChange` closure of `withObservationTracking` "may read, set
    /// or flush the storage", and a handler may "drop a storage".
    ///
    /// A cell whose storages were all released with work left is kept by the registry (`StorageRegistry.keep`) and
    /// marked orphaned. A storage opened meanwhile joins it. When the orphan's job ends with nothing left to do,
    /// `CellState.finish` clears `orphaned` and sets `effects.releaseOrphan` under the lock, but the registry lets
    /// the cell go only later, in `StorageCell.perform(_:)`, after observers and the error handler have run. A
    /// storage of the cell released in that window with a write that fails (here from the observer of the adopted
    /// value, as promised to be safe; with threads, from any thread) has `storageReleased()` keep the cell again
    /// and mark it orphaned, and then the delayed `letGo` drops that new keep: the cell, orphaned with a pending
    /// value, is freed, and the value is lost for good (no retry, no exit flush).
    @Test func aStorageReleasedWhileTheOrphanIsLetGoKeepsItsValue() throws {
        try withTemporaryDirectory { directory in
            try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"stored\"")
            let reads = Switch(true)
            let writes = Switch(true)
            installReadWriteFaults(in: directory, name: "k", reads: reads, writes: writes)
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
            let scheduler = ManualScheduler()
            weak var cell: StorageCell<String>?
            do {
                // The first read fails: what is stored is unknown. A change is made, and the storage released: its
                // flush reads again, fails again, and the cell is kept with the change pending.
                let first = manualStorage("k", in: directory, default: "default", scheduler: scheduler)
                try #require(first.lastError?.code == .readFailed)
                first.wrappedValue = "first"
                cell = first.cell
            }
            try #require(cell != nil, "the released storage's cell was not kept")
            let holder = StorageHolder<String>()
            holder.storage = manualStorage("k", in: directory, default: "default", scheduler: scheduler)
            try #require(holder.storage?.wrappedValue == "first")
            let observed = Switch(false)
            withObservationTracking {
                _ = holder.storage?.wrappedValue
            } onChange: {
                // The stored value was read and adopted (the change made on the default is discarded, as promised).
                // The program makes a change of its own and drops the storage; the disk still fails the write. (The
                // Observation framework calls this closure again for the set made in it: only the first call acts.)
                guard !observed.isOn else { return }
                observed.set(true)
                holder.storage?.wrappedValue = "second"
                holder.storage = nil
            }
            reads.set(false)
            scheduler.advance(by: .seconds(1))
            try #require(observed.isOn, "the stored value was not adopted")
            #expect(cell != nil, "the cell holding the pending value \"second\" was freed")
            // The disk recovers: the released storage's value is retried and written, and then the cell is let go.
            writes.set(false)
            for _ in 0..<10 { scheduler.advance(by: .seconds(30)) }
            #expect(
                stored(String.self, key: "k", in: directory) == "second",
                "the file holds \(stored(String.self, key: "k", in: directory) ?? "nil"); \"second\" was lost")
            // Other tests' `flushAll()` and the monitor's checks can hold the cell for a moment.
            #expect(eventually(timeout: 30) { cell == nil }, "the cell is still kept after its value was written")
        }
    }
}
