import Dispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The change feeds of the stores in use: one per store identity, started by its first storage and cancelled with its
/// last. What a feed reports is gathered into rounds for the ``ChangeRouter``, run on the router's queue of checks,
/// or on the feed's thread for a change that carries its bytes (``WLStorageCarriedChange``).
///
/// The lock guards the table only. A store's `observeChanges` (user code) is called, and an observation cancelled and
/// released, outside it; a feed being started is a placeholder that later users wait for.
final class StoreFeeds: Sendable {

    private final class Feed: @unchecked Sendable {  // mutable parts: under `StoreFeeds.feeds`
        var users = 1
        var observation: WLStorageSubscription?
        /// Opened when the observation is in place.
        let started = DispatchGroup()
        /// The thread starting the feed, until it is in place: a storage of the store created from inside
        /// `observeChanges` must not wait for the call it is part of.
        var startingThread: UInt = 0
        /// The keys reported and not checked yet, or every key: a store's storages have at most one round waiting.
        var pendingKeys: Set<String> = []
        var pendingEverything = false
        /// The changes carried with their bytes or versions and not handed to the cells yet, by key, in the order
        /// reported (see ``WLStorageCarriedChange``).
        var pendingCarried: [String: [WLStorageCarriedChange]] = [:]
        /// When each key waiting was last reported: a round hands the keys to their cells in that order, so that a
        /// program that writes a key and then another is seen to do so.
        var lastReport: [String: UInt64] = [:]
        var reports: UInt64 = 0
        /// A round of checks is queued or running.
        var draining = false
    }

    private let feeds = Lock([String: Feed]())

    /// Starts one use of `store`'s feed, starting the feed with the first. Returns when the feed is in place. Balance
    /// each call with ``release(_:)``.
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
        if reentered {
            // Called from inside the store's `observeChanges`: the feed is not in place yet, and cannot be waited for.
            return
        }
        if isNew {
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
        } else {
            feed.started.wait()
        }
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
        // The last storage released from inside `observeChanges` itself: the call that starts the feed cancels it.
        if feeds.withLock({ _ in ended.startingThread }) == UInt(bitPattern: Int(bitPattern: pthread_self())) { return }
        ended.started.wait()
        let observation = feeds.withLock { _ in
            defer { ended.observation = nil }
            return ended.observation
        }
        observation?.cancel()
    }

    private func changed(_ identity: String, _ event: WLStorageFeedEvent) {
        // Counted before the cells are looked for: a storage not registered yet sees the count move.
        Runtime.shared.router.count([.store(identity)])
        let round = feeds.withLock { feeds -> Round in
            guard let feed = feeds[identity] else { return .none }
            // A change that carries its bytes, with no round running and nothing waiting, is handed to its cells as it
            // is.
            if case .carried(let change) = event, change.data != nil, !feed.draining, !feed.pendingEverything,
                feed.pendingKeys.isEmpty, feed.pendingCarried.isEmpty
            {
                feed.draining = true
                return .carried(change)
            }
            feed.reports &+= 1
            switch event {
            case .change(.key(let key)) where !feed.pendingEverything:
                feed.pendingKeys.insert(key)
                feed.lastReport[key] = feed.reports
            case .change(.key): break
            case .change(.everything):
                feed.pendingEverything = true
                feed.pendingKeys = []
                feed.pendingCarried = [:]
                feed.lastReport = [:]
            case .carried(let change) where !feed.pendingEverything:
                feed.pendingCarried[change.key, default: []].append(change)
                feed.lastReport[change.key] = feed.reports
            case .carried: break
            }
            guard !feed.draining else { return .none }
            feed.draining = true
            return .reported
        }
        // A carried change's round runs here, on the feed's thread; a change to read goes to the queue of checks, so
        // that the feed's thread never waits for a read.
        switch round {
        case .none:
            return
        case .carried(let change):
            Runtime.shared.router.deliver(store: identity, carried: change)
            checkReported(identity)
        case .reported:
            if case .carried(let change) = event, change.data != nil {
                checkReported(identity)
            } else {
                Runtime.shared.router.onChecksQueue { [weak self] in self?.checkReported(identity) }
            }
        }
    }

    /// What a report starts: nothing (a round is running, which takes it), a round of what is waiting, or the round
    /// of one carried change.
    private enum Round {
        case none
        case reported
        case carried(WLStorageCarriedChange)
    }

    /// Has the storages of the keys reported for `identity` check them, round after round, until no report is left.
    private func checkReported(_ identity: String) {
        while true {
            let taken = feeds.withLock {
                feeds -> (
                    order: [String: UInt64], keys: Set<String>, everything: Bool,
                    carried: [String: [WLStorageCarriedChange]]
                )? in
                guard let feed = feeds[identity] else { return nil }
                guard feed.pendingEverything || !feed.pendingKeys.isEmpty || !feed.pendingCarried.isEmpty else {
                    feed.draining = false
                    return nil
                }
                defer {
                    feed.pendingKeys = []
                    feed.pendingEverything = false
                    feed.pendingCarried = [:]
                    feed.lastReport = [:]
                }
                return (feed.lastReport, feed.pendingKeys, feed.pendingEverything, feed.pendingCarried)
            }
            guard let taken else { return }
            Runtime.shared.router.deliver(
                store: identity, keys: taken.order.sorted { $0.value < $1.value }.map(\.key), mustRead: taken.keys,
                everything: taken.everything,
                carried: taken.carried)
        }
    }
}
