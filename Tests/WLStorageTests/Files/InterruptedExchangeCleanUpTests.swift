// A conditional replacement killed in the middle of its exchange leaves its file under the exchange's name
// (`NAME~<expected>-<written>.xchg`), holding the written version, the version expected, or another program's version
// that the exchange displaced. The next clean-up resolves it from what it holds, and loses no other program's version.
import Foundation
import Synchronization
import Testing
import WLStorageTestSupport

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.onTestThreads)
struct InterruptedExchangeCleanUpTests {
    /// A directory with the key's file `key`, and the file an exchange of it left: made by writing each version under
    /// a name of its own and renaming it where the exchange would have left it.
    struct Exchange {
        let url: URL
        let directory: StorageDirectory
        /// The exchange's file.
        let name: String
        /// The version read, which the replacement expected at `key`.
        let expected: FileIdentity
        /// The replacement's written file.
        let written: FileIdentity

        /// `key` holds `expected` ("old"), the written file ("new") is apart: the versions of the replacement, with
        /// nothing renamed yet. The versions are kept under names of their own until they are placed, so that no
        /// inode is used twice.
        init(in url: URL) throws {
            self.url = url
            self.directory = StorageDirectory(path: url.path)
            try Data("old".utf8).write(to: url.appendingPathComponent("key"))
            try Data("new".utf8).write(to: url.appendingPathComponent("written-apart"))
            self.expected = try #require(directory.status(of: "key")?.identity)
            self.written = try #require(directory.status(of: "written-apart")?.identity)
            self.name = StorageDirectory.exchangeName(for: "key", replacing: expected, with: written)
        }

        func move(_ from: String, to: String) throws {
            #expect(rename(url.appendingPathComponent(from).path, url.appendingPathComponent(to).path) == 0)
        }

        func write(_ contents: String, to name: String) throws {
            try Data(contents.utf8).write(to: url.appendingPathComponent(name))
        }

        func contents(of name: String) -> String? {
            WLStorageTests.contents(of: name, in: url).map { String(decoding: $0, as: UTF8.self) }
        }

        /// Killed after an exchange that displaced another program's version ("other", stored at `key` after the
        /// check): the exchange's name holds that version, and the version expected is apart. The written file is
        /// still apart too, unless ``placeTheWrittenFile()`` puts it where the exchange left it.
        func displaceAnotherProgramsVersion() throws {
            try move("key", to: "expected-apart")
            try write("other", to: name)
        }

        /// The written file where the exchange left it: at `key`.
        func placeTheWrittenFile() throws {
            try move("written-apart", to: "key")
        }

        /// The directory's clean-up, with `plan` asked about its system calls; returns the names it resolved.
        func cleanUp(injecting plan: @escaping FaultInjection.Plan) throws -> [String] {
            FaultInjection.install(plan, forDirectory: directory.path)
            defer { FaultInjection.remove(forDirectory: directory.path) }
            return try directory.removeAbandonedTemporaryFiles()
        }
    }

    @Test func theNameSaysWhatItWasToBecomeAndTheTwoVersions() throws {
        try withTemporaryDirectory { url in
            let exchange = try Exchange(in: url)
            let parsed = try #require(StorageDirectory.interruptedExchange(exchange.name))
            #expect(parsed.name == "key")
            #expect(parsed.expected == exchange.expected.lastingStamp)
            #expect(parsed.written == exchange.written.lastingStamp)
            #expect(exchange.expected.lastingStamp != exchange.written.lastingStamp)
            #expect(StorageDirectory.isTemporary(exchange.name))
            #expect(StorageDirectory.writtenFileName(ofTemporary: exchange.name) == "key")
            #expect(FileName.forKey(exchange.name) != exchange.name, "the name is a key's file name")
            // A rename keeps the stamp: it is made of what a rename does not change.
            try exchange.move("written-apart", to: "moved")
            #expect(exchange.directory.status(of: "moved")?.identity.lastingStamp == exchange.written.lastingStamp)
        }
    }

    @Test(arguments: [
        "key~0123456789abcdef-0123456789abcdef.tmp", "key~0123456789abcdef0123456789abcdef.xchg",
        "key~0123456789ABCDEF-0123456789abcdef.xchg", "key~0123456789abcde-0123456789abcdef.xchg",
        "my key~0123456789abcdef-0123456789abcdef.xchg", "~0123456789abcdef-0123456789abcdef.xchg",
        "key~0123456789abcdef-0123456789abcdef.xchg.xchg",
    ])
    func namesOfAnotherShapeAreNotExchanges(name: String) {
        #expect(StorageDirectory.interruptedExchange(name) == nil)
        #expect(!StorageDirectory.isTemporary(name))
    }

