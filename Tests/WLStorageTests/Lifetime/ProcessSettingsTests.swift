import Testing
import WLStorageTestSupport

@testable import WLStorage

/// The settings of the whole process live on `WLStorageSystem`; their earlier spellings still set the same settings.
@Suite(.serialized)
struct ProcessSettingsTests {
    @available(*, deprecated, message: "checks the deprecated spellings")
    @Test func theEarlierSpellingsSetTheSettingsOfTheProcess() {
        let (size, timeout, signals) = (
            WLStorageSystem.maximumValueSize, WLStorageSystem.shutdownFlushTimeout, WLStorageSystem.flushesOnSignals
        )
        defer {
            WLStorageSystem.maximumValueSize = size
            WLStorageSystem.shutdownFlushTimeout = timeout
        }
        // The limit is set to what it is: the tests running beside read it.
        WLStorage.maximumValueSize = size
        #expect(WLStorage<Never>.maximumValueSize == WLStorageSystem.maximumValueSize)
        WLStorage.shutdownFlushTimeout = timeout + .seconds(1)
        #expect(WLStorageSystem.shutdownFlushTimeout == timeout + .seconds(1))
        #expect(WLStorage<Never>.flushesOnSignals == signals)
        #expect((WLStorageError.handler == nil) == (WLStorageSystem.errorHandler == nil))
    }

    /// A daemon reports errors for as long as it runs: reading the handler, as every report does, must not change it.
    /// (Each read once wrapped the stored handler in two more layers of conversion, until a report overflowed the
    /// stack after about 30,000 of them.)
    @Test func reportingAnErrorAMillionTimesLeavesTheHandlerAsItWas() {
        ReportedErrors.install()
        let error = WLStorageError(code: .readFailed, message: "reported again and again", key: "handler-reads")
        for _ in 0..<1_000_000 { _ = WLStorageSystem.errorHandler }
        WLStorageError.report(error)
        #expect(!ReportedErrors.errors { $0.key == "handler-reads" }.isEmpty)
    }
}
