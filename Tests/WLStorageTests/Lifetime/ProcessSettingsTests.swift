import Testing

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
}