    /// Killed before the exchange: the exchange's name holds the written file, which is removed.
    @Test func theWrittenFileIsRemoved() throws {
        try withTemporaryDirectory { url in
            let exchange = try Exchange(in: url)
            try exchange.move("written-apart", to: exchange.name)
            #expect(try exchange.directory.removeAbandonedTemporaryFiles() == [exchange.name])
            #expect(entries(of: url) == ["key"])
            #expect(exchange.contents(of: "key") == "old")
        }
    }

    /// Killed after an exchange that displaced the version expected: it is removed, and the rewrite stays.
    @Test func theVersionExpectedIsRemoved() throws {
        try withTemporaryDirectory { url in
            let exchange = try Exchange(in: url)
            try exchange.move("key", to: exchange.name)
            try exchange.move("written-apart", to: "key")
            #expect(try exchange.directory.removeAbandonedTemporaryFiles() == [exchange.name])
            #expect(entries(of: url) == ["key"])
            #expect(exchange.contents(of: "key") == "new")
        }
    }

    /// Killed after an exchange that displaced another program's version, stored after the check: the file in place
    /// is still the written one, so the other program's version is put back.
    @Test func anotherProgramsVersionIsPutBackOverTheWrittenFile() throws {
        try withTemporaryDirectory { url in
            let exchange = try Exchange(in: url)
            try exchange.displaceAnotherProgramsVersion()
            try exchange.placeTheWrittenFile()
            #expect(try exchange.directory.removeAbandonedTemporaryFiles() == [exchange.name])
            #expect(entries(of: url) == ["expected-apart", "key"])
            #expect(exchange.contents(of: "key") == "other")
        }
    }

    /// As above, and yet another program renames its version over the written file in the moment between the
    /// clean-up's look at the file in place and its exchange: that newest version stays in place.
    @Test func aVersionRenamedInDuringThePutBackWins() throws {
        try withTemporaryDirectory { url in
            let exchange = try Exchange(in: url)
            try exchange.displaceAnotherProgramsVersion()
            try exchange.placeTheWrittenFile()
            try exchange.write("newest", to: "newest-apart")
            let raced = Atomic<Bool>(false)
            let cleaned = try exchange.cleanUp(injecting: { call, name in
                if call == .rename, name == "key", !raced.exchange(true, ordering: .sequentiallyConsistent) {
                    _ = rename(url.appendingPathComponent("newest-apart").path, url.appendingPathComponent("key").path)
                }
                return nil
            })
            #expect(cleaned == [exchange.name])
            let didRace = raced.load(ordering: .sequentiallyConsistent)
            #expect(didRace)
            #expect(entries(of: url) == ["expected-apart", "key"])
            #expect(exchange.contents(of: "key") == "newest")
        }
    }

