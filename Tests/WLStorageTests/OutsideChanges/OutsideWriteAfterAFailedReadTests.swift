// Another program's write after a storage's first read failed is taken, and a set after it is written.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct OutsideWriteAfterAFailedReadTests {
    /// The first read fails (EIO), and every read until the test has seen it fail (else a retry may read first); then
    /// another program stores a value. The storage takes it, and a set after that is written.
    @Test func anOutsideWriteAfterAFailedFirstReadIsTaken() throws {
        try withTemporaryDirectory { directory in
            let path = directory.standardizedFileURL.path
            try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"stored\"")
            let failing = TakenFlag(true)
            FaultInjection.install(
                { call, name in call == .read && name == "k" && failing.isSet ? .fail(EIO) : nil },
                forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }
            let watched = fileStorage("k", in: directory, default: "default", flushInterval: nil)
            try #require(watched.lastError?.code == .readFailed)
            failing.set(false)
            try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"outside\"")
            #expect(eventually(timeout: 30) { watched.wrappedValue == "outside" })
            watched.wrappedValue = "mine"
            watched.flush()
            #expect(stored(String.self, key: "k", in: directory) == "mine")
        }
    }
}
