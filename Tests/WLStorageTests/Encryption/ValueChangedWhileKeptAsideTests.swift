// An encrypted value that does not decode is kept aside only while the key still holds it: a value stored meanwhile
// is read instead, and, sealed under a previous key, written again under the current one on condition of what that
// second read found.
import Foundation
import Testing

@testable import WLStorage

@Suite(.capturingOutput)
struct ValueChangedWhileKeptAsideTests {
    let key = try! WLStorageEncryptionKey.random()
    let old = try! WLStorageEncryptionKey.random()

    /// Bytes sealed under a previous key that do not decode are being kept aside when another program stores a
    /// value, sealed under that previous key too. The storage reads that value and is to reseal it; another replica
    /// then stores a third value: the reseal, made on condition of the value read second, gives way to it.
    @Test func aResealOfTheValueReadAgainGivesWayToALaterChange() throws {
        let intercepted = InterceptedStore()
        try intercepted.encrypted(with: old).write(key: "n", data: json("not json"))
        let sealedUnderOld = try sealed(json("7"), with: old)
        intercepted.afterNextCreate { created in
            // The copy aside is made; the key changes before it is removed.
            guard created != "n" else { return }
            try? intercepted.base.write(key: "n", data: sealedUnderOld)
        }
        let storage = WLStorage(
            key: "n", defaultValue: -1, flushInterval: nil,
            store: intercepted.encrypted(with: key, previousKeys: [old]))
        #expect(storage.wrappedValue == 7)
        #expect(storage.hasPendingChanges, "the value read under the previous key is to be sealed under the current")
        #expect(intercepted.base.contents.state.withLock { $0.values.keys.contains { $0.contains("~corrupt-") } })

        try MemoryStore(replicaOf: intercepted.base).encrypted(with: key).write(key: "n", data: json("8"))
        storage.flush()
        #expect(try intercepted.base.encrypted(with: key).read(key: "n") == json("8"))
        #expect(eventually(timeout: 30) { storage.wrappedValue == 8 }, "holds \(storage.wrappedValue)")
    }

    /// The same, with the value stored meanwhile sealed under the current key: the storage reads it and has nothing
    /// to write.
    @Test func aValueReadAgainUnderTheCurrentKeyIsNotWrittenAgain() throws {
        let intercepted = InterceptedStore()
        try intercepted.encrypted(with: old).write(key: "n", data: json("not json"))
        let sealedUnderCurrent = try sealed(json("7"), with: key)
        intercepted.afterNextCreate { created in
            guard created != "n" else { return }
            try? intercepted.base.write(key: "n", data: sealedUnderCurrent)
        }
        let storage = WLStorage(
            key: "n", defaultValue: -1, flushInterval: nil,
            store: intercepted.encrypted(with: key, previousKeys: [old]))
        #expect(storage.wrappedValue == 7)
        #expect(!storage.hasPendingChanges)
        let writes = intercepted.base.contents.state.withLock { $0.writes }
        storage.flush()
        #expect(intercepted.base.contents.state.withLock { $0.writes } == writes)
        #expect(intercepted.base.contents.state.withLock { $0.values["n"] } == sealedUnderCurrent)
    }

    /// `data` as an encrypted store under `secret` seals it for the key `n`.
    private func sealed(_ data: Data, with secret: WLStorageEncryptionKey) throws -> Data {
        let scratch = MemoryStore()
        try scratch.encrypted(with: secret).write(key: "n", data: data)
        return try #require(scratch.contents.state.withLock { $0.values["n"] })
    }
}
