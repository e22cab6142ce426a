import Testing
import WLStorageTestSupport

@testable import WLStorage

/// A store's feed and a storage's change handler are one class; its earlier name still works.
@Suite(.onTestThreads)
struct SubscriptionNameTests {
    @available(*, deprecated, message: "checks the deprecated spelling")
    @Test func aFeedUnderTheEarlierNameIsCancelledOnceWhenReleased() {
        let cancellations = Lock(0)
        var feed: WLStorageObservation? = WLStorageObservation(cancel: { cancellations.withLock { $0 += 1 } })
        feed?.cancel()
        feed = nil
        #expect(cancellations.withLock { $0 } == 1)
    }
}
