// Another program's change whose check failed once (open, read or stat) is still taken.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct FailedCheckTests {
    /// Another program stores a value; the read of the check fails once (EMFILE in a busy server, EIO). The change
    /// is reported and then forgotten: nothing reads the file again, the storage serves its old value for good, and
    /// its next change (a read-modify-write of that old value) overwrites the other program's value.
    @Test(arguments: [SystemCall.open, .read, .stat])
    func anOutsideChangeWhoseCheckFailedOnceIsStillTaken(call failing: SystemCall) throws {
        try withTemporaryDirectory { directory in
            let path = directory.standardizedFileURL.path
            // Stored before the storage opens, so that no write of its own comes back as an event to check.
            try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"mine\"")
            let watched = fileStorage("k", in: directory, default: "default", flushInterval: nil)
            try #require(watched.wrappedValue == "mine")
            let armed = TakenFlag(true)
            FaultInjection.install(
                { call, name in call == failing && name == "k" && armed.take() ? .fail(EMFILE) : nil },
                forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }
            try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"outside\"")
            try #require(eventually(timeout: 30) { !armed.isSet }, "the check did not run")
            #expect(eventually(timeout: 30) { watched.wrappedValue == "outside" }, "holds \(watched.wrappedValue)")
            watched.wrappedValue += "+1"
            watched.flush()
            #expect(stored(String.self, key: "k", in: directory) == "outside+1")
        }
    }
}
