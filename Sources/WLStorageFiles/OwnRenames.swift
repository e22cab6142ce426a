import Foundation
import WLStorageCore

/// The renames this process makes to put its own writes in place, so the file monitor does not take them for other
/// programs' changes: a writer announces its temporary name before the rename, and the monitor skips the
/// `IN_MOVED_TO` paired by cookie. Lost events forget the announcements. The lock guards the two sets only.
enum OwnRenames {
    struct State {
        /// Temporary names being renamed into place by this process.
        var names: Set<String> = []
        /// Cookies of this process's `IN_MOVED_FROM` events whose `IN_MOVED_TO` has not been read yet.
        var cookies: Set<UInt32> = []
    }

    /// More announcements waiting than this means events were lost: they are forgotten (costs checks, not correctness).
    private static let limit = 4_096

    static func willRename(_ temporary: String) {
        FileSystemState.shared.ownRenames.withLock { state in
            if state.names.count >= limit { state.names.removeAll() }
            state.names.insert(temporary)
        }
    }

    static func didNotRename(_ temporary: String) {
        FileSystemState.shared.ownRenames.withLock { _ = $0.names.remove(temporary) }
    }

    /// The indices of the `IN_MOVED_TO` events in `events` that are this process's own renames into place.
    static func ownEvents(in events: [(watch: Int32, mask: UInt32, cookie: UInt32, name: String)]) -> Set<Int> {
        FileSystemState.shared.ownRenames.withLock { state in
            guard !state.names.isEmpty || !state.cookies.isEmpty else { return [] }
            if state.cookies.count >= limit { state.cookies.removeAll() }
            var own: Set<Int> = []
            for (index, event) in events.enumerated() {
                if event.mask & UInt32(IN_Q_OVERFLOW) != 0 {
                    state.names.removeAll()
                    state.cookies.removeAll()
                } else if event.mask & UInt32(IN_MOVED_FROM) != 0, state.names.remove(event.name) != nil {
                    state.cookies.insert(event.cookie)
                } else if event.mask & UInt32(IN_MOVED_TO) != 0, state.cookies.remove(event.cookie) != nil {
                    own.insert(index)
                }
            }
            return own
        }
    }
}
