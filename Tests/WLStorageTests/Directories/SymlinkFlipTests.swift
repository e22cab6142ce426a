// A symlink flipped between two directories leaves the storage on the value of the one it points at last.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct SymlinkFlipTests {
    /// The link is flipped between two directories fifty times, quickly, and left on the second: the storage ends on
    /// the second directory's value, and its next write goes there.
    @Test func aSymlinkFlippedBackAndForthEndsWhereItWasLeft() throws {
        try withTemporaryDirectory { root in
            let x = root.path + "/x"
            let y = root.path + "/y"
            try makeDirectory(x)
            try makeDirectory(y)
            try replaceFromOutside(URL(fileURLWithPath: x + "/k"), with: "\"in x\"")
            try replaceFromOutside(URL(fileURLWithPath: y + "/k"), with: "\"in y\"")
            let link = root.appendingPathComponent("link")
            try #require(symlink(x, link.path) == 0)
            let stored = storage("k", atPath: link.path)
            try #require(stored.wrappedValue == "in x")
            for round in 0..<50 { try retarget(link, to: round.isMultiple(of: 2) ? y : x) }
            try retarget(link, to: y)
            #expect(eventually(timeout: 30) { stored.wrappedValue == "in y" }, "holds \(stored.wrappedValue)")
            stored.wrappedValue = "after"
            stored.flush()
            #expect(storedString(atPath: y + "/k") == "after")
            #expect(storedString(atPath: x + "/k") == "in x")
        }
    }
}

extension SymlinkFlipTests {
    /// The storage writes its value into x through the link, the link is pointed at y, whose value the storage adopts,
    /// then back at x: the file the storage names holds its own earlier write again, and that is its value now, not
    /// y's, which no file it names holds any more.
    @Test func aSymlinkPointedBackAtTheStoragesOwnEarlierWriteLeadsBackToIt() throws {
        try withTemporaryDirectory { root in
            let x = root.path + "/x"
            let y = root.path + "/y"
            try makeDirectory(x)
            try makeDirectory(y)
            try replaceFromOutside(URL(fileURLWithPath: y + "/k"), with: "\"in y\"")
            let link = root.appendingPathComponent("link")
            try #require(symlink(x, link.path) == 0)
            let stored = storage("k", atPath: link.path)
            stored.wrappedValue = "mine"
            stored.flush()
            try #require(storedString(atPath: x + "/k") == "mine")
            try retarget(link, to: y)
            try #require(eventually(timeout: 30) { stored.wrappedValue == "in y" }, "holds \(stored.wrappedValue)")
            try retarget(link, to: x)
            #expect(eventually(timeout: 30) { stored.wrappedValue == "mine" }, "holds \(stored.wrappedValue)")
            #expect(storedString(atPath: x + "/k") == "mine")
            #expect(storedString(atPath: y + "/k") == "in y")
        }
    }
}
