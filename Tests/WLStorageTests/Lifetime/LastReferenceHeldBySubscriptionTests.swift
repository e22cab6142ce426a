// A subscription that holds the last reference to its storage.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// Ending a subscription that holds the last reference to a storage (through a model object that captured itself in
/// the handler) releases the storage, whose deinit flushes. The release must not happen under the cell's lock.
/// (`subscription-cancel-in-handler` and `values-task` hold on today: a delivery being run keeps its handler alive,
/// and a stream's termination handler is called outside the stream's storage; they guard the rewrite.)
@Suite(.capturingOutput) struct LastReferenceHeldBySubscriptionTests {
    @Test(arguments: ["subscription-cancel", "subscription-drop", "subscription-cancel-in-handler", "values-task"])
    func endingTheSubscriptionThatHoldsTheLastReferenceFlushesAndDoesNotCrash(mode: String) throws {
        try withTemporaryDirectory { directory in
            let run = try runChild(mode, in: directory)
            #expect(run.reason == .exit, "the child crashed: \(run.reason) \(run.status)")
            #expect(run.status == 0)
            #expect(run.child.lines.contains("done"))
            #expect(stored(String.self, key: "key", in: directory) == "flushed")
        }
    }
}
