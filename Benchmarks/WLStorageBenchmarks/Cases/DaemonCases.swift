import Dispatch
import Foundation
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Counts the files renamed into a directory: an inotify watch for `IN_MOVED_TO`, read only between measurements.
///
/// Every durable replace ends with a rename into the directory, whoever makes it, so the count is the number of
/// durable writes that completed, for the library and for the raw baseline alike. The kernel queues the events
/// while a round runs (at a cost in system time that both pay alike), and nothing in the process reads them until
/// the round's CPU time is taken.
final class RenameCounter {
    private let descriptor: CInt

    init(directory: URL) {
        descriptor = inotify_init1(Int32(IN_NONBLOCK) | Int32(IN_CLOEXEC))
        precondition(descriptor >= 0, "inotify_init1 failed: errno \(errno)")
        let watch = inotify_add_watch(descriptor, directory.path, UInt32(IN_MOVED_TO))
        precondition(watch >= 0, "inotify_add_watch \(directory.path) failed: errno \(errno)")
    }

    deinit {
        close(descriptor)
    }

    /// Reads every queued event and returns the number of renames onto a file's name (not onto a temporary file's:
    /// those have a `~` in their names).
    func take() -> Int {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var renames = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            buffer.withUnsafeBytes { bytes in
                var offset = 0
                let header = MemoryLayout<inotify_event>.size
                while offset + header <= count {
                    let event = bytes.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    precondition(event.mask & UInt32(IN_Q_OVERFLOW) == 0, "the rename counter lost events")
                    let name = bytes[(offset + header)..<(offset + header + Int(event.len))]
                    if event.mask & UInt32(IN_MOVED_TO) != 0, !name.contains(UInt8(ascii: "~")) { renames += 1 }
                    offset += header + Int(event.len)
                }
            }
        }
        return renames
    }
}

/// A daemon's load: many storages, each changed often, written through the throttle, and what it costs in CPU time
/// per durable write next to the same writes made by hand.
///
/// Both sides run in this process, in alternating rounds, in two directories side by side on one file system. Each
/// has the same setter: a thread that wakes every 5 ms and stores a new `Int` in a quarter of the 200 values, so that
/// each value changes 50 times a second. The library's values are storages with a flush interval of 1 s, which
/// write each about once a second; the raw baseline's are `Int`s behind a lock each, which threads write by hand
/// with the raw durable sequence, one file every 5 ms, the latest value encoded with `JSONEncoder`. What is
/// compared is the CPU time of the whole process (every thread, user and system) in a window of the steady state,
/// divided by the durable writes completed in it, which an inotify watch of each directory counts as renames onto a
/// file's name. The library's side includes all it does for those writes: the ticks and their timers, the write,
/// and the file monitor's handling of the events its own writes cause.
enum DaemonCases {
    /// Storages, each set `setsPerSecond` times a second with a flush interval of 1 s: as many durable writes a
    /// second as there are storages.
    static let storages = 200
    static let setsPerSecond = 50
    /// The setter wakes this often and sets every `slices`-th storage, so that each is set `setsPerSecond` times a
    /// second and the sets, and the writes they lead to, are spread over time as a daemon's events are.
    static let setterPeriod: UInt64 = 5_000_000
    static var slices: Int { Int(1_000_000_000 / setterPeriod) / setsPerSecond }

    /// What one round measured.
    struct Round {
        /// Nanoseconds of CPU time, user and system, of every thread of the process.
        var cpu: UInt64
        var writes: Int
        var wall: UInt64
    }

    /// What one round measures: the load is started, runs for the warm-up, then for the window, whose CPU time
    /// and durable writes are taken, and is stopped.
    struct Settings {
        var rounds: Int
        var window: UInt64
    }

    static func settings(quick: Bool) -> Settings {
        quick ? Settings(rounds: 1, window: 1_000_000_000) : Settings(rounds: 5, window: 3_000_000_000)
    }

    /// Runs `load` for `warmUp`, then measures the process's CPU time and the writes `counter` sees over `window`.
    static func measureWindow(
        warmUp: UInt64, window: UInt64, counter: RenameCounter, load: () -> [PeriodicThread]
    ) -> Round {
        let threads = load()
        sleep(nanoseconds: warmUp)
        _ = counter.take()
        let startWall = monotonicNanoseconds()
        let startCPU = processCPUNanoseconds()
        sleep(until: startWall + window)
        let cpu = processCPUNanoseconds() - startCPU
        let wall = monotonicNanoseconds() - startWall
        let writes = counter.take()
        for thread in threads { thread.stop() }
        return Round(cpu: cpu, writes: writes, wall: wall)
    }

