// A fault of any system call while a value is opened, or set and released, never lets the default through or loses it.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct FaultSweepTests {
    /// Fails the `occurrence`-th call of `kind` (and, with `twice`, the next one too) in the directory at `path`.
    private static func plan(_ kind: SystemCall, _ occurrence: Int, _ errno: Int32, twice: Bool)
        -> FaultInjection.Plan
    {
        let seen = Atomic<Int>(0)
        return { call, _ in
            guard call == kind else { return nil }
            let count = seen.add(1, ordering: .relaxed).newValue
            return count == occurrence || (twice && count == occurrence + 1) ? .fail(errno) : nil
        }
    }

    /// A value is stored. A storage is opened with another default while one call (or two in a row) fails; then a
    /// change is set and flushed once the disk is healthy. The default never reaches the file, and the file and the
    /// storage agree at the end: the change, or (when the first read failed) the stored value that wins over it.
    @Test(arguments: [EIO, ENOSPC, EMFILE])
    func faultsWhileAStoredValueIsOpenedNeverLetTheDefaultThrough(errno: Int32) throws {
        var findings: [String] = []
        for twice in [false, true] {
            for kind in SystemCall.allCases {
                for occurrence in 1...8 {
                    try withTemporaryDirectory { directory in
                        let path = directory.standardizedFileURL.path
                        try replaceFromOutside(directory.appendingPathComponent("k"), with: "\"stored\"")
                        FaultInjection.install(Self.plan(kind, occurrence, errno, twice: twice), forDirectory: path)
                        let opened = fileStorage("k", in: directory, default: "default", flushInterval: nil)
                        opened.flush()
                        FaultInjection.remove(forDirectory: path)
                        let label = "\(kind) #\(occurrence)\(twice ? "+1" : "") errno \(errno)"
                        if stored(String.self, key: "k", in: directory) != "stored" {
                            findings.append(
                                "\(label): after opening, the file holds \(stored(String.self, key: "k", in: directory) ?? "nil")"
                            )
                        }
                        opened.wrappedValue = opened.wrappedValue + "+1"
                        opened.flush()
                        opened.flush()
                        let file = stored(String.self, key: "k", in: directory)
                        if file != opened.wrappedValue || !["stored", "stored+1"].contains(file ?? "") {
                            findings.append(
                                "\(label): the file holds \(file ?? "nil"), the storage \(opened.wrappedValue)")
                        }
                    }
                }
            }
        }
        #expect(findings.isEmpty, "\(findings.count) findings: \(findings.prefix(10))")
    }

    /// Nothing is stored. A storage is opened, set and released while one call (or two in a row) fails; the disk
    /// then becomes healthy. The value set is written (by the deinit, or by the retries of the released storage).
    @Test(arguments: [EIO, ENOSPC, EMFILE])
    func faultsWhileANewValueIsSetAndReleasedNeverLoseIt(errno: Int32) throws {
        var findings: [String] = []
        for twice in [false, true] {
            for kind in SystemCall.allCases {
                for occurrence in 1...8 {
                    try withTemporaryDirectory { directory in
                        let path = directory.standardizedFileURL.path
                        FaultInjection.install(Self.plan(kind, occurrence, errno, twice: twice), forDirectory: path)
                        do {
                            let opened = fileStorage("k", in: directory, default: "default", flushInterval: nil)
                            opened.wrappedValue = "set"
                        }
                        FaultInjection.remove(forDirectory: path)
                        let label = "\(kind) #\(occurrence)\(twice ? "+1" : "") errno \(errno)"
                        if !eventually(timeout: 30, { stored(String.self, key: "k", in: directory) == "set" }) {
                            findings.append(
                                "\(label): the file holds \(stored(String.self, key: "k", in: directory) ?? "nil")")
                        }
                    }
                }
            }
        }
        #expect(findings.isEmpty, "\(findings.count) findings: \(findings.prefix(10))")
    }
}
