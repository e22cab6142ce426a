import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

/// Runs `body` while the file monitor's thread is held in a subscriber's handler, so that the events of what `body`
/// changes wait in the kernel's queue and are read once it returns: no storage hears of those changes before then.
/// The subscriber watches a directory of its own, `holder`, made in `scratch`.
func whileTheFileMonitorIsHeld<R>(scratch: URL, _ body: () throws -> R) throws -> R {
    let holder = scratch.appendingPathComponent("monitor-holder")
    try FileManager.default.createDirectory(at: holder, withIntermediateDirectories: true)
    let held = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let first = Atomic<Bool>(true)
    let subscription = Runtime.shared.monitor.subscribe(toEveryFileIn: StorageDirectory(path: holder.path)) { _ in
        guard first.exchange(false, ordering: .sequentiallyConsistent) else { return }
        held.signal()
        release.wait()
    }
    defer { Runtime.shared.monitor.unsubscribe(subscription) }
    try Data("1".utf8).write(to: holder.appendingPathComponent("hold"))
    try #require(held.wait(timeout: .now() + 30) == .success, "the monitor's thread was not held")
    defer { release.signal() }
    return try body()
}