    /// Threads that write, by hand, one file every interval / storages, in turn: as many durable writes a second as
    /// the library makes, each of the latest value, encoded with `JSONEncoder`.
    ///
    /// Where a durable write takes longer than that (a journaled file system commits its journal on each `fsync`,
    /// which takes milliseconds), one thread cannot keep up, and the writes are shared among ``rawThreads``
    /// threads, each of which writes its files in turn. Writes still start one interval / storages apart, as the
    /// library's ticks do, and overlap as much as theirs do when the disk is slow.
    static func rawWriterThreads(values: [MutexBox], writers: [RawDurableWriter], encoder: JSONEncoder)
        -> [PeriodicThread]
    {
        let spacing = 1_000_000_000 / UInt64(storages)
        return (0..<rawThreads).map { thread in
            sleep(nanoseconds: thread == 0 ? 0 : spacing)
            return PeriodicThread(period: spacing * UInt64(rawThreads)) { tick in
                let index = (thread + tick * rawThreads) % storages
                let data = try! encoder.encode(values[index].value.withLock { $0 })
                writers[index].write(data)
            }
        }
    }

    /// The raw baseline's writer threads: 200 writes a second, 40 ms apart in each thread.
    static let rawThreads = 8

    /// One side of the comparison: how to start its load, how long it takes to reach its steady state, and the
    /// counter that sees its writes.
    struct Side {
        var name: String
        var warmUp: UInt64
        /// How long its writes go on after its load stops.
        var drain: UInt64
        var counter: RenameCounter
        var load: () -> [PeriodicThread]
    }

    static func daemon(_ harness: Harness) -> [Row] {
        withTemporaryDirectory("daemon") { base in
            // Two directories side by side on one file system: the raw baseline's is not watched by the library.
            let libraryDirectory = base.appendingPathComponent("library", isDirectory: true)
            let rawDirectory = base.appendingPathComponent("raw", isDirectory: true)
            for directory in [libraryDirectory, rawDirectory] {
                precondition(mkdir(directory.path, 0o700) == 0, "mkdir \(directory.path) failed: errno \(errno)")
            }
            let keys = (0..<storages).map { String(format: "k%03d", $0) }
            let slices = self.slices

            // The storages, their defaults saved, and nothing pending.
            let library: [WLStorage<Int>] = keys.map { key in
                WLStorage(
                    defaultValueClosure: { 0 }, flushInterval: 1,
                    backer: WLStorageDefaultBacker(key: key, directory: libraryDirectory))
            }
            DispatchQueue.concurrentPerform(iterations: storages) { library[$0].flush() }

            // The raw baseline: the values in memory behind a lock each, and writers with a directory descriptor.
            let values = keys.map { _ in MutexBox() }
            let rawDescriptor = openDirectory(rawDirectory)
            defer { close(rawDescriptor) }
            let writers = keys.map { RawDurableWriter(directory: rawDescriptor, name: $0) }
            let encoder = JSONEncoder()
            DispatchQueue.concurrentPerform(iterations: storages) { index in
                writers[index].write(try! encoder.encode(values[index].value.withLock { $0 }))
            }

            let raw = Side(
                name: "raw", warmUp: 200_000_000, drain: 0, counter: RenameCounter(directory: rawDirectory)
            ) {
                [
                    // The same sets as the library's, into the values in memory.
                    PeriodicThread(period: setterPeriod) { tick in
                        for index in stride(from: tick % slices, to: storages, by: slices) {
                            values[index].value.withLock { $0 = tick }
                        }
                    }
                ] + rawWriterThreads(values: values, writers: writers, encoder: encoder)
            }
            // A storage's first write is at its first set; the next ones follow each interval after the last one
            // started. Storage i starts at tick i, one setter period apart, so that the writes are spread over the
            // interval and not made all at once; the window starts once every storage has started. After the last
            // set, the ticks armed within the last interval write the last values.
            let wlstorage = Side(
                name: "library", warmUp: UInt64(storages) * setterPeriod + 50_000_000, drain: 1_200_000_000,
                counter: RenameCounter(directory: libraryDirectory)
            ) {
                [
                    PeriodicThread(period: setterPeriod) { tick in
                        for index in stride(from: tick % slices, to: min(tick + 1, storages), by: slices) {
                            library[index].wrappedValue = tick
                        }
                    }
                ]
            }

            let sides = [raw, wlstorage].filter { side in harness.side.map { $0 == side.name } ?? true }
            let settings = self.settings(quick: harness.quick)
            var rounds = Array(repeating: [Round](), count: sides.count)
            for round in 0..<settings.rounds {
                for (index, side) in sides.enumerated() {
                    rounds[index].append(
                        measureWindow(
                            warmUp: side.warmUp, window: settings.window, counter: side.counter, load: side.load)
                    )
                    // The next side starts once this one is quiet; after the last round, the storages' release
                    // writes what is left.
                    if round < settings.rounds - 1 || index < sides.count - 1 { sleep(nanoseconds: side.drain) }
                }
            }
            // What the last round left pending is written now, in parallel, rather than by each storage's release.
            DispatchQueue.concurrentPerform(iterations: storages) { library[$0].flush() }
            return rows(
                sides: sides.map(\.name), rounds: rounds, settings: settings, quick: harness.quick,
                fileSystem: fileSystemName(of: base))
        }
    }

