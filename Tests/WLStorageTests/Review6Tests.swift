// Review of 524fb1c, aaa26cb and abd6f44: the tool's refusal to replace a value that does not open, and a rewrite
// made on condition with a set slipping in while it runs. Tests that fail expose a fault; the others cover hard
// cases that hold.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// A store that writes on condition over a memory store, whose next conditional write runs a hook first (another
/// replica's change, a set of the storage) and then fails its condition.
private final class HookedConditionalStore: WLStorageStore, WLStorageConditionalStore {
    let base: MemoryStore
    let identity = "hooked:" + UUID().uuidString
    let hook = Mutex<(@Sendable () -> Void)?>(nil)

    init(_ base: MemoryStore) { self.base = base }

    func read(key: String) throws -> Data? { try base.read(key: key) }
    func write(key: String, data: Data) throws { try base.write(key: key, data: data) }
    func create(key: String, data: Data) throws -> Bool { try base.create(key: key, data: data) }
    func remove(key: String) throws { try base.remove(key: key) }
    func keys() throws -> [String] { try base.keys() }
    func observeChanges(_ changed: @escaping @Sendable (WLStorageStoreChange) -> Void) -> WLStorageObservation? {
        base.observeChanges(changed)
    }
    func write(key: String, data: Data, ifItHolds expected: Data?) throws -> Bool {
        if let hook = hook.withLock({ hook in
            defer { hook = nil }; return hook
        }) {
            hook()
            return try base.write(key: key, data: data, ifItHolds: expected)
        }
        return try base.write(key: key, data: data, ifItHolds: expected)
    }
}

/// Runs the tool built beside the tests, and returns its exit status and standard error.
private func runTool(_ arguments: [String], in root: URL) async throws -> (status: Int32, stderr: String) {
    let tool = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        .deletingLastPathComponent().appendingPathComponent("wlstorage")
    let errorURL = root.appendingPathComponent("review6-\(UUID().uuidString).err")
    _ = FileManager.default.createFile(atPath: errorURL.path, contents: nil)
    let process = Process()
    process.executableURL = tool
    process.arguments = arguments
    var environment = ProcessInfo.processInfo.environment
    for name in ["WLSTORAGE_DIRECTORY", "XDG_DATA_HOME", "HOME"] { environment[name] = nil }
    process.environment = environment
    process.currentDirectoryURL = root
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = FileHandle.nullDevice
    process.standardError = try FileHandle(forWritingTo: errorURL)
    try process.run()
    let ended = await waitUntil(timeout: 60) { process.end != nil }
    if !ended {
        process.terminate()
        _ = await waitUntil(timeout: 30) { process.end != nil }
    }
    let stderr = String(decoding: FileManager.default.contents(atPath: errorURL.path) ?? Data(), as: UTF8.self)
    return (process.end?.status ?? -1, stderr)
}

private struct Visits6: Codable, Equatable, Sendable {
    var name: String
    var visits: Int
}

/// The earlier version's shape, migrated and written back in the current one.
private struct Visits6V0: Codable {
    var login: String
}

private let visits6Migrations: [WLStorageMigration<Visits6>] = [
    .from(Visits6V0.self) { Visits6(name: $0.login, visits: 5) }
]

@Suite(.capturingOutput)
struct Review6Tests {
    // MARK: A set while a rewrite is written on condition

    /// A type-change rewrite is written on condition. While the conditional write runs, another replica changes the
    /// key (so the condition fails) and the program sets the storage. The rewrite is dropped, but the set is a change
    /// of this process made after the replica's: it must be written, not lost.
    @Test func aSetMadeWhileARewriteFailsItsConditionIsWritten() throws {
        let memory = MemoryStore()
        memory.contents.state.withLock { $0.values["profile"] = Data(#"{"login":"ada"}"#.utf8) }
        let hooked = HookedConditionalStore(memory)
        let storage = WLStorage(
            key: "profile", defaultValue: Visits6(name: "new", visits: 5), flushInterval: nil, store: hooked,
            migrations: visits6Migrations)
        #expect(storage.wrappedValue == Visits6(name: "ada", visits: 5))
        #expect(storage.hasPendingChanges)  // the rewrite in the current shape
        hooked.hook.withLock {
            $0 = {
                // Another replica's change, without news…
                memory.contents.state.withLock {
                    $0.values["profile"] = Data(#"{"name":"bob","visits":7}"#.utf8)
                }
                // …and the program's own set, on another thread, while the rewrite is in flight.
                DispatchQueue.global().sync { storage.wrappedValue = Visits6(name: "cy", visits: 9) }
            }
        }
        storage.flush()
        storage.flush()
        #expect(eventually { !storage.hasPendingChanges && storage.wrappedValue == Visits6(name: "cy", visits: 9) })
        let stored = try #require(try memory.read(key: "profile"))
        #expect(try JSONDecoder().decode(Visits6.self, from: stored) == Visits6(name: "cy", visits: 9))
    }

    // MARK: The tool's set with --key-file

    /// `set --key-file` refuses to replace a value that does not open with the key ("with the wrong key file, it
    /// would be lost for good"). A file larger than the tool reads (a program may raise `maximumValueSize`) does not
    /// open either: it must be refused too, not replaced unread.
    @Test func setWithAKeyFileDoesNotReplaceAFileTooLargeToOpen() async throws {
        try await withTemporaryDirectory { root in
            let store = root.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            let keyFile = root.appendingPathComponent("storage.key")
            try Data((try WLStorageEncryptionKey.random().base64EncodedSecret + "\n").utf8).write(to: keyFile)
            #expect(chmod(keyFile.path, 0o600) == 0)
            // An encrypted value of another program, under another key, larger than 16 MiB + the sealing overhead
            // (sparse: it costs no disk).
            let other = try WLStorageEncryptionKey.random()
            let sealedStore = WLStorageEncryptedStore(.directory(store), key: other)
            try sealedStore.write(key: "big", data: Data("1".utf8))
            let file = store.appendingPathComponent("big")
            let handle = try FileHandle(forWritingTo: file)
            try handle.truncate(atOffset: UInt64(ValueSizeLimit.sealedMaximum + 4096))
            try handle.close()
            let sizeBefore = try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int

            let set = try await runTool(["--dir", store.path, "--key-file", keyFile.path, "set", "big", "2"], in: root)
            let sizeAfter = try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int
            #expect(set.status == 1, "set replaced a file it could not open: \(set.stderr)")
            #expect(sizeAfter == sizeBefore, "the file was replaced: \(sizeBefore ?? -1) -> \(sizeAfter ?? -1) bytes")
        }
    }

    // MARK: The key file reader

    /// A key file of exactly 64 KiB (the key's text padded with white space) is read; one byte more is refused.
    @Test func aKeyFileOfExactly64KiBIsReadAndOneByteMoreIsRefused() throws {
        try withTemporaryDirectory { root in
            let key = try WLStorageEncryptionKey.random()
            let text = Data((key.base64EncodedSecret + "\n").utf8)
            for (size, accepted) in [(65_536, true), (65_537, false)] {
                let url = root.appendingPathComponent("k\(size)")
                try (text + Data(repeating: UInt8(ascii: " "), count: size - text.count)).write(to: url)
                #expect(chmod(url.path, 0o600) == 0)
                let read = try? WLStorageEncryptionKey(contentsOf: url)
                #expect((read != nil) == accepted, "size \(size)")
                if let read { #expect(read.base64EncodedSecret == key.base64EncodedSecret) }
            }
        }
    }
}
