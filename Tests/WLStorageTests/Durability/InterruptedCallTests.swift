// One interruption (EINTR) of any system call does not make a flush fail.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct InterruptedCallTests {
    /// A signal can interrupt any call on a FUSE or NFS mount (EINTR). "Short writes and EINTR are retried": one
    /// interruption of any call must not make a flush fail.
    @Test(arguments: SystemCall.allCases)
    func oneInterruptionOfAnyCallDoesNotFailAFlush(call interrupted: SystemCall) throws {
        try withTemporaryDirectory { directory in
            let path = directory.standardizedFileURL.path
            let text = fileStorage("k", in: directory, default: "", flushInterval: nil)
            text.flush()
            let armed = TakenFlag(true)
            FaultInjection.install(
                { call, _ in call == interrupted && armed.take() ? .fail(EINTR) : nil }, forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }
            text.wrappedValue = "value"
            text.flush()
            #expect(!text.hasPendingChanges, "\(text.lastError.map(String.init(describing:)) ?? "")")
            #expect(stored(String.self, key: "k", in: directory) == "value")
        }
    }
}
