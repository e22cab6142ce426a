// Key rotation: a value sealed under a previous key is read and resealed under the current one, without replacing
// another replica's change.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

private struct RotatedVisits: Codable, Equatable, Sendable {
    var name: String
    var visits: Int
}

private let rotatedVisitsMigrations: [WLStorageMigration<RotatedVisits>] = [
    .from(RotatedVisitsV0.self) { RotatedVisits(name: $0.login, visits: 5) }
]

private struct ConditionVisits: Codable, Equatable, Sendable {
    var name: String
    var visits: Int
}

private let conditionVisitsMigrations: [WLStorageMigration<ConditionVisits>] = [
    .from(ConditionVisitsV0.self) { ConditionVisits(name: $0.login, visits: 5) }
]

/// The earlier version's shape, migrated and written back in the current one.
private struct RotatedVisitsV0: Codable {
    var login: String
}

/// The earlier version's shape, migrated and written back in the current one.
private struct ConditionVisitsV0: Codable {
    var login: String
}

@Suite(.capturingOutput)
struct KeyRotationTests: EncryptedDirectorySuite {
    let key = try! WLStorageEncryptionKey.random()

    /// A value sealed under a previous key, read by the storages of two replicas (two handles, two cells), updated
    /// from many threads of both: no increment is lost, and the result is sealed under the current key.
    @Test func concurrentUpdatesThroughTwoRotatedReplicasLoseNothing() throws {
        let memory = MemoryStore()
        let old = try WLStorageEncryptionKey.random()
        try memory.encrypted(with: old).write(key: "n", data: json("0"))
        let one = WLStorage(
            key: "n", defaultValue: -1, flushInterval: nil, store: memory.encrypted(with: key, previousKeys: [old]))
        let two = WLStorage(
            key: "n", defaultValue: -1, flushInterval: nil,
            store: MemoryStore(replicaOf: memory).encrypted(with: key, previousKeys: [old]))
        #expect(one.wrappedValue == 0)
        #expect(two.wrappedValue == 0)
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            for _ in 0..<100 { (index % 2 == 0 ? one : two).update { $0 += 1 } }
        }
        let sealed = memory.contents.state.withLock { $0.values["n"] }
        #expect(fingerprint(of: sealed) == key.fingerprint)
        let opened = try memory.encrypted(with: key).read(key: "n")
        #expect(opened == json("400"))
    }

    /// A replica that read a value sealed under a previous key keeps its rewrite pending (no flush interval). Another
    /// replica then updates the key (its write is stored on condition; this replica's feed has not told it yet, as
    /// a notification may come late). The pending rewrite must not put the pre-rotation value back over the update:
    /// the store writes on condition, so the rewrite can be made on the condition that the key still holds what was
    /// read.
    @Test func aPendingRotationRewriteDoesNotReplaceAnotherReplicasUpdate() throws {
        let memory = MemoryStore()
        let old = try WLStorageEncryptionKey.random()
        try memory.encrypted(with: old).write(key: "n", data: json("10"))
        let late = WLStorage(
            key: "n", defaultValue: -1, flushInterval: nil, store: memory.encrypted(with: key, previousKeys: [old]))
        #expect(late.wrappedValue == 10)
        #expect(late.hasPendingChanges)  // the rewrite
        let other = WLStorage(
            key: "n", defaultValue: -1, flushInterval: nil,
            store: MemoryStore(replicaOf: memory).encrypted(with: key, previousKeys: [old]))
        other.update { $0 = 99 }
        #expect(try memory.encrypted(with: key).read(key: "n") == json("99"))
        late.flush()
        let now = try memory.encrypted(with: key).read(key: "n")
        #expect(
            now == json("99"),
            "the rewrite replaced another replica's update with \(String(decoding: now ?? Data(), as: UTF8.self))")
    }

    /// In a directory: a storage that read a value sealed under a previous key rewrites it under the current key at its
    /// flush, and another program stores a value after the rewrite's last read of the file, just before its file is
    /// put in place. That value is not replaced: the rewrite exchanges its file with the one in place and puts the
    /// other program's back. The same when every storage is flushed, with a change of another key of the store
    /// pending, so that the store's changes go as a batch, which leaves a rewrite to its own conditional write.
    @Test(arguments: [false, true])
    func aRotationRewriteInADirectoryDoesNotReplaceAValueStoredJustBeforeIt(flushingEverything: Bool) throws {
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            try store(directory, key: old).write(key: "n", data: json("10"))
            let other = try withTemporaryDirectory { elsewhere in
                try store(elsewhere).write(key: "n", data: json("20"))
                return try #require(file("n", in: elsewhere))
            }
            let rotated = store(directory, previous: [old])
            let late = WLStorage(key: "n", defaultValue: -1, flushInterval: nil, store: rotated)
            #expect(late.wrappedValue == 10)
            #expect(late.hasPendingChanges, "the value read under the previous key is to be written under the current")
            let companion = WLStorage(key: "m", defaultValue: 0, flushInterval: nil, store: rotated)
            companion.wrappedValue = 1
            let outsideWrite = Switch(true)
            FaultInjection.install(
                { call, name in
                    if call == .rename, name == "n", outsideWrite.isOn {
                        outsideWrite.set(false)
                        try? writeFromOutside(other, "n", in: directory)
                    }
                    return nil
                },
                forDirectory: directory.standardizedFileURL.path)
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }

            if flushingEverything {
                // Every live cell is looked at, and this test's flushed: not those the tests beside keep pending.
                let cells: [any RegisteredCell] = [late.cell, companion.cell]
                ShutdownHandling.flushEverything(only: { cell in cells.contains { $0 === cell } })
            } else {
                late.flush()
            }
            #expect(!outsideWrite.isOn, "the rewrite was not written")
            #expect(file("n", in: directory) == other, "the rewrite replaced the value another program stored")
            #expect(try store(directory).read(key: "n") == json("20"))
            if flushingEverything { #expect(try store(directory).read(key: "m") == json("1")) }
        }
    }

    /// Two encrypted stores of one directory with the same current key share one identity, so storages of one key
    /// share one cell. The second storage is given the previous key of the stored value: it must read it (its store
    /// opens it), whichever storage came first.
    @Test func aStorageGivenAPreviousKeyReadsItsValueAlthoughAStorageWithoutItCameFirst() throws {
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            try store(directory, key: old).write(key: "token", data: json(#""v""#))
            let rotated = store(directory, previous: [old])
            #expect(try rotated.read(key: "token") == json(#""v""#))
            let first = WLStorage(key: "token", defaultValue: "none", flushInterval: nil, store: store(directory))
            #expect(first.lastError?.code == .decodingFailed)
            let second = WLStorage(key: "token", defaultValue: "none", flushInterval: nil, store: rotated)
            #expect(
                second.wrappedValue == "v", "second holds \(second.wrappedValue): its store's previous key is not used")
        }
    }

    /// Encryption over encryption with a rotated inner store: a value sealed inside with the inner store's previous
    /// key is written again under its current key once a storage reads it ("A value opened with one of them is
    /// written again under the current key as soon as it is read").
    @Test func aNestedRotatedStoreRewritesAValueOfItsPreviousKey() throws {
        try withTemporaryDirectory { directory in
            let innerOld = try WLStorageEncryptionKey.random()
            let innerNew = try WLStorageEncryptionKey.random()
            let dir = WLStorageDirectoryStore.directory(directory)
            try dir.encrypted(with: innerOld).encrypted(with: key).write(key: "token", data: json(#""v""#))
            #expect(fingerprint(of: file("token", in: directory)) == innerOld.fingerprint)
            do {
                let storage = WLStorage(
                    key: "token", defaultValue: "", flushInterval: nil,
                    store: dir.encrypted(with: innerNew, previousKeys: [innerOld]).encrypted(with: key))
                #expect(storage.wrappedValue == "v")
                storage.flush()
            }
            #expect(fingerprint(of: file("token", in: directory)) == innerNew.fingerprint)
        }
    }

    /// A rotated storage released right after its creation writes the rewrite (its deinit flushes).
    @Test func aRotatedStorageReleasedAtOnceStillReseals() throws {
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            try store(directory, key: old).write(key: "token", data: json(#""v""#))
            _ = WLStorage(key: "token", defaultValue: "", flushInterval: nil, store: store(directory, previous: [old]))
            #expect(eventually { fingerprint(of: file("token", in: directory)) == key.fingerprint })
            #expect(try store(directory).read(key: "token") == json(#""v""#))
        }
    }

    /// A rotated value in an earlier type's shape: the migration and the rewrite happen together; the result is
    /// sealed under the current key and in the current shape, and the kept copy is sealed too.
    @Test func aRotatedValueInAnEarlierShapeIsMigratedAndResealed() throws {
        struct Before: Codable { var user: String }
        struct After: Codable, Equatable { var login: String }
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            try store(directory, key: old).write(key: "account", data: json(#"{"user":"ann"}"#))
            do {
                let storage = WLStorage(
                    key: "account", defaultValue: After(login: ""), flushInterval: nil,
                    store: store(directory, previous: [old]),
                    migrations: [.from(Before.self) { After(login: $0.user) }])
                #expect(storage.wrappedValue == After(login: "ann"))
                storage.flush()
            }
            #expect(fingerprint(of: file("account", in: directory)) == key.fingerprint)
            // In the current shape, with the earlier version's field kept for the programs that still read it.
            #expect(try store(directory).read(key: "account") == json(#"{"login":"ann","user":"ann"}"#))
        }
    }

    /// The rotation rewrite of a replica is pending (no flush interval) when another replica updates the key, whose
    /// news has not come. `flush()` makes the rewrite on condition and leaves the update (as the test above checks).
    /// `flushAll`, which batches the changes of several cells of one store, must not put the pre-rotation value back
    /// either.
    @Test func flushAllDoesNotWriteAPendingRotationRewriteOverAReplicasUpdate() throws {
        let memory = MemoryStore()
        let old = try WLStorageEncryptionKey.random()
        try memory.encrypted(with: old).write(key: "n", data: json("10"))
        let rotated = memory.encrypted(with: key, previousKeys: [old])
        let late = WLStorage(key: "n", defaultValue: -1, flushInterval: nil, store: rotated)
        #expect(late.wrappedValue == 10)
        #expect(late.hasPendingChanges)  // the rewrite
        // A second key of the same store with a change pending: flushAll writes the two in one batch.
        let neighbour = WLStorage(key: "m", defaultValue: 0, flushInterval: nil, store: rotated)
        neighbour.wrappedValue = 1
        let replica = WLStorage(
            key: "n", defaultValue: -1, flushInterval: nil,
            store: MemoryStore(replicaOf: memory).encrypted(with: key, previousKeys: [old]))
        replica.update { $0 = 99 }
        #expect(try memory.encrypted(with: key).read(key: "n") == json("99"))
        flushAllStores([rotated])
        #expect(try memory.encrypted(with: key).read(key: "m") == json("1"))
        let now = try memory.encrypted(with: key).read(key: "n")
        #expect(
            now == json("99"),
            "flushAll's batch wrote the rewrite over the replica's update: the key holds \(String(decoding: now ?? Data(), as: UTF8.self))"
        )
    }

    /// A rewrite that finds the key changed stores nothing and reads the key instead: the storage ends on the other
    /// replica's value (the store holds it, and so does memory, once the check ran).
    @Test func aRewriteThatFindsTheKeyChangedEndsOnTheOtherReplicasValue() throws {
        let memory = MemoryStore()
        let old = try WLStorageEncryptionKey.random()
        try memory.encrypted(with: old).write(key: "n", data: json("10"))
        let late = WLStorage(
            key: "n", defaultValue: -1, flushInterval: nil, store: memory.encrypted(with: key, previousKeys: [old]))
        #expect(late.wrappedValue == 10)
        let seen = Mutex<[Int]>([])
        let subscription = late.onChange(queue: DispatchQueue(label: "test.rotation")) { value in
            seen.withLock { $0.append(value) }
        }
        // Another replica removes the key, without news.
        memory.contents.state.withLock { $0.values["n"] = nil }
        late.flush()
        #expect(memory.contents.state.withLock { $0.values["n"] } == nil, "the rewrite recreated a removed key")
        #expect(eventually { late.wrappedValue == -1 })
        #expect(eventually { seen.withLock { $0 } == [-1] })
        // A set after it is written as usual.
        late.wrappedValue = 5
        late.flush()
        #expect(try memory.encrypted(with: key).read(key: "n") == json("5"))
        #expect(eventually { seen.withLock { $0 } == [-1, 5] })
        subscription.cancel()
    }

    /// A type-change rewrite whose conditional write stored its bytes and then threw (outcome unknown) is tried again:
    /// the key no longer holds the old bytes, so the retry stores nothing and reads the key, finding this process's
    /// own rewrite. The value does not change: observers must not be told of a change, and the bytes kept from
    /// before the type changed must go (the value is stored in the current shape). update() meets the same unknown
    /// outcome by reading the key back (AtomicUpdate.storeUpdate).
    @Test func aRewriteWhoseOutcomeWasLostIsNotTakenForAnotherProgramsChange() throws {
        let memory = MemoryStore()
        memory.contents.state.withLock { $0.values["profile"] = json(#"{"login":"ada"}"#) }
        let losing = InterceptedStore(memory)
        let storage = WLStorage(
            key: "profile", defaultValue: RotatedVisits(name: "new", visits: 5), flushInterval: nil, store: losing,
            migrations: rotatedVisitsMigrations)
        #expect(storage.wrappedValue == RotatedVisits(name: "ada", visits: 5))
        #expect(storage.hasPendingChanges)  // the rewrite in the current shape
        let queue = DispatchQueue(label: "key-rotation.observer")
        let seen = Mutex<[RotatedVisits]>([])
        let subscription = storage.onChange(queue: queue) { value in seen.withLock { $0.append(value) } }
        losing.afterNextConditionalWrite(losingTheOutcome: true)
        storage.flush()
        // The answer was lost, but the key, read back, holds the rewrite: it counts as written.
        #expect(storage.lastError == nil)
        let written = try #require(try memory.read(key: "profile"))
        #expect(try JSONDecoder().decode(RotatedVisits.self, from: written) == storage.wrappedValue)
        storage.flush()
        #expect(!storage.hasPendingChanges)
        let told = eventually(timeout: 3) { !seen.withLock { $0 }.isEmpty }
        queue.sync {}
        #expect(!told, "observers told of a change that is none: \(seen.withLock { $0 })")
        #expect(storage.wrappedValue == RotatedVisits(name: "ada", visits: 5))
        #expect(
            eventually(timeout: 30) { (try? memory.keys()) == ["profile"] },
            "keys left: \((try? memory.keys()) ?? [])")
        subscription.cancel()
    }

    /// Rotation in one cell (a value under the old key, read by the store with it as a previous key, rewritten) while
    /// the other cell, without the old key, could not read it and holds a set: the set waits, then the rewrite comes
    /// and it is discarded as documented; both end on the rewritten value.
    @Test func rotationInOneCellWhileTheOtherHoldsAPendingSet() throws {
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            try store(directory, key: old).write(key: "v", data: json("5"))
            let plain = WLStorage(key: "v", defaultValue: 0, flushInterval: nil, store: store(directory))
            #expect(plain.lastError?.code == .decodingFailed)
            plain.wrappedValue = 6
            let rotated = WLStorage(
                key: "v", defaultValue: 0, flushInterval: nil, store: store(directory, previous: [old]))
            #expect(rotated.wrappedValue == 5)
            rotated.flush()
            #expect(try store(directory).read(key: "v") == json("5"))
            #expect(eventually { plain.wrappedValue == 5 })
            plain.flush()
            #expect(try store(directory).read(key: "v") == json("5"))
            #expect(plain.lastError?.code == .changeDiscarded)
            #expect(rotated.wrappedValue == 5)
        }
    }

    /// A rotated store's storage writes a value of an earlier key again under the current one, as a rewrite; a
    /// value that another program (still on the earlier key) stores before that write must not be replaced by it.
    @Test func resealingUnderTheCurrentKeyDoesNotReplaceAValueStoredMeanwhile() throws {
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            let oldStore = store(directory, key: old)
            try oldStore.write(key: "token", data: json(#""first""#))
            let rotated = WLStorageEncryptedStore(.directory(directory), key: key, previousKeys: [old])
            let storage = WLStorage(key: "token", defaultValue: "", flushInterval: nil, store: rotated)
            #expect(storage.wrappedValue == "first")
            #expect(storage.hasPendingChanges)
            try oldStore.write(key: "token", data: json(#""stored-meanwhile""#))
            #expect(eventually { storage.wrappedValue == "stored-meanwhile" })
            storage.flush()
            let now = try store(directory, previous: [old]).read(key: "token")
            #expect(now == json(#""stored-meanwhile""#))
        }
    }

    /// Two programs in the middle of a rotation, one with `key: old, previousKeys: [new]` and one with
    /// `key: new, previousKeys: [old]`, as the documentation's two steps leave them while they are deployed: the file
    /// must settle, not be rewritten by each in turn forever.
    @Test func twoProgramsWithOppositeKeyOrdersDoNotRewriteTheValueForever() throws {
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            let new = try WLStorageEncryptionKey.random()
            try store(directory, key: old).write(key: "token", data: json(#""rotating""#))
            let child = try ChildProcess(
                "WLStorageTestChild", ["encrypted", directory.path, "token"],
                environment: childEnvironment(key: old, previous: new, action: "hold"))
            defer {
                child.send(SIGKILL)
                _ = child.waitForExit()
            }
            #expect(child.waitFor("ready"))
            #expect(child.lines.contains("value rotating"))
            let storage = WLStorage(
                key: "token", defaultValue: "", flushInterval: nil, store: store(directory, key: new, previous: [old]))
            #expect(storage.wrappedValue == "rotating")
            let url = directory.appendingPathComponent("token")
            var last = FileManager.default.contents(atPath: url.path)
            var stablePolls = 0
            var changes = 0
            // Settled: unchanged over 100 polls in a row (about a second).
            let settled = eventually(timeout: 30) {
                let now = FileManager.default.contents(atPath: url.path)
                if now == last {
                    stablePolls += 1
                } else {
                    stablePolls = 0
                    changes += 1
                    last = now
                }
                return stablePolls >= 100
            }
            #expect(settled, "the file was rewritten \(changes) times and did not settle")
        }
    }

    /// A type-change rewrite is written on condition. While the conditional write runs, another replica changes the
    /// key (so the condition fails) and the program sets the storage. The rewrite is dropped, but the set is a change
    /// of this process made after the replica's: it must be written, not lost.
    @Test func aSetMadeWhileARewriteFailsItsConditionIsWritten() throws {
        let memory = MemoryStore()
        memory.contents.state.withLock { $0.values["profile"] = Data(#"{"login":"ada"}"#.utf8) }
        let hooked = InterceptedStore(memory)
        let storage = WLStorage(
            key: "profile", defaultValue: ConditionVisits(name: "new", visits: 5), flushInterval: nil, store: hooked,
            migrations: conditionVisitsMigrations)
        #expect(storage.wrappedValue == ConditionVisits(name: "ada", visits: 5))
        #expect(storage.hasPendingChanges)  // the rewrite in the current shape
        hooked.beforeNextConditionalWrite {
            // Another replica's change, without news…
            memory.contents.state.withLock {
                $0.values["profile"] = Data(#"{"name":"bob","visits":7}"#.utf8)
            }
            // …and the program's own set, on another thread, while the rewrite is in flight.
            DispatchQueue.global().sync { storage.wrappedValue = ConditionVisits(name: "cy", visits: 9) }
        }
        storage.flush()
        storage.flush()
        #expect(
            eventually { !storage.hasPendingChanges && storage.wrappedValue == ConditionVisits(name: "cy", visits: 9) })
        let stored = try #require(try memory.read(key: "profile"))
        #expect(try JSONDecoder().decode(ConditionVisits.self, from: stored) == ConditionVisits(name: "cy", visits: 9))
    }

    /// A value sealed under a previous key, whose sealing under the current key fails (a full disk): the failure is
    /// reported and the rewrite stays pending, and once the disk takes it the value is sealed under the current key. A
    /// rewrite that leaves the value as it was is not taken for stored because the key, read back, opens to it.
    @Test func aFailedSealingUnderTheCurrentKeyIsReportedAndMadeLater() throws {
        try withTemporaryDirectory { directory in
            let old = try WLStorageEncryptionKey.random()
            try store(directory, key: old).write(key: "n", data: json("10"))
            let path = directory.standardizedFileURL.path
            FaultInjection.install(
                { call, name in
                    call == .write && name.map(StorageDirectory.isTemporary) == true ? .fail(ENOSPC) : nil
                }, forDirectory: path)
            defer { FaultInjection.remove(forDirectory: path) }
            let storage = WLStorage(
                key: "n", defaultValue: -1, flushInterval: nil, store: store(directory, previous: [old]))
            #expect(storage.wrappedValue == 10)
            storage.flush()
            let (failure, pending) = (storage.lastError, storage.hasPendingChanges)
            FaultInjection.remove(forDirectory: path)
            #expect(failure?.errno == ENOSPC, "\(failure.map { "\($0)" } ?? "no error")")
            #expect(pending, "the sealing under the current key counts as made")
            storage.flush()
            #expect(eventually { (try? store(directory).read(key: "n")) == json("10") }, "still under the previous key")
        }
    }
}
