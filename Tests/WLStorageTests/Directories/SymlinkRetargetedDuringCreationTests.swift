// A symlink retargeted while a storage of it is created is followed: the storage watches where it leads.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct SymlinkRetargetedDuringCreationTests {
    /// The storage keys its cell by the identity the preparation saw, and the monitor watches what the path leads to
    /// when it looks a moment later. A symlink retargeted in between leaves the cell keyed by the old directory while
    /// its file is read, written and watched in the new one: no change of that file is ever noticed.
    @Test func aSymlinkRetargetedWhileTheStorageIsCreatedIsFollowed() throws {
        try withTemporaryDirectory { root in
            let x = root.path + "/x"
            let y = root.path + "/y"
            try makeDirectory(x)
            try makeDirectory(y)
            let link = root.appendingPathComponent("link")
            try #require(symlink(x, link.path) == 0)
            let path = link.path
            let calls = Atomic<Int>(0)
            FaultInjection.install(
                { call, name in
                    // The second stat of the directory is the monitor's: the deployment switches just before it.
                    if call == .stat, name == nil, calls.add(1, ordering: .relaxed).newValue == 2 {
                        try? retarget(link, to: y)
                    }
                    return nil
                }, forDirectory: path)
            let watched = storage("k", atPath: path)
            FaultInjection.remove(forDirectory: path)
            try #require(calls.load(ordering: .relaxed) >= 2)
            // The default is saved first (into y, where the path leads): the storage is settled.
            try #require(eventually(timeout: 30) { FileManager.default.fileExists(atPath: y + "/k") })
            try replaceFromOutside(URL(fileURLWithPath: y + "/k"), with: "\"outside\"")
            #expect(eventually(timeout: 30) { watched.wrappedValue == "outside" }, "holds \(watched.wrappedValue)")
        }
    }
}
