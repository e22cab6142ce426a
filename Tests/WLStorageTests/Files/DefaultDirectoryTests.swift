import Foundation
import Testing
@testable import WLStorage

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
