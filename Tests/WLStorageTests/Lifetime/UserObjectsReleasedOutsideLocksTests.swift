// A value replaced by another program's change, or by a removal, is released outside the cell's lock.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct UserObjectsReleasedOutsideLocksTests {
    /// "None of your objects is released under [a lock of the package]." A value that is (or holds) a class is
    /// user code when it goes: adopting another program's value, or going back to the default after a removal,
    /// releases the old value inside the cell's lock, and a deinit that reads the storage crashes the program
    /// ("Recursive call to lock Mutex"), losing every pending value in it.
    @Test(arguments: ["change", "remove"])
    func anAdoptedOutsideChangeReleasesTheOldValueOutsideTheLock(how: String) throws {
        try withTemporaryDirectory { directory in
            let run = try runChildOfKeyK("class-value-deinit", in: directory, value: how)
            #expect(run.reason == .exit, "the child crashed: \(run.reason) \(run.status)")
            #expect(run.child.lines == ["adopted"])
        }
    }
}
