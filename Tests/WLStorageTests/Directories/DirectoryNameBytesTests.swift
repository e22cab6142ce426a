// Directories whose names are equal strings but different bytes are two directories, each with its own values.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct DirectoryNameBytesTests {
    /// Two directories whose names are the same Swift string (NFC "café" and NFD "café") but different bytes, hence
    /// two directories on ext4. Each storage must keep its value in its own directory.
    @Test func directoriesWhoseNamesAreEqualStringsButDifferentBytesAreTwoDirectories() throws {
        try withTemporaryDirectory { root in
            let composed = root.path + "/caf\u{E9}"
            let decomposed = root.path + "/cafe\u{301}"
            #expect(composed == decomposed, "Swift compares strings canonically")
            #expect(Array(composed.utf8) != Array(decomposed.utf8))
            try makeDirectory(composed)
            try makeDirectory(decomposed)
            let first = try #require(identity(ofPath: composed))
            let second = try #require(identity(ofPath: decomposed))
            try #require(first != second, "the file system normalizes names; the case does not arise")

            let inComposed = storage("k", atPath: composed)
            let inDecomposed = storage("k", atPath: decomposed)
            inComposed.wrappedValue = "composed"
            inComposed.flush()
            inDecomposed.wrappedValue = "decomposed"
            inDecomposed.flush()

            #expect(inComposed.wrappedValue == "composed", "the two storages share one value")
            #expect(storedString(atPath: composed + "/k") == "composed")
            #expect(
                storedString(atPath: decomposed + "/k") == "decomposed",
                "the decomposed directory holds \(entries(of: URL(fileURLWithPath: decomposed)))")
        }
    }
}
