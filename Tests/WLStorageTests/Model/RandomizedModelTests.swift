import Dispatch
import Foundation
import Synchronization
import Testing
import WLStorageFleet

@testable import WLStorage
@testable import WLStorageFiles

// A randomized run against a model of what each file must end up holding.
//
// Several threads run random operations on storages of a few keys in two directories, one of them also reached
// through a symlink, and in a store with a change feed, reached through two handles of one identity (a "file" of the
// store is a key; another program's write is a write to the store reported by its feed): create a storage, get, set, flush, drop, subscribe (handlers that cancel themselves or drop
// storages), consume `values`, write or remove the file from outside, make the file writer fail or stall. Every
// change to a file (a set, an outside write, an outside removal) is recorded in order under a lock of the file, and
// the documented rules say what the file may hold at the end:
//
// - after a set of `v` as the last change: `v`;
// - after an outside write of `w`: `w`, or the last value set before it (a local change still pending is written
//   later, and wins);
// - after an outside removal: nothing, the default (a storage opened afterwards saves its default), or the last
//   value set before it;
// - with no change at all: nothing, or the default.
//
// After the run: nothing crashed or hung, every file holds a value its history allows, every live storage holds what
// its file holds, and no temporary or moved-aside file is left.
//
// `WLSTORAGE_SEED` replays a seed (each thread's operations are replayed; their interleaving is the machine's).
// `WLSTORAGE_OPERATIONS` sets the number of operations (10,000 by default, as CI runs it); a soak run takes millions.

/// What happened to one file, in order.
private enum Change: Equatable {
    case set(Int)
    case outsideWrite(Int)
    case outsideRemoval
}

/// The model: each file's history, and every value it ever held.
private final class Model: Sendable {
    struct File {
        var changes: [Change] = []
        var seen: Set<Int> = [RandomizedRun.defaultValue]
    }

    /// One file's record and its lock.
    final class Record: Sendable {
        private let file = Lock(File())

        func withLock<R>(_ body: (inout File) -> R) -> R {
            file.withLock { body(&$0) }
        }
    }

    /// One lock per file, so that a change and its record happen together, in the same order for all threads.
    let files: [Record]

    init(fileCount: Int) {
        files = (0..<fileCount).map { _ in Record() }
    }

    /// The values the file may hold at the end (`nil` standing for no file).
    func allowedFinal(_ index: Int) -> Set<Int?> {
        files[index].withLock { file in
            guard let last = file.changes.last else { return [nil, RandomizedRun.defaultValue] }
            let lastSetBefore = file.changes.dropLast().reversed().lazy.compactMap { change -> Int? in
                if case .set(let value) = change { return value }
                return nil
            }.first
            switch last {
            case .set(let value):
                return [value]
            case .outsideWrite(let value):
                return Set([value, lastSetBefore].compactMap { $0 }.map { Optional($0) })
            case .outsideRemoval:
                var allowed: Set<Int?> = [nil, RandomizedRun.defaultValue]
                if let lastSetBefore { allowed.insert(lastSetBefore) }
                return allowed
            }
        }
    }
}

/// Objects the threads share: storages, subscriptions and consuming tasks, each with the file it belongs to.
private final class Pool: Sendable {
    struct Item<Object> {
        let file: Int
        let object: Object
    }

    let storages = Lock<[Item<WLStorage<Int>>]>([])
    let subscriptions = Lock<[Item<SubscriptionBox>]>([])
    let tasks = Lock<[Task<Void, Never>]>([])

    /// Takes a random storage out (to drop it outside every lock), or `nil`.
    func takeStorage(_ pick: Int) -> Item<WLStorage<Int>>? {
        storages.withLock { $0.isEmpty ? nil : $0.remove(at: pick % $0.count) }
    }

    func anyStorage(_ pick: Int) -> Item<WLStorage<Int>>? {
        storages.withLock { $0.isEmpty ? nil : $0[pick % $0.count] }
    }
}

/// Each thread's generator, kept from one epoch to the next, in a box of its own (one thread uses a box at a time).
private final class Generators: Sendable {
    private final class Box: @unchecked Sendable {  // used by one thread at a time, handed over by thread start/join
        var generator: SplitMix64
        init(_ generator: SplitMix64) { self.generator = generator }
    }

