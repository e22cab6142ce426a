// A burst of reports from a feed costs about one read per storage, not one per report.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage

/// "Reporting a change that was not one ... costs one read of the key" — and no more than that, however fast the
/// feed reports.
///
/// When every report queued one check per cell on the concurrent queue of checks, nothing coalesced a check already
/// queued for a cell. A feed that reports faster
/// than the checks run (a busy `LISTEN` channel, `.everything` after each reconnection attempt of a flapping
/// connection) grows the queue without bound: measured here, 200,000 reports of `.everything` to 20 storages queued
/// 4,000,000 checks, grew the process by 570 MB, and took more than 80 s of both cores to drain, long after the feed
/// went quiet. A check that has not started yet reads the key as it is when it runs, so a second one queued behind it
/// finds nothing new.
@Suite(.capturingOutput) struct StoreFeedReportStormTests {
    @Test func aBurstOfReportsCostsAboutOneReadPerStorageNotOnePerReport() {
        let store = HostileStore()
        // Kept small: the queue of checks is the process's, and a flood of it delays other tests' checks.
        let storages = (0..<4).map { WLStorage(key: "k\($0)", defaultValue: 0, flushInterval: nil, store: store) }
        flushAllStores([store])
        let before = store.reads
        let reports = 5_000
        for _ in 0..<reports { store.report(.everything) }
        // Wait until the checks have drained: the reads stop growing (at most 30 s).
        var last = -1
        let drained = eventually(timeout: 30) {
            let now = store.reads
            defer { last = now }
            if now == last { return true }
            usleep(300_000)
            return false
        }
        #expect(drained)
        let reads = store.reads - before
        #expect(reads <= reports, "\(reports) reports to \(storages.count) storages cost \(reads) reads")
    }
}
