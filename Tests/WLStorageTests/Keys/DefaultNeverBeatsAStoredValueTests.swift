// A default nobody set never beats a stored value.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct DefaultNeverBeatsAStoredValueTests {
    @Test func aStorageWhoseDefaultIsUnwrittenAdoptsAnOutsideWriteAndNeverWritesTheDefaultOverIt() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("k")
            do {
                let storage = fileStorage("k", in: directory, default: "default", flushInterval: nil)
                try #require(!exists(file), "the default was written at init")
                try replaceFromOutside(file, with: "\"outside\"")
                let adopted = eventually(timeout: 30) { storage.wrappedValue == "outside" }
                #expect(adopted, "the storage kept \(storage.wrappedValue)")
                storage.flush()
                #expect(stored(String.self, key: "k", in: directory) == "outside")
            }
            // After deinit too.
            #expect(stored(String.self, key: "k", in: directory) == "outside")
        }
    }

    @Test func aProgramThatOnlyOpenedTheStorageDoesNotReplaceAnotherProgramsValueAtExit() throws {
        try withTemporaryDirectory { outer in
            let directory = outer.appendingPathComponent("store", isDirectory: true)
            let marker = outer.appendingPathComponent("go")
            let opener = try ChildProcess("WLStorageTestChild", ["default-wait", directory.path, "key", marker.path])
            defer { if opener.process.end == nil { opener.send(SIGKILL) } }
            try #require(opener.waitFor("ready"))
            let setter = try runChild("set", in: directory, value: "set by the other program")
            try #require(setter.status == 0)
            try #require(stored(String.self, key: "key", in: directory) == "set by the other program")
            #expect(FileManager.default.createFile(atPath: marker.path, contents: nil))
            let end = try #require(opener.waitForExit())
            #expect(end.status == 0)
            #expect(stored(String.self, key: "key", in: directory) == "set by the other program")
        }
    }

    @Test func twoProgramsStartingTogetherOnOneKeyKeepTheValueOneOfThemSet() throws {
        var lost: [String] = []
        for round in 0..<20 {
            try withTemporaryDirectory { directory in
                let setter = try ChildProcess("WLStorageTestChild", ["set", directory.path, "key", "set \(round)"])
                let opener = try ChildProcess("WLStorageTestChild", ["default-exit", directory.path, "key"])
                let setterEnd = try #require(setter.waitForExit())
                let openerEnd = try #require(opener.waitForExit())
                try #require(setterEnd.status == 0 && openerEnd.status == 0)
                let final = stored(String.self, key: "key", in: directory)
                if final != "set \(round)" { lost.append("round \(round): \(final ?? "nil")") }
            }
        }
        #expect(lost.isEmpty, "the set value was replaced in \(lost.count) of 20 rounds: \(lost)")
    }

    @Test(arguments: [nil, 1] as [Int?])
    func aCustomBackerIsNeverWrittenForADefaultNobodySet(flushInterval: Int?) {
        let backer = RecordingBacker<String>()
        do {
            let storage = WLStorage(defaultValueClosure: { "default" }, flushInterval: flushInterval, backer: backer)
            #expect(storage.wrappedValue == "default")
        }
        #expect(backer.writes == [])
    }
}
