// A change made elsewhere while storages of its key are being opened and released, from many threads at once: every
// storage open when the changes stop ends with the last one, whichever source reports it (the file monitor, a store's
// feed, a custom backer's feed).
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// What the threads of one round share: whether the writer is to stop, and the last value it stored.
private final class Round: Sendable {
    let stop = Atomic<Bool>(false)
    let last = Atomic<Int>(0)
}

/// Runs `rounds` rounds: in each, a writer thread stores increasing values with `write` (returning whether it stored)
/// while `threads` threads open storages with `open`, release them, and open again a few times; once each holds one,
/// the writer stops. Every storage held must then end with the last value stored. Returns what went wrong.
private func openWhileWriting<S: AnyObject & Sendable>(
    rounds: Int, threads: Int, reopenings: Int = 6, write: @escaping @Sendable (Int) -> Bool,
    open: @escaping @Sendable () -> S, value: @escaping @Sendable (S) -> Int
) -> [String] {
    var missed: [String] = []
    for round in 0..<rounds {
        let shared = Round()
        // A first value of the round, stored before any storage opens: the round ends with it if the writer stores
        // nothing more.
        let first = round * 1_000_000
        while !write(first) {}
        shared.last.store(first, ordering: .sequentiallyConsistent)
        let writerDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var value = first
            while !shared.stop.load(ordering: .sequentiallyConsistent) {
                value += 1
                if write(value) { shared.last.store(value, ordering: .sequentiallyConsistent) }
            }
            writerDone.signal()
        }
        let held = Lock<[S]>([])
        DispatchQueue.concurrentPerform(iterations: threads) { index in
            // Opened and released a few times: the key's cell is made anew while the writer writes.
            for _ in 0..<(reopenings + index % 3) { _ = open() }
            let storage = open()
            held.withLock { $0.append(storage) }
        }
        shared.stop.store(true, ordering: .sequentiallyConsistent)
        writerDone.wait()
        let last = shared.last.load(ordering: .sequentiallyConsistent)
        let storages = held.withLock { $0 }
        if !eventually(timeout: 30, { storages.allSatisfy { value($0) == last } }) {
            missed.append("round \(round): stored \(last), storages \(storages.map(value))")
            break
        }
        withExtendedLifetime(storages) {}
    }
    return missed
}

/// A storage held by reference, so that the threads of a round can hand it over.
private final class Held<T: Codable & Sendable>: Sendable {
    let storage: WLStorage<T>
    init(_ storage: WLStorage<T>) { self.storage = storage }
}

@Suite(.capturingOutput) struct OpeningWhileChangedElsewhereTests {
    @Test func storagesOfAFileOpenedAndReleasedWhileAnotherProgramRewritesItEndWithItsLastValue() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("k")
            try Data("0".utf8).write(to: file)
            let missed = openWhileWriting(
                rounds: 30, threads: 4,
                write: { (try? replaceFromOutside(file, with: "\($0)")) != nil },
                open: { Held(fileStorage("k", in: directory, default: -1, flushInterval: nil)) },
                value: { $0.storage.wrappedValue })
            #expect(missed.isEmpty, "\(missed)")
        }
    }

    @Test func storagesOfAStoreKeyOpenedAndReleasedWhileAnotherProgramStoresItEndWithItsLastValue() {
        let store = MemoryStore()
        store.writeFromOutside("k", json: "0")
        let missed = openWhileWriting(
            rounds: 30, threads: 4,
            write: { value in
                store.writeFromOutside("k", json: "\(value)")
                return true
            },
            open: { Held(WLStorage(key: "k", defaultValue: -1, flushInterval: nil, store: store)) },
            value: { $0.storage.wrappedValue })
        #expect(missed.isEmpty, "\(missed)")
    }

    @Test func storagesOfACustomBackerOpenedWhileItsFeedReportsEndWithItsLastValue() {
        let backer = ObservableMemoryBacker(stored: 0)
        let missed = openWhileWriting(
            rounds: 30, threads: 4,
            write: { value in
                backer.setFromOutside(value)
                return true
            },
            open: { Held(WLStorage(defaultValueClosure: { -1 }, flushInterval: nil, backer: backer)) },
            value: { $0.storage.wrappedValue })
        #expect(missed.isEmpty, "\(missed)")
    }

    @Test func storagesOpenedWhileTheirDirectoryIsRemovedAndMadeAgainEndWithWhatItHoldsLast() throws {
        try withTemporaryDirectory { parent in
            let directory = parent.appendingPathComponent("d")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let file = directory.appendingPathComponent("k")
            let missed = openWhileWriting(
                rounds: 20, threads: 3,
                write: { value in
                    // Now and then the directory goes, and comes back with the value in it.
                    if value % 7 == 0 {
                        try? FileManager.default.removeItem(at: directory)
                        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                    }
                    return (try? replaceFromOutside(file, with: "\(value)")) != nil
                },
                open: { Held(fileStorage("k", in: directory, default: -1, flushInterval: nil)) },
                value: { $0.storage.wrappedValue })
            #expect(missed.isEmpty, "\(missed)")
        }
    }

    @Test func storagesOpenedThroughASymlinkRetargetedMeanwhileEndWithWhatItLeadsToLast() throws {
        try withTemporaryDirectory { parent in
            let releases = [parent.appendingPathComponent("r0"), parent.appendingPathComponent("r1")]
            for release in releases {
                try FileManager.default.createDirectory(at: release, withIntermediateDirectories: true)
                try Data("0".utf8).write(to: release.appendingPathComponent("k"))
            }
            let link = parent.appendingPathComponent("current")
            try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: "r0")
            let missed = openWhileWriting(
                rounds: 20, threads: 3,
                write: { value in
                    // Each value goes to the release the link does not lead to, and the link is moved there (`ln -sfn`,
                    // made atomic as deployments make it).
                    let target = releases[value % 2]
                    guard (try? replaceFromOutside(target.appendingPathComponent("k"), with: "\(value)")) != nil
                    else { return false }
                    let temporary = parent.appendingPathComponent(".link-\(value)")
                    guard symlink("r\(value % 2)", temporary.path) == 0 else { return false }
                    return rename(temporary.path, link.path) == 0
                },
                open: { Held(fileStorage("k", in: link, default: -1, flushInterval: nil)) },
                value: { $0.storage.wrappedValue })
            #expect(missed.isEmpty, "\(missed)")
        }
    }
}
