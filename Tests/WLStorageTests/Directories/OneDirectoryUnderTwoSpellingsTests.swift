// Two spellings of one directory are one directory.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct OneDirectoryUnderTwoSpellingsTests {
    enum Spelling: String, CaseIterable, Sendable {
        case symlink, dotDot
    }

    @Test(arguments: Spelling.allCases)
    func twoSpellingsOfOneDirectoryShareOneValue(spelling: Spelling) throws {
        try withTemporaryDirectory { outer in
            let real = outer.appendingPathComponent("real", isDirectory: true)
            try FileManager.default.createDirectory(
                at: real.appendingPathComponent("sub"), withIntermediateDirectories: true)
            let other: URL
            switch spelling {
            case .symlink:
                other = outer.appendingPathComponent("alias", isDirectory: true)
                try FileManager.default.createSymbolicLink(at: other, withDestinationURL: real)
            case .dotDot:
                other = URL(fileURLWithPath: real.path + "/sub/..", isDirectory: true)
            }
            do {
                let first = fileStorage("k", in: real, default: "default", flushInterval: nil)
                let second = fileStorage("k", in: other, default: "default", flushInterval: nil)
                first.wrappedValue = "set through the first"
                #expect(second.wrappedValue == "set through the first")
                second.wrappedValue = "set through the second"
                #expect(first.wrappedValue == "set through the second")
                // Released in the order that writes a stale value last if the two are not one.
                _ = consume second
                _ = consume first
            }
            #expect(stored(String.self, key: "k", in: real) == "set through the second")
        }
    }

    @Test func aStorageOpenedThroughASymlinkFollowsItWhenItIsRetargeted() throws {
        try withTemporaryDirectory { outer in
            let a = outer.appendingPathComponent("a", isDirectory: true)
            let b = outer.appendingPathComponent("b", isDirectory: true)
            let link = outer.appendingPathComponent("link", isDirectory: true)
            try FileManager.default.createDirectory(at: a, withIntermediateDirectories: false)
            try FileManager.default.createDirectory(at: b, withIntermediateDirectories: false)
            try Data("\"in a\"".utf8).write(to: a.appendingPathComponent("k"))
            try Data("\"in b\"".utf8).write(to: b.appendingPathComponent("k"))
            #expect(symlink("a", link.path) == 0)

            let storage = fileStorage("k", in: link, default: "default", flushInterval: nil)
            try #require(storage.wrappedValue == "in a")

            // `ln -sfn b link`: a new symlink renamed over the old one.
            let newLink = outer.appendingPathComponent("link.new")
            #expect(symlink("b", newLink.path) == 0)
            #expect(rename(newLink.path, link.path) == 0)

            try replaceFromOutside(link.appendingPathComponent("k"), with: "\"written through the link\"")
            let seen = eventually(timeout: 30) { storage.wrappedValue == "written through the link" }
            #expect(seen, "the storage still has \(storage.wrappedValue)")
        }
    }
}