    private let boxes: [Box]

    init(seed: UInt64, count: Int) {
        boxes = (0..<count).map { Box(SplitMix64(seed: seed &+ UInt64($0) &* 0x1000_0000_0001)) }
    }

    func with(_ index: Int, _ body: (inout SplitMix64) -> Void) {
        body(&boxes[index].generator)
    }
}

/// Hands out values never used before.
private final class ValueCounter: Sendable {
    private let last = Atomic<Int>(0)
    func next() -> Int { last.add(1, ordering: .relaxed).newValue }
}

/// A subscription that its own handler can reach, to cancel itself from inside.
private final class SubscriptionBox: Sendable {
    let subscription = Lock<WLStorageSubscription?>(nil)

    func cancel() {
        let subscription = self.subscription.withLock { box in
            defer { box = nil }
            return box
        }
        subscription?.cancel()
    }
}

/// The configuration of one run.
private struct RandomizedRun {
    static let defaultValue = -1
    static let operationsPerEpoch = 250
    static let keys = ["alpha", "beta", "key with space"]

    /// Where a storage is created: a directory's path, or a handle of the store.
    enum Place {
        case directory(URL)
        case store(MemoryStore)
    }

    let seed: UInt64
    let operations: Int
    let threads = 4
    /// The directories: two real ones and a symlink to the first.
    let real: [URL]
    /// The store, which counts as the directory after the real ones.
    let store: MemoryStore
    let spellings: [(place: Place, directory: Int)]

    var fileCount: Int { (real.count + 1) * Self.keys.count }

    func fileIndex(directory: Int, key: Int) -> Int { directory * Self.keys.count + key }

    private func isInStore(_ index: Int) -> Bool { index / Self.keys.count == real.count }

    private func key(_ index: Int) -> String { Self.keys[index % Self.keys.count] }

    func fileURL(_ index: Int) -> URL? {
        guard !isInStore(index) else { return nil }
        return real[index / Self.keys.count].appendingPathComponent(FileName.forKey(key(index))!)
    }

    /// What the file (or the store's key) holds, or `nil` when there is none.
    func read(_ index: Int) -> Int? {
        guard let url = fileURL(index) else {
            return store.stored(key(index)).flatMap { try? JSONDecoder().decode(Int.self, from: Data($0.utf8)) }
        }
        return readFile(url)
    }

    /// Another program's write.
    func writeFromOutside(_ value: Int, to index: Int) {
        guard let url = fileURL(index) else { return store.writeFromOutside(key(index), json: String(value)) }
        WLStorageTests.writeFromOutside(value, to: url)
    }

    /// Another program's removal.
    func removeFromOutside(_ index: Int) {
        guard let url = fileURL(index) else { return store.removeFromOutside(key(index)) }
        _ = unlink(url.path)
    }

    /// ``WLStorageSystem/flushAll()`` for the run's own cells: the run's directories and its store, not the storages of
    /// the tests running beside it (which may be keeping a change pending on purpose).
    func flushOwnCells() {
        let roots = real.map { $0.deletingLastPathComponent().standardizedFileURL.path + "/" }
        let store = self.store.identity
        ShutdownHandling.flushEverything(only: { cell in
            if let key = cell.storeKey { return key.store == store }
            guard let directory = cell.directory?.path else { return false }
            return roots.contains { directory.hasPrefix($0) }
        })
    }

    /// A storage of the key `key` in `place`.
    func storage(_ key: Int, in place: Place, interval: Int?) -> WLStorage<Int> {
        switch place {
        case .directory(let url):
            WLStorage<Int>(
                defaultValueClosure: { Self.defaultValue }, flushInterval: interval,
                backer: WLStorageDefaultBacker(key: Self.keys[key], directory: url))
        case .store(let store):
            WLStorage<Int>(
                key: Self.keys[key], defaultValueClosure: { Self.defaultValue }, flushInterval: interval, store: store)
        }
    }
}

