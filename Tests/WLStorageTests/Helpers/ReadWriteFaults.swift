// Read and write faults switched on and off from a test.
import Foundation
import Synchronization

@testable import WLStorage
@testable import WLStorageFiles

/// Fails reads of the file `name` (its `open`) while `reads` is on, and every rename while `writes` is on.
func installReadWriteFaults(in directory: URL, name: String, reads: Switch, writes: Switch) {
    FaultInjection.install(
        { call, entry in
            if call == .open, entry == name, reads.isOn {
                reads.tally()
                return .fail(EIO)
            }
            if call == .rename || call == .link, writes.isOn {
                writes.tally()
                return .fail(EIO)
            }
            return nil
        }, forDirectory: directory.standardizedFileURL.path)
}
