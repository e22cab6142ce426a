// The last storage of a key, let go of from inside its own change handler with a change pending, writes the change
// and leaves nothing registered, whatever holds the key: a directory's file, another store's key, or a custom backer
// with a change feed.
import Dispatch
import Foundation
import Testing

@testable import WLStorage

/// What holds the key of the storage under test.
enum HandlerReleaseHolder: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case file
    case store
    case customBackerWithAFeed

    var testDescription: String { rawValue }
}

/// Where the handler under test is called.
enum HandlerDelivery: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// On a serial queue of the test's.
    case onAQueue
    /// With no queue, on the thread that delivers the change.
    case onTheDeliveringThread

    var testDescription: String { rawValue }

    var queue: DispatchQueue? {
        switch self {
        case .onAQueue: DispatchQueue(label: "ReleaseFromItsOwnHandlerTests.handler")
        case .onTheDeliveringThread: nil
        }
    }
}

/// A weak reference to a cell, to tell when nothing holds it any more.
private final class WeakStorageCell: Sendable {
    weak let cell: StorageCell<Int>?

    init(_ cell: StorageCell<Int>) { self.cell = cell }
}

@Suite(.capturingOutput) struct ReleaseFromItsOwnHandlerTests {
    /// A change made elsewhere reaches the storage's handler, which sets a value and lets go of the storage and of its
    /// own subscription, the last references to both. The value is written, the cell goes, and a storage opened
    /// afterwards reads the value, with nothing pending.
    @Test(arguments: HandlerReleaseHolder.allCases, HandlerDelivery.allCases)
    func theLastStorageLetGoOfInItsHandlerWritesItsChangeAndLeavesNothingRegistered(
        _ holder: HandlerReleaseHolder, _ delivery: HandlerDelivery
    ) throws {
        try withTemporaryDirectory { directory in
            let memory = MemoryStore()
            let backer = ObservableMemoryBacker(stored: 1)
            let open: @Sendable () -> WLStorage<Int> = {
                switch holder {
                case .file:
                    WLStorage(
                        defaultValueClosure: { -1 }, flushInterval: nil,
                        backer: WLStorageDefaultBacker(key: "k", directory: directory))
                case .store:
                    WLStorage(key: "k", defaultValue: -1, flushInterval: nil, store: memory)
                case .customBackerWithAFeed:
                    WLStorage(defaultValueClosure: { -1 }, flushInterval: nil, backer: backer)
                }
            }
            let storage = HeldReference(open())
            let weakCell = try WeakStorageCell(#require(storage.current?.cell))
            #expect(storage.current?.wrappedValue == (holder == .customBackerWithAFeed ? 1 : -1))
            let subscription = HeldReference<WLStorageSubscription>(nil)
            let released = DispatchSemaphore(value: 0)
            subscription.hold(
                try #require(storage.current).onChange(queue: delivery.queue) { value in
                    guard value == 5 else { return }
                    storage.current?.wrappedValue = 9
                    let (lastStorage, lastSubscription) = (storage.take(), subscription.take())
                    _ = lastStorage
                    _ = lastSubscription
                    released.signal()
                })

            switch holder {
            case .file: try replaceFromOutside(directory.appendingPathComponent("k"), with: "5")
            case .store: memory.writeFromOutside("k", json: "5")
            case .customBackerWithAFeed: backer.setFromOutside(5)
            }
            try #require(released.wait(timeout: .now() + 30) == .success, "the handler was not called")
            #expect(eventually(timeout: 30) { weakCell.cell == nil }, "the cell outlived its last storage")

            let stored: Data? =
                switch holder {
                case .file: try? Data(contentsOf: directory.appendingPathComponent("k"))
                case .store: memory.stored("k").map { Data($0.utf8) }
                case .customBackerWithAFeed: backer.stored.map { Data(String($0).utf8) }
                }
            #expect(stored == json("9"))
            if holder == .store {
                #expect(Runtime.shared.registry.cells(ofStore: memory.identity, key: "k").isEmpty)
            }
            let fresh = open()
            #expect(fresh.wrappedValue == 9)
            #expect(!fresh.hasPendingChanges)
            #expect(fresh.cell.listenerCount == 0)
        }
    }
}
