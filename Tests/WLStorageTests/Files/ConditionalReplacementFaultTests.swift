import Dispatch
import Foundation
import Synchronization
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStorageFiles

/// One call of a conditional replacement failed, with no other program at work: nothing is lost, and the outcome says
/// what happened.
@Suite(.onTestThreads)
struct ConditionalReplacementFaultTests {
    @Test(arguments: [EIO, EINTR])
    func failingAnyOneCallOfAConditionalReplacementLosesNothing(fault: Int32) throws {
        var finished = false
        for index in 1...200 where !finished {
            try withTemporaryDirectory { url in
                let directory = StorageDirectory(path: url.path)
                let file = url.appendingPathComponent("key")
                try Data("old".utf8).write(to: file)
                let expected = try #require(try directory.readVersion("key", limit: .max)?.identity)
                let calls = Atomic<Int>(0)
                let failed = Lock<String?>(nil)
                FaultInjection.install(
                    { call, name in
                        guard calls.add(1, ordering: .sequentiallyConsistent).newValue == index else { return nil }
                        failed.withLock { $0 = "\(call)(\(name ?? "directory"))" }
                        return .fail(fault)
                    }, forDirectory: directory.path)
                let outcome = Result { () throws(WLStorageError) -> FileIdentity? in
                    try directory.write("key", contents: Data("new".utf8), ifStill: expected, announced: false)
                }
                FaultInjection.remove(forDirectory: directory.path)
                let at: Comment = "\(fault) at call \(index): \(failed.withLock { $0 } ?? "none")"
                if failed.withLock({ $0 }) == nil { finished = true }
                let stored = try String(contentsOf: file, encoding: .utf8)
                let names = try FileManager.default.contentsOfDirectory(atPath: url.path)
                let aside = names.filter { $0 != "key" }
                switch outcome {
                case .success(let placed?):
                    #expect(placed == (try directory.readVersion("key", limit: .max)?.identity), at)
                    #expect(stored == "new", at)
                    // The removal of the version replaced failed: it stays under the temporary name, for the next
                    // clean-up.
                    let unlinkFailed = failed.withLock { $0?.hasPrefix("unlink(") } == true
                    #expect(
                        aside.isEmpty || (unlinkFailed && aside.allSatisfy(StorageDirectory.isTemporary)),
                        "\(at): \(aside)")
                case .success(nil):
                    // Nothing else changed the file: giving way is not an outcome here.
                    Issue.record("\(at): the replacement gave way to no other version; the file holds \(stored)")
                case .failure(let error):
                    #expect(fault != EINTR, "\(at): an interrupted call was not made again: \(error)")
                    #expect([.writeFailed, .directoryUnavailable].contains(error.code), "\(at): \(error)")
                    #expect(stored == "old" || stored == "new", at)
                    // A version the replacement could not look at or put back is kept, and the message says where.
                    for name in aside {
                        #expect(error.message.contains(name), "\(at): \(name) left, unnamed in \(error)")
                        #expect(StorageDirectory.isMovedAside(name) || StorageDirectory.isTemporary(name), "\(at)")
                    }
                }
            }
        }
        #expect(finished, "the replacement did not end within 200 calls")
    }

    /// On a file system that cannot rename without replacing (`EINVAL` from `RENAME_NOREPLACE`) but can exchange, the
    /// written file is renamed to the exchange's name with a plain rename, and the replacement is made.
    @Test func whereFilesCannotBeRenamedWithoutReplacingTheExchangeIsStillMade() throws {
        try withTemporaryDirectory { url in
            let directory = StorageDirectory(path: url.path)
            let file = url.appendingPathComponent("key")
            try Data("old".utf8).write(to: file)
            let expected = try #require(try directory.readVersion("key", limit: .max)?.identity)
            let renames = Atomic<Int>(0)
            FaultInjection.install(
                { call, name in
                    guard call == .rename, let name, StorageDirectory.interruptedExchange(name) != nil else {
                        return nil
                    }
                    return renames.add(1, ordering: .sequentiallyConsistent).newValue == 1 ? .fail(EINVAL) : nil
                }, forDirectory: directory.path)
            defer { FaultInjection.remove(forDirectory: directory.path) }
            let placed = try directory.write("key", contents: Data("new".utf8), ifStill: expected, announced: false)
            let count = renames.load(ordering: .sequentiallyConsistent)
            #expect(count == 2, "the rename without replacing, then the plain rename")
            #expect(placed != nil)
            #expect(placed == (try directory.readVersion("key", limit: .max)?.identity))
            #expect(try String(contentsOf: file, encoding: .utf8) == "new")
            #expect(try FileManager.default.contentsOfDirectory(atPath: url.path) == ["key"])
        }
    }
}
