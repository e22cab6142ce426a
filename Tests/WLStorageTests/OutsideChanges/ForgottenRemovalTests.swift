import Testing

@testable import WLStorage

// A check that reads another program's change it cannot adopt yet (a change of this process came while it ran) has the
// backer forget that read, so that the check after it reports the change again. A removal is such a change too.
@Suite(.capturingOutput) struct ForgottenRemovalTests {
    @Test func aRemovalReadAndForgottenIsReportedAgainByTheNextCheck() throws {
        let store = PlainStore()
        store.put("k", "1")
        let storage = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: store)
        #expect(storage.wrappedValue == 1)
        let access = try #require(storage.cell.access)
        let decoding = storage.cell.decoding
        try store.remove(key: "k")
        guard case .removed = try access.readExternalChange(decoding: decoding) else {
            Issue.record("the removal was not seen")
            return
        }
        access.forgetLastRead()
        guard case .removed = try access.readExternalChange(decoding: decoding) else {
            Issue.record("the removal, read and forgotten, is taken for no change: the value stays, the key is empty")
            return
        }
    }
}
