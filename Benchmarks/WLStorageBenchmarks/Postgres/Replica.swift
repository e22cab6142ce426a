import Dispatch
import Foundation
import Synchronization
import WLStorage
import WLStoragePostgres

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A replica of the propagation case: this executable run again as a process of its own, in a hidden mode.
///
/// `WLStorageBenchmarks --pg-replica URL NAMESPACE KEY DELIVERY [FLOOR_CHANNEL]` opens a storage of the `Int` under
/// `KEY` in a PostgreSQL store of `NAMESPACE`, and prints `ready`, then, for each new value its `onChange` observer
/// receives (on a serial queue of its own with `DELIVERY` `queue`, on the thread that delivers the change with
/// `no-queue`: ``ReplicaDelivery``), the
/// monotonic time (`CLOCK_MONOTONIC`, in nanoseconds, comparable with the parent's) at which it received it and the
/// value, one line each. With `FLOOR_CHANNEL`, it also listens on that channel as the floor's listeners do
/// (``FloorListener``), and prints `F`, the time and the value for each value heard there. It ends when its standard input ends. Storages of one key in stores of one identity share one value within a
/// process, so replicas that are to tell each other of changes must be processes of their own.
enum ReplicaMode {
    static let flag = "--pg-replica"

    /// Runs the replica and exits, when the arguments ask for it; returns otherwise.
    static func runIfAsked() {
        let arguments = CommandLine.arguments
        guard arguments.count > 1, arguments[1] == flag else { return }
        guard arguments.count == 6 || arguments.count == 7, let delivery = ReplicaDelivery(rawValue: arguments[5])
        else {
            FileHandle.standardError.write(
                Data("usage: WLStorageBenchmarks \(flag) URL NAMESPACE KEY queue|no-queue [FLOOR_CHANNEL]\n".utf8))
            exit(2)
        }
        let store: WLStoragePostgresStore
        do {
            store = try WLStoragePostgresStore(url: arguments[2], namespace: arguments[3])
        } catch {
            FileHandle.standardError.write(Data("\(error)\n".utf8))
            exit(1)
        }
        let storage = WLStorage(key: arguments[4], defaultValue: 0, flushInterval: nil, store: store)
        // Lines from two threads: one at a time.
        let output = Mutex(())
        let queue = delivery == .queue ? DispatchQueue(label: "replica") : nil
        let subscription = storage.onChange(queue: queue) { value in
            let received = monotonicNanoseconds()
            output.withLock { _ in FileHandle.standardOutput.write(Data("\(received) \(value)\n".utf8)) }
        }
        var floor: FloorListener?
        if arguments.count == 7 {
            do {
                floor = try FloorListener(url: arguments[2], channel: arguments[6]) { value, received in
                    output.withLock { _ in FileHandle.standardOutput.write(Data("F \(received) \(value)\n".utf8)) }
                }
            } catch {
                FileHandle.standardError.write(Data("\(error)\n".utf8))
                exit(1)
            }
        }
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        while readLine() != nil {}
        subscription.cancel()
        floor?.stop()
        withExtendedLifetime(storage) {}
        exit(0)
    }
}

/// Where a replica's `onChange` handler runs.
enum ReplicaDelivery: String {
    /// On a serial queue of the replica's: `onChange(queue: DispatchQueue(label:))`.
    case queue
    /// On the thread that delivers the change: `onChange(queue: nil)`.
    case noQueue = "no-queue"
}

/// The parent's handle on a replica process: started with this executable, its output read from a file.
final class ReplicaProcess {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let process: Process
    private let input: Pipe
    /// The replica's standard output: a temporary file, removed from its directory once the replica has it open.
    private let output: FileHandle

    /// Whether the replica listens on a floor's channel too.
    let hearsFloor: Bool

    convenience init(
        url: String, namespace: String, key: String, delivery: ReplicaDelivery = .queue, floorChannel: String? = nil
    ) throws {
        try self.init(
            arguments: [ReplicaMode.flag, url, namespace, key, delivery.rawValue] + (floorChannel.map { [$0] } ?? []),
            hearsFloor: floorChannel != nil)
    }

    /// Starts this executable with `arguments`, a replica mode's (``ReplicaMode``, ``EtcdReplicaMode``), whose floor
    /// listener prints `F` lines when `hearsFloor`.
    init(arguments: [String], hearsFloor: Bool) throws {
        self.hearsFloor = hearsFloor
        var template = Array("/tmp/wlstorage-bench-replica-XXXXXX".utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else { throw Failure(description: "mkstemp failed: errno \(errno)") }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        output = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = arguments
        input = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        self.process = process
    }

    /// Ends the replica (its standard input ends), killing it if it has not ended within 5 seconds.
    func stop() {
        try? input.fileHandleForWriting.close()
        let deadline = monotonicNanoseconds() + 5_000_000_000
        while process.isRunning && monotonicNanoseconds() < deadline { sleep(nanoseconds: 10_000_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    var isRunning: Bool { process.isRunning }

    /// Every line printed so far.
    var lines: [Substring] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let descriptor = output.fileDescriptor
        while true {
            let count = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(bytes.count)) }
            if count > 0 {
                bytes += chunk[..<count]
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n")
    }

    /// Each value received, with the time it was first received.
    var deliveries: [Int: UInt64] {
        var first: [Int: UInt64] = [:]
        for line in lines {
            let fields = line.split(separator: " ")
            guard fields.count == 2, let time = UInt64(fields[0]), let value = Int(fields[1]) else { continue }
            if first[value] == nil { first[value] = time }
        }
        return first
    }

    /// Each value the replica's floor listener heard, with the time it first heard it.
    var floorDeliveries: [Int: UInt64] {
        var first: [Int: UInt64] = [:]
        for line in lines {
            let fields = line.split(separator: " ")
            guard fields.count == 3, fields[0] == "F", let time = UInt64(fields[1]), let value = Int(fields[2]) else {
                continue
            }
            if first[value] == nil { first[value] = time }
        }
        return first
    }
}

/// Sends negative warm-up values, from `storage` and by hand (`floorSend`) in turn, one every two `period`s, until every
/// replica process and every floor listener has received one, then `extra` more of each; throws when that takes longer
/// than `seconds` or a replica process ended.
func warmUp(
    _ storage: WLStorage<Int>, replicas: [ReplicaProcess], listeners: [FloorListener], period: UInt64, extra: Int,
    seconds: UInt64, floorSend: (Int) throws -> Void
) throws {
    var value = 0
    let deadline = monotonicNanoseconds() + seconds * 1_000_000_000
    var extra = extra
    while extra > 0 {
        value -= 1
        storage.wrappedValue = value
        try floorSend(value)
        sleep(nanoseconds: 2 * period)
        let everyone =
            replicas.allSatisfy {
                $0.deliveries.keys.contains { $0 < 0 }
                    && (!$0.hearsFloor || $0.floorDeliveries.keys.contains { $0 < 0 })
            }
            && listeners.allSatisfy { $0.received.withLock { !$0.isEmpty } }
        if everyone {
            extra -= 1
        } else {
            guard monotonicNanoseconds() < deadline, replicas.allSatisfy(\.isRunning) else {
                throw PostgresCases.Failure(
                    description: "the \(replicas.count) replicas did not receive the warm-up values within \(seconds) s"
                )
            }
        }
    }
}
