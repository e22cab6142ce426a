import Foundation
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct SHA256KnownAnswerTests {
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("/", "8a5edab282632443219e051e4ade2d1d5bbc671c781051bf1437897cbdfea0f1"),
        (".", "cdb4ee2aea69cc6a83331bbe96dc2caa9a299d21329efb0336fc02a82e1839a8"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("user/settings", "78091f41fc0c99a7019c07f5d9c754e015cc7a03a41215ca2adacdfd9504d6a1"),
    ])
    func hexDigestMatchesTheKnownAnswer(input: String, expected: String) {
        #expect(SHA256.hexDigest(of: input) == expected)
    }
}

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

@Suite(.capturingOutput) struct DefaultDirectoryTests {
    @Test func theEnvironmentVariableOverridesEverything() {
        let url = StorageLocation.defaultDirectory(
            program: "tool", debug: false,
            environment: ["WLSTORAGE_DIRECTORY": "/srv/state", "XDG_DATA_HOME": "/x", "HOME": "/home/u"])
        #expect(url?.path == "/srv/state")
    }

    @Test func xdgDataHomeComesBeforeHome() {
        let url = StorageLocation.defaultDirectory(
            program: "tool", debug: false, environment: ["XDG_DATA_HOME": "/x/data", "HOME": "/home/u"])
        #expect(url?.path == "/x/data/tool/.wlstorage")
    }

    @Test func homeGivesDotLocalShareAndDebugBuildsUseTheirOwnFolder() {
        let release = StorageLocation.defaultDirectory(program: "tool", debug: false, environment: ["HOME": "/home/u"])
        let debug = StorageLocation.defaultDirectory(program: "tool", debug: true, environment: ["HOME": "/home/u"])
        #expect(release?.path == "/home/u/.local/share/tool/.wlstorage")
        #expect(debug?.path == "/home/u/.local/share/tool/.wlstorage_debug")
    }

    @Test func aRelativeXDGDataHomeIsIgnoredAsTheSpecificationSays() {
        let url = StorageLocation.defaultDirectory(
            program: "tool", debug: false, environment: ["XDG_DATA_HOME": "relative", "HOME": "/h"])
        #expect(url?.path == "/h/.local/share/tool/.wlstorage")
    }

    @Test func withoutAnyBaseThereIsNoDefaultDirectory() {
        #expect(StorageLocation.defaultDirectory(program: "tool", debug: false, environment: [:]) == nil)
    }

    @Test func aProgramNameThatIsNotASafeFileNameIsHashed() throws {
        let url = try #require(
            StorageLocation.defaultDirectory(program: "../evil", debug: false, environment: ["HOME": "/h"]))
        #expect(url.path.hasPrefix("/h/.local/share/program-"))
        #expect(!url.path.contains(".."))
    }

    @Test func theLibraryDefaultIsUnderTheProgramsName() throws {
        let url = try #require(WLStorageSystem.defaultDirectory)
        if ProcessInfo.processInfo.environment["WLSTORAGE_DIRECTORY"] == nil {
            #expect(url.lastPathComponent == (StorageLocation.isDebug ? ".wlstorage_debug" : ".wlstorage"))
        }
    }
}
