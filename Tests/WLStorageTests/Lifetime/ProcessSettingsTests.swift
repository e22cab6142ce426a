import Dispatch
import Testing
import WLStorageTestSupport

@testable import WLStorage

/// The settings of the whole process live on `WLStorageSystem`.
@Suite(.onTestThreads, .serialized)
struct ProcessSettingsTests {
    /// A daemon reports errors for as long as it runs: reading the handler, as every report does, must not change it.
    /// (Each read once wrapped the stored handler in two more layers of conversion, until a report overflowed the
    /// stack after about 30,000 of them.)
    @Test func reportingAnErrorAMillionTimesLeavesTheHandlerAsItWas() {
        ReportedErrors.install()
        let error = WLStorageError(code: .readFailed, message: "reported again and again", key: "handler-reads")
        for _ in 0..<1_000_000 { _ = WLStorageSystem.errorHandler }
        WLStorageSystem.report(error)
        #expect(!ReportedErrors.errors { $0.key == "handler-reads" }.isEmpty)
    }

    /// A program that saves the handler and puts it back (around a task, in a loop) must not make it grow either.
    @Test func settingTheHandlerToItselfAMillionTimesLeavesItAsItWas() {
        ReportedErrors.install()
        let error = WLStorageError(code: .readFailed, message: "reported after the round trips", key: "handler-sets")
        for _ in 0..<1_000_000 { WLStorageSystem.errorHandler = WLStorageSystem.errorHandler }
        WLStorageSystem.report(error)
        #expect(!ReportedErrors.errors { $0.key == "handler-sets" }.isEmpty)
    }

    /// Threads that report while others read the handler and set it (to itself, as the tests beside run with it) see
    /// a whole handler each time, and every report reaches it.
    @Test func reportsWhileOtherThreadsReadAndSetTheHandlerAllReachIt() {
        ReportedErrors.install()
        let key = "handler-races"
        DispatchQueue.concurrentPerform(iterations: 8) { index in
            for round in 0..<2_000 {
                switch index % 3 {
                case 0: WLStorageSystem.errorHandler = WLStorageSystem.errorHandler
                case 1: _ = WLStorageSystem.errorHandler
                default:
                    WLStorageSystem.report(WLStorageError(code: .readFailed, message: "\(index) \(round)", key: key))
                }
            }
        }
        #expect(ReportedErrors.errors { $0.key == key }.count == 2 * 2_000)
    }
}
