// A change between the first read and the directory watch is picked up.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// A value whose decoding runs a hook, once: a way to act exactly between a storage's first read and what follows.
private struct HookedText: Codable, Sendable, Equatable {
    var text: String

    static let hook = Lock<(@Sendable () -> Void)?>(nil)

    init(_ text: String) {
        self.text = text
    }

    init(from decoder: any Decoder) throws {
        text = try decoder.singleValueContainer().decode(String.self)
        let hook = Self.hook.withLock { hook in
            defer { hook = nil }
            return hook
        }
        hook?()
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}

@Suite(.capturingOutput) struct ChangeBeforeTheWatchTests {
    @Test func aFileReplacedRightAfterTheFirstReadIsPickedUp() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("k")
            try Data("\"old\"".utf8).write(to: file)
            // Runs inside the first read, after the file's bytes were read and before the storage watches the
            // directory: another program replaces the file at that moment.
            HookedText.hook.withLock { hook in
                hook = { try? replaceFromOutside(file, with: "\"new\"") }
            }
            let storage = fileStorage("k", in: directory, default: HookedText("default"), flushInterval: nil)
            try #require(HookedText.hook.withLock { $0 == nil }, "the hook did not run")
            try #require(stored(String.self, key: "k", in: directory) == "new")
            let seen = eventually(timeout: 30) { storage.wrappedValue == HookedText("new") }
            #expect(seen, "the storage still has \(storage.wrappedValue.text)")
        }
    }

    @Test func aStorageOpenedWhileAnotherProgramRewritesTheFileEndsWithItsLastValue() throws {
        // Stress: a writer thread replaces the file as fast as it can until the storage is open, so its last write
        // sometimes lands between the first read and the watch.
        var missed: [String] = []
        for round in 0..<50 {
            try withTemporaryDirectory { directory in
                let file = directory.appendingPathComponent("k")
                try Data("0".utf8).write(to: file)
                let shared = Shared()  // flag: the storage is open; number: the last value written
                let done = DispatchSemaphore(value: 0)
                Thread.detachNewThread {
                    var value = 0
                    while !shared.flag.load(ordering: .sequentiallyConsistent) {
                        value += 1
                        if (try? replaceFromOutside(file, with: "\(value)")) != nil {
                            shared.number.store(value, ordering: .sequentiallyConsistent)
                        }
                    }
                    done.signal()
                }
                let storage = fileStorage("k", in: directory, default: -1, flushInterval: nil)
                shared.flag.store(true, ordering: .sequentiallyConsistent)
                done.wait()
                let final = shared.number.load(ordering: .sequentiallyConsistent)
                if !eventually(timeout: 30, { storage.wrappedValue == final }) {
                    missed.append("round \(round): file \(final), storage \(storage.wrappedValue)")
                }
            }
            if !missed.isEmpty { break }
        }
        #expect(missed.isEmpty, "\(missed)")
    }
}