@Suite(.capturingOutput) struct RandomizedModelTests {
    @Test func randomOperationsOnManyThreadsLeaveEveryFileAsTheRulesSay() throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["WLSTORAGE_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64.max)
        let operations = environment["WLSTORAGE_OPERATIONS"].flatMap { Int($0) } ?? 10_000
        print("RandomizedModelTests: seed \(seed), \(operations) operations (replay with WLSTORAGE_SEED=\(seed))")
        try withTemporaryDirectory { root in
            let real = [root.appendingPathComponent("one"), root.appendingPathComponent("two")]
            for directory in real {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
            }
            let link = root.appendingPathComponent("link-to-one")
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: real[0])
            let store = MemoryStore()
            let run = RandomizedRun(
                seed: seed, operations: operations, real: real, store: store,
                spellings: [
                    (.directory(real[0]), 0), (.directory(link), 0), (.directory(real[1]), 1), (.store(store), 2),
                    (.store(MemoryStore(sharing: store)), 2),
                ])
            try execute(run)
        }
    }

    private func execute(_ run: RandomizedRun) throws {
        let model = Model(fileCount: run.fileCount)
        let pool = Pool()
        let faults = Faults(
            paths: run.spellings.compactMap { spelling in
                guard case .directory(let url) = spelling.place else { return nil }
                return url.standardizedFileURL.path
            },
            store: run.store)
        let nextValue = ValueCounter()
        let handlerQueue = DispatchQueue(label: "randomized.handlers", attributes: .concurrent)
        let problems = Lock<[String]>([])
        let generators = Generators(seed: run.seed, count: run.threads)

        // The run goes in epochs; at the end of each, the threads stop and the files are checked, so that a file that
        // held a wrong value for a while is caught even when a later change would have hidden it.
        let epochs = max(1, run.operations / RandomizedRun.operationsPerEpoch)
        for epoch in 0..<epochs {
            let finished = DispatchGroup()
            let share = run.operations / epochs / run.threads
            for thread in 0..<run.threads {
                finished.enter()
                Thread.detachNewThread {
                    defer { finished.leave() }
                    generators.with(thread) { random in
                        for _ in 0..<share {
                            let problem = step(
                                &random, run: run, model: model, pool: pool, faults: faults, nextValue: nextValue,
                                handlerQueue: handlerQueue)
                            if let problem { problems.withLock { $0.append(problem) } }
                        }
                    }
                }
            }
            let done = finished.wait(timeout: .now() + 300)
            try #require(done == .success, "seed \(run.seed): epoch \(epoch) did not finish in five minutes: a hang")
            faults.clear()
            run.flushOwnCells()
            guard check(run, model: model, pool: pool, epoch: epoch) else { break }
        }

        // Last, with no subscriber or consumer left.
        let subscriptions = pool.subscriptions.withLock { items in
            defer { items = [] }
            return items
        }
        for item in subscriptions { item.object.cancel() }
        let tasks = pool.tasks.withLock { tasks in
            defer { tasks = [] }
            return tasks
        }
        for task in tasks { task.cancel() }
        for problem in problems.withLock({ $0 }).prefix(10) { Issue.record("seed \(run.seed): \(problem)") }
        let leftovers = run.real.flatMap { directory in
            entries(of: directory).filter { $0.contains("~") }
        }
        #expect(leftovers.isEmpty, "seed \(run.seed): temporary or moved-aside files left: \(leftovers)")
        let keptAside = (try? run.store.keys().filter { $0.contains("~") }) ?? []
        #expect(keptAside.isEmpty, "seed \(run.seed): keys kept aside in the store: \(keptAside)")
    }

    /// Checks every file against its history, and every live storage against its file. Returns whether all held.
    private func check(_ run: RandomizedRun, model: Model, pool: Pool, epoch: Int) -> Bool {
        var held = true
        for index in 0..<run.fileCount {
            let allowed = model.allowedFinal(index)
            let final = run.read(index)
            guard !allowed.contains(final) else { continue }
            held = false
            let described = allowed.map { $0.map(String.init) ?? "nothing" }.sorted()
            let history = model.files[index].withLock { $0.changes.suffix(4) }
            let message: String =
                "seed \(run.seed), epoch \(epoch): file \(index) holds \(final.map(String.init) ?? "nothing"), allowed"
                + " \(described); last changes \(history)"
            Issue.record("\(message)")
        }
        // Every live storage ends with what its file holds (or its default where there is none). A check that failed
        // under the epoch's faults is retried with a backoff of up to 30 s (WriteThrottle.maximumRetryDelay): the wait
        // is longer than that.
        let storages = pool.storages.withLock { $0 }
        let settled = eventually(timeout: 45) {
            storages.allSatisfy { item in
                item.object.wrappedValue == (run.read(item.file) ?? RandomizedRun.defaultValue)
            }
        }
        if !settled {
            held = false
            let wrong = storages.first { item in
                item.object.wrappedValue != (run.read(item.file) ?? RandomizedRun.defaultValue)
            }
            let message: String =
                "seed \(run.seed), epoch \(epoch): a live storage of file \(wrong?.file ?? -1) holds"
                + " \(wrong?.object.wrappedValue ?? 0), its file \(wrong.flatMap { run.read($0.file) } ?? -99);"
                + " last changes \(wrong.map { item in model.files[item.file].withLock { $0.changes.suffix(6) } } ?? [])"
            Issue.record("\(message)")
        }
        for item in storages where item.object.hasPendingChanges {
            held = false
            Issue.record(
                "seed \(run.seed), epoch \(epoch): a change is still pending after flushAll: \(item.object.key)")
        }
        return held
    }

    /// Runs one random operation. Returns a problem when an invariant broke.
    private func step(
        _ random: inout SplitMix64, run: RandomizedRun, model: Model, pool: Pool, faults: Faults,
        nextValue: ValueCounter, handlerQueue: DispatchQueue
    ) -> String? {
        let pick = Int.random(in: 0..<1_000_000, using: &random)
        let roll = Int.random(in: 0..<100, using: &random)
        let spelling = run.spellings[pick % run.spellings.count]
        let key = (pick / 7) % RandomizedRun.keys.count
        let file = run.fileIndex(directory: spelling.directory, key: key)
        switch roll {
        case 0..<10:
            // Create a storage of the file, through one of its directory's spellings.
            let interval = [0, 1, nil][pick % 3]
            let storage = run.storage(key, in: spelling.place, interval: interval)
            pool.storages.withLock { $0.append(.init(file: file, object: storage)) }
            if pick % 3 == 0 {
                // Another program writes the file just as this one starts: its value must never lose to a default.
                let value = nextValue.next()
                model.files[file].withLock { record in
                    record.seen.insert(value)
                    record.changes.append(.outsideWrite(value))
                    run.writeFromOutside(value, to: file)
                }
            }
        case 10..<18:
            // Drop a storage, outside every lock.
            _ = pool.takeStorage(pick)
        case 18..<40:
            guard let item = pool.anyStorage(pick) else { return nil }
            let value = item.object.wrappedValue
            let seen = model.files[item.file].withLock { $0.seen.contains(value) }
            if !seen { return "a storage of file \(item.file) returned \(value), never set nor written there" }
        case 40..<65:
            guard let item = pool.anyStorage(pick) else { return nil }
            let value = nextValue.next()
            model.files[item.file].withLock { record in
                record.seen.insert(value)
                record.changes.append(.set(value))
                if pick % 2 == 0 {
                    item.object.wrappedValue = value
                } else {
                    // An update is a set for the model: atomic, whatever outside changes are adopted while it runs.
                    item.object.update { $0 = value }
                }
            }
        case 65..<70:
            pool.anyStorage(pick)?.object.flush()
        case 70..<76:
            // Subscribe; the handler may cancel itself, drop a storage, or hold the storage (as a model object that
            // captured itself would).
            guard let item = pool.anyStorage(pick) else { return nil }
            let box = SubscriptionBox()
            let behaviour = pick % 4
            let held: WLStorage<Int>? = behaviour == 3 ? item.object : nil
            let subscription = item.object.onChange(queue: handlerQueue) { [pool] value in
                withExtendedLifetime(held) {}
                switch (behaviour, value % 5) {
                case (0, 0): box.cancel()
                case (1, 0): _ = pool.takeStorage(value)
                default: break
                }
            }
            box.subscription.withLock { $0 = subscription }
            pool.subscriptions.withLock { $0.append(.init(file: item.file, object: box)) }
        case 76..<80:
            let item = pool.subscriptions.withLock { $0.isEmpty ? nil : $0.remove(at: pick % $0.count) }
            item?.object.cancel()
        case 80..<83:
            // Consume `values` for a while, in a task that may outlive the storage.
            guard let item = pool.anyStorage(pick) else { return nil }
            let stream = item.object.values
            let limit = pick % 5
            let task = Task {
                var count = 0
                for await _ in stream {
                    count += 1
                    if count > limit { break }
                }
            }
            pool.tasks.withLock { tasks in
                tasks.append(task)
                if tasks.count > 8 { tasks.removeFirst().cancel() }
            }
        case 83..<90:
            let value = nextValue.next()
            model.files[file].withLock { record in
                record.seen.insert(value)
                record.changes.append(.outsideWrite(value))
                run.writeFromOutside(value, to: file)
            }
        case 90..<93:
            model.files[file].withLock { record in
                record.changes.append(Change.outsideRemoval)
                run.removeFromOutside(file)
            }
        case 93..<95:
            faults.change(pick)
        case 95..<97:
            // A restart, as another program sees it: every storage of the file goes, the file is removed, a new
            // storage starts (its default not yet saved), and another program writes the file at once.
            let dropped = pool.storages.withLock { items in
                defer { items.removeAll { $0.file == file } }
                return items.filter { $0.file == file }
            }
            _ = dropped
            let cancelled = pool.subscriptions.withLock { items in
                defer { items.removeAll { $0.file == file } }
                return items.filter { $0.file == file }
            }
            for item in cancelled { item.object.cancel() }
            model.files[file].withLock { record in
                record.changes.append(Change.outsideRemoval)
                run.removeFromOutside(file)
            }
            let storage = run.storage(key, in: spelling.place, interval: [0, 1, nil][pick % 3])
            let value = nextValue.next()
            model.files[file].withLock { record in
                record.seen.insert(value)
                record.changes.append(.outsideWrite(value))
                run.writeFromOutside(value, to: file)
            }
            pool.storages.withLock { $0.append(.init(file: file, object: storage)) }
        default:
            if pick % 10 == 0 { run.flushOwnCells() }
        }
        return nil
    }
}

