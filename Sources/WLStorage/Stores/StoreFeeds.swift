import Foundation

/// The change feeds of the stores in use: one per store identity, started by its first storage and cancelled with its
/// last; reports are gathered into rounds on the router's queue (a carried change: on the feed's thread). The lock
/// guards the table only: `observeChanges` (user code) is called, and subscriptions released, outside it; a feed being
/// started is a placeholder later users wait for.
final class StoreFeeds: Sendable {

    private final class Feed: @unchecked Sendable {  // mutable parts: under `StoreFeeds.feeds`
        var users = 1
        var observation: WLStorageSubscription?
        /// Opened when the observation is in place.
        let started = DispatchGroup()
        /// The thread starting the feed, until in place: a storage made inside `observeChanges` must not wait for it.
        var startingThread: UInt = 0
        /// What the next round checks: a store's storages have at most one round waiting.
        var pending = Pending()
        var reports: UInt64 = 0
        /// A round of checks is queued or running.
        var draining = false
    }

    /// Keys reported and not checked yet (or every key); carried changes not yet handed over, by key, in report order;
    /// when each waiting key was last reported, so rounds keep write order.
    private struct Pending {
        var keys: Set<String> = []
        var everything = false
        var carried: [String: [WLStorageCarriedChange]] = [:]
        var lastReport: [String: UInt64] = [:]

        var isEmpty: Bool { !everything && keys.isEmpty && carried.isEmpty }
    }

    private let feeds = Lock([String: Feed]())

    /// Starts one use of `store`'s feed (the first starts it), returning once in place. Balance with ``release(_:)``.
    func use(_ store: any WLStorageStore, identity: String) {
        let thread = UInt(bitPattern: Int(bitPattern: pthread_self()))
        let (feed, isNew, reentered) = feeds.withLock { feeds -> (Feed, Bool, Bool) in
            if let feed = feeds[identity] {
                feed.users += 1
                return (feed, false, feed.startingThread == thread)
            }
            let feed = Feed()
            feed.started.enter()
            feed.startingThread = thread
            feeds[identity] = feed
            return (feed, true, false)
        }
        // Called from inside `observeChanges`: the feed is not in place and cannot be waited for.
        if reentered { return }
        guard isNew else { return feed.started.wait() }
        let observation: WLStorageSubscription?
        if let carrying = Stores.capabilities(of: store).carried {
            observation = carrying.observeCarriedChanges { [weak self] event in self?.changed(identity, event) }
        } else {
            observation = store.observeChanges { [weak self] change in self?.changed(identity, .change(change)) }
        }
        let unused = feeds.withLock { feeds -> WLStorageSubscription? in
            feed.startingThread = 0
            guard feeds[identity] === feed else { return observation }
            feed.observation = observation
            return nil
        }
        unused?.cancel()
        feed.started.leave()
    }

    /// Cancels every feed, at exit after the last flush: a store's threads stop before the libraries they call are torn
    /// down (their destructors run after the package's exit handler).
    func cancelEveryFeed() {
        let observations = feeds.withLock { feeds in feeds.values.compactMap { $0.observation.take() } }
        for observation in observations { observation.cancel() }
    }

    /// Ends one use of the feed of `identity`; with the last, the feed is cancelled.
    func release(_ identity: String) {
        let ended = feeds.withLock { feeds -> Feed? in
            guard let feed = feeds[identity] else { return nil }
            feed.users -= 1
            guard feed.users <= 0 else { return nil }
            feeds[identity] = nil
            return feed
        }
        guard let ended else { return }
        // Released from inside `observeChanges`: the call that starts the feed cancels it.
        if feeds.withLock({ _ in ended.startingThread }) == UInt(bitPattern: Int(bitPattern: pthread_self())) { return }
        ended.started.wait()
        feeds.withLock { _ in ended.observation.take() }?.cancel()
    }

    private func changed(_ identity: String, _ event: WLStorageFeedEvent) {
        // Counted before the cells are looked for: a storage not registered yet sees the count move.
        Runtime.shared.router.count([.store(identity)])
        let round = feeds.withLock { feeds -> Round in
            guard let feed = feeds[identity] else { return .none }
            // A carried change with no round running and nothing waiting goes to its cells at once.
            if case .carried(let change) = event, change.data != nil, !feed.draining, feed.pending.isEmpty {
                feed.draining = true
                return .carried(change)
            }
            feed.reports &+= 1
            switch event {
            case .change(.key(let key)) where !feed.pending.everything:
                feed.pending.keys.insert(key)
                feed.pending.lastReport[key] = feed.reports
            case .change(.key): break
            case .change(.everything):
                feed.pending = Pending(everything: true)
            case .carried(let change) where !feed.pending.everything:
                feed.pending.carried[change.key, default: []].append(change)
                feed.pending.lastReport[change.key] = feed.reports
            case .carried: break
            }
            guard !feed.draining else { return .none }
            feed.draining = true
            return .reported
        }
        // A carried round runs on the feed's thread; a read goes to the queue of checks: the feed never waits for one.
        switch round {
        case .none:
            return
        case .carried(let change):
            Runtime.shared.router.deliver(
                store: identity, keys: [change.key], mustRead: [], everything: false, carried: [change.key: [change]])
            checkReported(identity)
        case .reported:
            if case .carried(let change) = event, change.data != nil {
                checkReported(identity)
            } else {
                Runtime.shared.router.checks.async { [weak self] in self?.checkReported(identity) }
            }
        }
    }

    /// What a report starts: nothing (a running round takes it), a round of what waits, or one carried change's round.
    private enum Round {
        case none
        case reported
        case carried(WLStorageCarriedChange)
    }

    /// Has the storages of the keys reported for `identity` check them, round after round, until no report is left.
    private func checkReported(_ identity: String) {
        while true {
            let taken = feeds.withLock { feeds -> Pending? in
                guard let feed = feeds[identity] else { return nil }
                guard !feed.pending.isEmpty else {
                    feed.draining = false
                    return nil
                }
                defer { feed.pending = Pending() }
                return feed.pending
            }
            guard let taken else { return }
            Runtime.shared.router.deliver(
                store: identity, keys: taken.lastReport.sorted { $0.value < $1.value }.map(\.key), mustRead: taken.keys,
                everything: taken.everything, carried: taken.carried)
        }
    }
}
