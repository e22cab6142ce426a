// Storages of a directory that could not be inspected when the first was opened share one value.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct UninspectableDirectoryTests {
    /// The first storage of a directory could not learn the directory's identity (one failed `stat`, as a
    /// directory that is briefly unreachable gives), so it was registered by path; every later storage of the same
    /// file, by the same path, must still share its value.
    @Test func aStorageOpenedWhileTheDirectoryCouldNotBeInspectedSharesItsValueWithLaterOnes() throws {
        try withTemporaryDirectory { directory in
            let path = directory.standardizedFileURL.path
            let fail = TakenFlag(true)
            FaultInjection.install(
                { call, name in call == .stat && name == nil && fail.take() ? .fail(EIO) : nil }, forDirectory: path)
            let first = storage("k", atPath: path, default: "default")
            FaultInjection.remove(forDirectory: path)
            try #require(!fail.isSet, "the fault was not injected")
            let second = storage("k", atPath: path, default: "default")
            first.wrappedValue = "set through the first"
            #expect(second.wrappedValue == "set through the first", "one file, two values in one process")
            second.wrappedValue = "set through the second"
            second.flush()
            #expect(first.wrappedValue == "set through the second")
            // A change by another program reaches both.
            try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"outside\"")
            #expect(eventually(timeout: 30) { second.wrappedValue == "outside" })
            #expect(eventually(timeout: 30) { first.wrappedValue == "outside" }, "still \(first.wrappedValue)")
        }
    }
}