/// Failures and stalls injected into the write path of the run's directories. Reads are left alone: a failed read
/// makes a storage's later changes void by design (they would be based on the default), which this model does not
/// follow.
private final class Faults: Sendable {
    private let paths: [String]
    private let store: MemoryStore
    /// 0: none; 1: some writes fail; 2: some writes stall.
    private let mode = Atomic<Int>(0)
    private let counter = Atomic<Int>(0)

    init(paths: [String], store: MemoryStore) {
        self.paths = paths
        self.store = store
        for path in paths {
            FaultInjection.install({ [weak self] call, name in self?.fault(call, name) }, forDirectory: path)
        }
    }

    deinit {
        for path in paths { FaultInjection.remove(forDirectory: path) }
    }

    func change(_ pick: Int) {
        mode.store(pick % 3, ordering: .relaxed)
        store.setFaultMode(pick % 3)
    }

    func clear() {
        mode.store(0, ordering: .relaxed)
        store.setFaultMode(0)
    }

    private func fault(_ call: SystemCall, _ name: String?) -> InjectedFault? {
        let isWritePath: Bool
        switch call {
        case .write, .fsync, .rename, .link, .chmod: isWritePath = true
        case .open: isWritePath = name?.contains("~") ?? false
        default: isWritePath = false
        }
        guard isWritePath else { return nil }
        let count = counter.add(1, ordering: .relaxed).newValue
        switch mode.load(ordering: .relaxed) {
        case 1 where count % 3 == 0:
            return .fail([ENOSPC, EIO, EINTR, EMFILE][count / 3 % 4])
        case 2 where count % 2 == 0:
            return .stall(microseconds: UInt32(500 + count % 3_000))
        default:
            return nil
        }
    }
}

/// Replaces the file as another program would: a temporary file of another name, renamed over it.
private func writeFromOutside(_ value: Int, to url: URL) {
    let temporary = url.deletingLastPathComponent().appendingPathComponent(".outside.\(value)")
    try? Data(String(value).utf8).write(to: temporary)
    _ = rename(temporary.path, url.path)
}

/// The value the file holds, or `nil` when there is none.
private func readFile(_ url: URL) -> Int? {
    guard let data = FileManager.default.contents(atPath: url.path), !data.isEmpty else { return nil }
    return try? JSONDecoder().decode(Int.self, from: data)
}
