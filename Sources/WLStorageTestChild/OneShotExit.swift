import Dispatch
import Foundation
import WLStorage

/// Where the keys of the one-shot exit modes live: set from the arguments before their first use.
enum OneShotPlace {
    nonisolated(unsafe) static var directory = URL(fileURLWithPath: "/nonexistent")
    nonisolated(unsafe) static var key = ""
}

extension WLStorageScope {
    static let childOneShot = WLStorageScope("child-one-shot")
}

extension WLStorageKeys {
    /// A key declared as a program declares it; its one-shot storage lives as long as the program.
    static let childConstant = WLStorageKey<String>(
        OneShotPlace.key, default: "", flushInterval: 3_600, store: .directory(OneShotPlace.directory))
    static let childScoped = WLStorageKey<String>(
        OneShotPlace.key, default: "", flushInterval: 3_600, scope: .childOneShot)
    static let childStandard = WLStorageKey<String>(OneShotPlace.key, default: "", flushInterval: 3_600)
}

/// Sets a key by one-shot access and calls `exit(0)` at once: the exit flush must write the value.
func oneShotExit(_ mode: String, directory: URL, key: String, value: String) -> Never {
    OneShotPlace.directory = directory
    OneShotPlace.key = key
    switch mode {
    case "one-shot-exit":
        WLStorageKeys[.childConstant] = value
        exit(0)
    case "one-shot-exit-binding":
        WLStorageScope.childOneShot.withBinding(to: .directory(directory)) {
            WLStorageKeys[.childScoped] = value
            exit(0)
        }
    case "one-shot-exit-default-directory":
        WLStorageSystem.withDefaultDirectory(directory) {
            WLStorageKeys[.childStandard] = value
            exit(0)
        }
    default:
        // In a task started inside the binding, which holds the binding's one-shot storage.
        _ = WLStorageScope.childOneShot.withBinding(to: .directory(directory)) {
            Task {
                WLStorageKeys[.childScoped] = value
                exit(0)
            }
        }
        dispatchMain()
    }
    // Not reached: each mode exits inside its closure.
    exit(70)
}