    /// Killed after an exchange that displaced another program's version, and the file in place changed since (a
    /// later change), or was removed: the displaced version is the older one, and is removed.
    @Test(arguments: [true, false])
    func anotherProgramsVersionIsRemovedWhenTheFileMovedOnSince(removed: Bool) throws {
        try withTemporaryDirectory { url in
            let exchange = try Exchange(in: url)
            try exchange.displaceAnotherProgramsVersion()
            if !removed { try exchange.write("later", to: "key") }
            #expect(try exchange.directory.removeAbandonedTemporaryFiles() == [exchange.name])
            #expect(
                entries(of: url)
                    == (removed ? ["expected-apart", "written-apart"] : ["expected-apart", "key", "written-apart"]))
            #expect(exchange.contents(of: "key") == (removed ? nil : "later"))
        }
    }

    /// A file of the exchange's name that cannot be looked at, or beside a file in place that cannot be, is left as
    /// it is: not removed unseen.
    @Test(arguments: ["exchange", "key"])
    func aFileThatCannotBeLookedAtIsLeft(unreadable: String) throws {
        try withTemporaryDirectory { url in
            let exchange = try Exchange(in: url)
            try exchange.displaceAnotherProgramsVersion()
            try exchange.placeTheWrittenFile()
            let failing = unreadable == "key" ? "key" : exchange.name
            let cleaned = try exchange.cleanUp(injecting: { call, name in
                call == .stat && name == failing ? .fail(EIO) : nil
            })
            #expect(cleaned == [])
            #expect(exchange.contents(of: exchange.name) == "other")
            #expect(exchange.contents(of: "key") == "new")
            // Once it can be looked at, the next clean-up puts it back.
            #expect(try exchange.directory.removeAbandonedTemporaryFiles() == [exchange.name])
            #expect(exchange.contents(of: "key") == "other")
        }
    }

    /// Another program's version that the clean-up cannot put back (the exchange fails) is kept aside under a name
    /// that the tool lists, not removed, and the written file stays in place.
    @Test func anotherProgramsVersionThatCannotBePutBackIsKeptAside() throws {
        try withTemporaryDirectory { url in
            let exchange = try Exchange(in: url)
            try exchange.displaceAnotherProgramsVersion()
            try exchange.placeTheWrittenFile()
            let cleaned = try exchange.cleanUp(injecting: { call, name in
                call == .rename && name == "key" ? .fail(EIO) : nil
            })
            #expect(cleaned == [])
            #expect(exchange.contents(of: "key") == "new")
            let aside = entries(of: url).filter(StorageDirectory.isMovedAside)
            #expect(aside.count == 1, "\(entries(of: url))")
            #expect(aside.allSatisfy { $0.hasPrefix("key~corrupt-") && exchange.contents(of: $0) == "other" })
            #expect(!entries(of: url).contains(exchange.name))
        }
    }

    /// A directory, or another entry that is not a regular file, under an exchange's name is not the package's: left.
    @Test func anEntryThatIsNotARegularFileIsLeft() throws {
        try withTemporaryDirectory { url in
            let exchange = try Exchange(in: url)
            try FileManager.default.createDirectory(
                at: url.appendingPathComponent(exchange.name), withIntermediateDirectories: false)
            #expect(try exchange.directory.removeAbandonedTemporaryFiles() == [])
            #expect(entries(of: url).contains(exchange.name))
        }
    }

    /// A conditional replacement at work holds the directory's lock exclusively through its exchanges: the tool
    /// tells such a one's exchange file from that of one that died by that lock.
    @Test func aDirectoryIsLockedExclusivelyOnlyWhileSomeoneHoldsItsLockSo() throws {
        try withTemporaryDirectory { url in
            let directory = StorageDirectory(path: url.path)
            #expect(!directory.isLockedExclusively())
            let fd = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            try #require(fd >= 0)
            defer { close(fd) }
            #expect(flock(fd, LOCK_SH) == 0)
            #expect(!directory.isLockedExclusively(), "a writer's shared lock")
            #expect(flock(fd, LOCK_EX) == 0)
            #expect(directory.isLockedExclusively())
            #expect(flock(fd, LOCK_UN) == 0)
            #expect(!directory.isLockedExclusively())
        }
    }

    /// The exchange's file is not a key: the directory store does not list it, and the file monitor does not report
    /// its changes as any key's.
    @Test func theExchangesFileIsNoKeyOfTheStoreAndNoChangeOfOne() async throws {
        try await withTemporaryDirectory { url in
            let exchange = try Exchange(in: url)
            try exchange.move("written-apart", to: exchange.name)
            let store = WLStorageDirectoryStore.directory(url)
            // The store's first use cleans the directory up: the file is made again after.
            _ = try store.keys()
            try exchange.write("new", to: exchange.name)
            #expect(try store.keys() == ["key"])

            // Names the file monitor reports changed; a report that any file may have changed (events lost while a
            // busy machine runs other tests) names none.
            let changed = Lock<[String]>([])
            let subscription = Runtime.shared.monitor.subscribe(toEveryFileIn: exchange.directory) { event in
                if case .file(let name) = event { changed.withLock { $0.append(name) } }
            }
            defer { Runtime.shared.monitor.unsubscribe(subscription) }
            // Written under a name that is no key's either (it has a `~`), then renamed.
            try exchange.write("newer", to: "staging~newer")
            try exchange.move("staging~newer", to: exchange.name)
            // A change of a key after it, so that the monitor has read the exchange's events when it is reported.
            try exchange.write("marker", to: "staging~marker")
            try exchange.move("staging~marker", to: "marker")
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline, !changed.withLock({ $0.contains("marker") }) {
                try await Task.sleep(nanoseconds: 10_000_000)
            }
            let seen = changed.withLock { $0 }
            #expect(seen.contains("marker"), "\(seen)")
            #expect(seen.allSatisfy { $0 == "marker" }, "\(seen)")
        }
    }
}
