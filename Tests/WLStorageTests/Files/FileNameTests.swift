import Foundation
import Testing
import WLStorageCrypto

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct FileNameTests {
    @Test(arguments: ["a", "first_name", "A-Z.0_9", ".hidden", "...", String(repeating: "k", count: 127)])
    func aSafeKeyIsItsOwnFileName(key: String) {
        #expect(FileName.isPlain(key))
        #expect(FileName.forKey(key) == key)
    }

    @Test(arguments: [
        "", ".", "..", "../escape", "/outside/sentinel", "a/b", "with space", "ключ", "tab\t", "nul\0byte",
        String(repeating: "k", count: 128), "~tilde", "name~1.tmp",
    ])
    func anUnsafeKeyIsStoredUnderItsSHA256(key: String) throws {
        #expect(!FileName.isPlain(key))
        let name = try #require(FileName.forKey(key))
        #expect(name == SHA256.hexDigest(of: key))
        #expect(name.count == 64)
        #expect(name.allSatisfy { "0123456789abcdef".contains($0) })
    }

    @Test func keysAreTheirBytesSoTwoSpellingsOfOneStringAreTwoKeysWithTwoFiles() throws {
        let composed = "caf\u{E9}"  // é as one scalar
        let decomposed = "cafe\u{301}"  // e and a combining acute accent
        #expect(composed == decomposed, "Swift calls them equal")
        #expect(Array(composed.utf8) != Array(decomposed.utf8))
        #expect(FileName.forKey(composed) == SHA256.hexDigest(of: composed))
        #expect(FileName.forKey(decomposed) == SHA256.hexDigest(of: decomposed))
        #expect(FileName.forKey(composed) != FileName.forKey(decomposed))
        try withTemporaryDirectory { directory in
            let first = fileStorage(composed, in: directory, default: 0, flushInterval: nil)
            let second = fileStorage(decomposed, in: directory, default: 0, flushInterval: nil)
            first.wrappedValue = 1
            second.wrappedValue = 2
            first.flush()
            second.flush()
            #expect(first.wrappedValue == 1)
            #expect(Array(first.key.utf8) == Array(composed.utf8))
            #expect(Array(second.key.utf8) == Array(decomposed.utf8))
            #expect(entries(of: directory).count == 2)
        }
    }

    @Test func noKeyFileNameCanBeATemporaryOrMovedAsideName() {
        for key in ["a", "a~b.tmp", "settings~corrupt-1", String(repeating: "x", count: 200)] {
            let name = FileName.forKey(key)!
            #expect(!StorageDirectory.isTemporary(name))
            #expect(!StorageDirectory.isMovedAside(name))
        }
        #expect(StorageDirectory.isTemporary(StorageDirectory.temporaryName(for: "a")))
        #expect(StorageDirectory.isMovedAside(StorageDirectory.movedAsideName(for: "a")))
        #expect(!FileName.isPlain(StorageDirectory.temporaryName(for: "a")))
        #expect(!FileName.isPlain(StorageDirectory.movedAsideName(for: "a")))
    }

    @Test func theTemporaryFileOfEveryNameAWriterGivesAFileIsTakenForATemporaryFile() {
        let digest = FileName.forKey("a b")!
        for written in [
            "a", digest, "a~before-type-change", digest + "~before-type-change",
            StorageDirectory.movedAsideName(for: "a"), StorageDirectory.movedAsideName(for: digest),
        ] {
            let temporary = StorageDirectory.temporaryName(for: written)
            #expect(StorageDirectory.isTemporary(temporary), "\(temporary)")
            #expect(StorageDirectory.writtenFileName(ofTemporary: temporary) == written)
        }
        for name in [
            "report~draft.tmp", "x~y.tmp", "a~b~0123456789abcdef.tmp", "a~before-type-change~0123456789ABCDEF.tmp",
            "~before-type-change~0123456789abcdef.tmp", "a b~before-type-change~0123456789abcdef.tmp",
        ] {
            #expect(!StorageDirectory.isTemporary(name), "\(name)")
        }
    }
}
