// Encrypted storages are written at exit, on SIGTERM, from many threads, and when released in any order.
import Foundation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput)
struct EncryptedStorageLifetimeTests: EncryptedDirectorySuite {
    let key = try! WLStorageEncryptionKey.random()

    /// exit(0) with a pending change of an encrypted storage: written, and decryptable.
    @Test(arguments: ["exit", "plain-first-exit"])
    func aPendingEncryptedChangeIsWrittenWhenTheProgramExits(action: String) throws {
        try withTemporaryDirectory { directory in
            let child = try ChildProcess(
                "WLStorageTestChild", ["encrypted", directory.path, "token", "exit-secret"],
                environment: childEnvironment(key: key, action: action))
            #expect(child.waitFor("ready"))
            let ended = try #require(child.waitForExit())
            #expect(ended.reason == .exit && ended.status == 0)
            #expect(try store(directory).read(key: "token") == json(#""exit-secret""#))
        }
    }

    /// SIGTERM with a pending change of an encrypted storage: written, and decryptable.
    @Test func aPendingEncryptedChangeIsWrittenOnSIGTERM() throws {
        try withTemporaryDirectory { directory in
            let child = try ChildProcess(
                "WLStorageTestChild", ["encrypted", directory.path, "token", "term-secret"],
                environment: childEnvironment(key: key, action: "wait"))
            #expect(child.waitFor("ready"))
            child.send(SIGTERM)
            let ended = try #require(child.waitForExit())
            #expect(ended.reason == .uncaughtSignal && ended.status == SIGTERM)
            #expect(try store(directory).read(key: "token") == json(#""term-secret""#))
        }
    }

    /// A program started with the wrong key that ends (exit(0), SIGTERM) with a set pending: the flush at exit leaves
    /// the value it cannot open as it is.
    @Test(arguments: ["exit", "wait"])
    func aProgramWithTheWrongKeyLeavesTheValueWhenItEnds(action: String) throws {
        try withTemporaryDirectory { directory in
            try store(directory).write(key: "token", data: json(#""right""#))
            let sealed = try #require(file("token", in: directory))
            let child = try ChildProcess(
                "WLStorageTestChild", ["encrypted", directory.path, "token", "wrong"],
                environment: childEnvironment(key: try .random(), action: action))
            #expect(child.waitFor("ready"))
            if action == "wait" { child.send(SIGTERM) }
            #expect(try #require(child.waitForExit()).reason == (action == "wait" ? .uncaughtSignal : .exit))
            #expect(file("token", in: directory) == sealed)
        }
    }

    @Test func manyThreadsSetGetAndUpdateAnEncryptedStorage() throws {
        try withTemporaryDirectory { directory in
            let storage = WLStorage(key: "count", defaultValue: 0, flushInterval: 0, store: store(directory))
            let threads = 8
            let rounds = 300
            DispatchQueue.concurrentPerform(iterations: threads) { thread in
                for round in 0..<rounds {
                    storage.update { $0 += 1 }
                    _ = storage.wrappedValue
                    if round % 50 == 0 { storage.flush() }
                }
            }
            #expect(storage.wrappedValue == threads * rounds)
            storage.flush()
            let stored = try store(directory).read(key: "count")
            #expect(stored == json("\(threads * rounds)"))
            #expect(storage.lastError == nil)
        }
    }

    /// Storages of encrypted stores released from inside their own change handlers, and in every order.
    @Test func encryptedStoragesReleasedInsideTheirOwnHandlersAndInAnyOrderWriteTheirValues() throws {
        try withTemporaryDirectory { directory in
            // Released from inside its own handler, with a change pending.
            let box = Mutex<WLStorage<String>?>(
                WLStorage(key: "self", defaultValue: "", flushInterval: 3_600, store: store(directory)))
            let released = Atomic<Bool>(false)
            let subscription = box.withLock { $0! }.onChange(queue: .global()) { value in
                guard value == "last" else { return }
                let storage = box.withLock { storage -> WLStorage<String>? in
                    defer { storage = nil }
                    return storage
                }
                _ = storage  // the last reference goes here, inside the handler
                released.store(true, ordering: .sequentiallyConsistent)
            }
            box.withLock { $0! }.wrappedValue = "first"
            box.withLock { $0! }.flush()
            box.withLock { $0! }.wrappedValue = "last"
            #expect(eventually { released.load(ordering: .sequentiallyConsistent) })
            #expect(eventually { (try? store(directory).read(key: "self")) == json(#""last""#) })
            subscription.cancel()

            // Three storages of one key and one store, released in every order, with a change pending.
            let orders = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]]
            for (index, order) in orders.enumerated() {
                var storages: [WLStorage<Int>?] = (0..<3).map { _ in
                    WLStorage(key: "order", defaultValue: 0, flushInterval: 3_600, store: store(directory))
                }
                storages[order[0]]!.wrappedValue = index * 10 + 1
                storages[order[1]]!.update { $0 += 1 }
                for position in order { storages[position] = nil }
                #expect(
                    eventually { (try? store(directory).read(key: "order")) == json("\(index * 10 + 2)") },
                    "order \(order)")
            }
        }
    }
}