    static func rows(sides: [String], rounds: [[Round]], settings: Settings, quick: Bool, fileSystem: String) -> [Row] {
        let measurement = newMeasurement()
        func stats(_ side: Int, unit: String, _ quantity: (Round) -> Double) -> Stats {
            Stats(unit: unit, samples: rounds[side].map(quantity), measurement: measurement)
        }
        func perWrite(_ side: Int) -> Stats {
            stats(side, unit: "ns") { Double($0.cpu) / Double(max(1, $0.writes)) }
        }
        let rate: (Round) -> Double = { Double($0.writes) * 1e9 / Double($0.wall) }
        let share: (Round) -> Double = { Double($0.cpu) * 100 / Double($0.wall) }
        let subject = ["raw": "raw durable sequence + JSONEncoder, by hand", "library": "WLStorage"]
        let window = String(format: "%.0f s", Double(settings.window) / 1e9)
        var note =
            "\(fileSystem); process CPU (getrusage) over \(settings.rounds) window(s) of \(window), divided by the"
            + " renames inotify saw; writes/s: "
            + sides.indices.map {
                "\(sides[$0]) \(formatQuantity(stats($0, unit: "count", rate).median, unit: "count"))"
            }
            .joined(separator: ", ")
        if quick { note += "; one round each with --quick" }
        let title = "daemon: CPU per durable write, \(storages) storages set \(setsPerSecond)×/s, interval 1 s"
        // With both sides, the rows compare the library to the raw baseline; with one (--side), they report it.
        let side = sides.count - 1
        let baseline = sides.count == 2 ? 0 : nil
        func row(_ title: String, _ value: (Int) -> Stats, target: Target? = nil, note: String? = nil) -> Row {
            Row(
                caseID: "daemon", title: title, subject: subject[sides[side]]!, value: value(side),
                baseline: baseline.map { subject[sides[$0]]! }, baselineValue: baseline.map(value),
                target: baseline.flatMap { _ in target }, note: note)
        }
        return [
            row(title, perWrite, target: .ratio(atMost: 1.3), note: note),
            row("daemon: share of a core", { stats($0, unit: "%", share) }),
            row("daemon: durable writes per second", { stats($0, unit: "count", rate) }),
        ]
    }

    /// The file system `url` is on, as `/proc/self/mountinfo` names it (`ext4 on /dev/vda`), and for ext4 whether it
    /// keeps a journal, which changes what a durable write costs.
    static func fileSystemName(of url: URL) -> String {
        var status = stat()
        guard stat(url.path, &status) == 0,
            let mounts = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)
        else { return "file system unknown" }
        // glibc's `major` and `minor`, which are macros.
        let dev = UInt64(status.st_dev)
        let device = "\((dev >> 8) & 0xfff | (dev >> 32) & ~0xfff):\(dev & 0xff | (dev >> 12) & ~0xff)"
        for line in mounts.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 2, fields[2] == device, let dash = fields.firstIndex(of: "-"),
                dash + 2 < fields.count
            else { continue }
            let (type, source) = (fields[dash + 1], fields[dash + 2])
            var name = "\(type) on \(source)"
            if type == "ext4" {
                let journal = "/proc/fs/jbd2/\(source.split(separator: "/").last ?? "")-8"
                name += FileManager.default.fileExists(atPath: journal) ? ", journaled" : ", no journal"
            }
            return name
        }
        return "file system unknown"
    }
}
