import Foundation
import Testing
import WLStorage
import WLStorageEtcd

#if canImport(Glibc)
    import Glibc
#endif

/// Storages over a real three-member etcd cluster whose members are killed (`SIGKILL`) and restarted, the leader among
/// them: writes and updates go on, and every update that returned with no error counts exactly once. Each test has a
/// cluster of its own, and its stores name all three members.
@Suite(.enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason), .capturingOutput, .serialized)
struct EtcdClusterTests {
    /// One thread updates a counter through two stores of the cluster (two programs, to this process), another sets a
    /// value through one and flushes it, while a member that does not lead is killed and restarted, and then the
    /// leader is. Each step waits until both threads made progress past it.
    @Test func writesAndUpdatesGoOnThroughTheLossOfAMemberAndALeaderChange() throws {
        ReportedErrors.install()
        let cluster = try EtcdCluster.started()
        defer { cluster.remove() }
        let namespace = uniqueNamespace()
        let stores = [
            try WLStorageEtcdStore(endpoints: cluster.endpoints, namespace: namespace, timeout: .seconds(5)),
            try WLStorageEtcdStore(
                endpoints: cluster.otherSpellings.reversed(), namespace: namespace, timeout: .seconds(5)),
        ]
        let counters = stores.map { WLStorage(key: "count", defaultValue: 0, flushInterval: nil, store: $0) }
        let note = WLStorage(key: "note", defaultValue: 0, flushInterval: nil, store: stores[0])
        /// The values the updates stored, and the errors they reported, as the updating thread saw them.
        let acknowledged = Lock<[Int]>([])
        let reported = Lock<[Int]>([])
        let notes = Lock<(written: Int, failed: Int)>((0, 0))
        let stop = Lock(false)
        /// The errors an update reports say "the update"; those of the background and of the feed do not.
        let updateErrors: @Sendable () -> Int = {
            ReportedErrors.errors { $0.message.contains(namespace) && $0.message.contains("the update") }.count
        }
        let updating = startThread {
            var index = 0
            while !stop.withLock({ $0 }) {
                let before = updateErrors()
                let value = counters[index % 2].update { count in
                    count += 1
                    return count
                }
                if updateErrors() == before {
                    acknowledged.withLock { $0.append(value) }
                } else {
                    reported.withLock { $0.append(value) }
                }
                index += 1
            }
        }
        let writing = startThread {
            var value = 0
            while !stop.withLock({ $0 }) {
                value += 1
                note.wrappedValue = value
                note.flush()
                let stored = ((try? stores[1].read(key: "note")) ?? nil).map { String(decoding: $0, as: UTF8.self) }
                notes.withLock { stored == String(value) ? ($0.written += 1) : ($0.failed += 1) }
            }
        }
        defer {
            stop.withLock { $0 = true }
            _ = updating.wait(timeout: .now() + 120)
            _ = writing.wait(timeout: .now() + 120)
        }
        /// Waits until ten more updates and five more notes went through.
        func progress(_ step: String) throws {
            let (updates, written) = (acknowledged.withLock { $0.count }, notes.withLock { $0.written })
            try #require(
                eventually(timeout: 120) {
                    acknowledged.withLock { $0.count } >= updates + 10 && notes.withLock { $0.written } >= written + 5
                },
                Comment(
                    rawValue: "no progress \(step): \(acknowledged.withLock { $0.count }) updates,"
                        + " \(notes.withLock { $0 }) notes;"
                        + " \(ReportedErrors.errors { $0.message.contains(namespace) }.suffix(5))\n\(cluster.logs)"))
        }

        try progress("at the start")
        let firstLeader = try #require(cluster.leader(), "a leader\n\(cluster.logs)")
        let follower = (firstLeader + 1) % 3
        cluster.stop(follower)
        try progress("with a member that does not lead killed")
        try cluster.restart(follower)
        try progress("with that member back")
        let leader = try #require(cluster.leader(), "a leader\n\(cluster.logs)")
        cluster.stop(leader)
        let newLeader = try #require(cluster.leader(except: leader), "a new leader\n\(cluster.logs)")
        #expect(newLeader != leader)
        try progress("with the leader killed")
        try cluster.restart(leader)
        try progress("with the old leader back")

        stop.withLock { $0 = true }
        #expect(updating.wait(timeout: .now() + 120) == .success, "the updates ended")
        #expect(writing.wait(timeout: .now() + 120) == .success, "the writes ended")
        let stored = try #require(try stores[0].read(key: "count"))
        let total = try #require(Int(String(decoding: stored, as: UTF8.self)))
        let values = acknowledged.withLock { $0 }
        // An update that reported its outcome not known may count once (see the counter of three programs below).
        let unknown = reported.withLock { $0.count }
        #expect(
            (values.count...values.count + unknown).contains(total),
            "\(values.count) updates acknowledged, \(reported.withLock { $0 }) reported, the counter holds \(total)")
        #expect(Set(values).count == values.count, "no value stored by two updates")
        #expect(values.allSatisfy { (1...total).contains($0) })
        for counter in counters { #expect(eventuallyHolds(counter, total, timeout: 120)) }
    }

    /// Three programs increment one counter with `update` while members are killed and restarted: one that does not
    /// lead, then the leader, then another. The programs reach each member through a relay, which, before each kill,
    /// cuts the next write through it (its request or its answer): every step has writes whose answers were lost. The
    /// counter ends holding exactly the number of updates that returned with no error, each of which stored a value of
    /// its own.
    @Test func anExactlyOnceCounterOfThreeProgramsEndsExactWhileMembersAreKilledAndRestarted() throws {
        let cluster = try EtcdCluster.started()
        defer { cluster.remove() }
        let relays = try cluster.members.map { try TransactionCuttingRelay(to: $0.clientPort) }
        defer { for relay in relays { relay.stop() } }
        let namespace = uniqueNamespace()
        let programs = try (0..<3).map { index in
            // Each program names the members in another order: they start from different ones.
            let endpoints = (0..<3).map { relays[($0 + index) % 3].endpoint }
            return try CounterProgram(endpoints: endpoints, namespace: namespace, key: "count")
        }
        defer { for program in programs { program.kill() } }
        /// Waits until every program has had ten more updates acknowledged.
        func progress(_ step: String) throws {
            let counts = programs.map { $0.acknowledged.count }
            for (program, count) in zip(programs, counts) {
                try #require(
                    eventually(timeout: 120) { program.acknowledged.count >= count + 10 },
                    "no progress \(step): \(programs.map(\.printedErrors))\n\(cluster.logs)")
            }
        }
        /// Cuts the next write through each relay (its answer, its request, its answer), and waits until one was cut.
        func cutWrites(_ step: String) throws {
            let before = relays.map(\.cutCount).reduce(0, +)
            for (index, relay) in relays.enumerated() { relay.cutNextWrite(index == 1 ? .request : .answer) }
            try #require(
                eventually(timeout: 120) { relays.map(\.cutCount).reduce(0, +) > before }, "no write was cut \(step)")
        }
        for program in programs { program.send("go") }
        try progress("at the start")
        let leader = try #require(cluster.leader(), "a leader\n\(cluster.logs)")
        var killed = [(leader + 1) % 3]
        try cutWrites("before the first kill")
        cluster.stop(killed[0])
        try progress("with a member that does not lead killed")
        try cluster.restart(killed[0])
        let second = try #require(cluster.leader(), "a leader\n\(cluster.logs)")
        killed.append(second)
        try cutWrites("before the leader's kill")
        cluster.stop(second)
        try progress("with the leader killed")
        try cluster.restart(second)
        killed.append((second + 2) % 3)
        try cutWrites("before the third kill")
        cluster.stop(killed[2])
        try progress("with a third kill")
        try cluster.restart(killed[2])
        try progress("with every member back")
        for program in programs { program.send("stop") }
        for program in programs {
            #expect(program.waitFor("stopped", timeout: 120))
            let end = program.waitForExit(timeout: 60)
            #expect(end?.reason == .exit && end?.status == 0, "the program ended well: \(program.printedErrors)")
        }

        let store = try WLStorageEtcdStore(endpoints: cluster.endpoints, namespace: namespace)
        let total = try #require(try store.read(key: "count").flatMap { Int(String(decoding: $0, as: UTF8.self)) })
        let values = programs.flatMap(\.acknowledged)
        let reported = programs.map(\.reported)
        // How many writes were sent again after their answers were lost, and what their tags said.
        let lost = ["resent", "traced found", "traced not found"].map { line in
            "\(line): \(programs.map { $0.lines.filter { $0 == line }.count })"
        }
        // An update whose answer was lost and whose tag can no longer be found (the key was written more times since
        // than the store keeps tags of) reports that its outcome is not known, and is not made again: it may count
        // once, never twice. Every other update counts exactly once.
        let unknown = reported.map(\.count).reduce(0, +)
        #expect(
            (values.count...values.count + unknown).contains(total),
            Comment(
                rawValue: "\(values.count) updates acknowledged (\(programs.map(\.acknowledged.count))), the counter"
                    + " holds \(total); reported: \(reported); \(lost.joined(separator: ", "))"))
        #expect(
            programs.map { $0.lines.filter { $0 == "resent" }.count }.reduce(0, +) >= 3,
            "each cut write was sent again")
        let twice = Dictionary(grouping: values, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
        #expect(twice.isEmpty, "values stored by two acknowledged updates: \(twice)")
        #expect(values.allSatisfy { (1...total).contains($0) })
    }
}

/// A `WLStorageEtcdTestChild`: a program that increments a counter with `update` until told to stop, and prints each
/// update's outcome.
final class CounterProgram: Sendable {
    private let process: Process
    private let input: FileHandle
    private let output: CapturedOutput
    private let errors: CapturedOutput

    /// Starts the program and waits until it is ready.
    init(endpoints: [String], namespace: String, key: String) throws {
        let process = Process()
        process.executableURL = builtProductsDirectory.appendingPathComponent("WLStorageEtcdTestChild")
        process.arguments = [endpoints.joined(separator: ","), namespace, key]
        let pipe = Pipe()
        output = try CapturedOutput()
        errors = try CapturedOutput()
        process.standardInput = pipe
        process.standardOutput = output.handle
        process.standardError = errors.handle
        try process.run()
        self.process = process
        input = pipe.fileHandleForWriting
        let output = output
        let errors = errors
        TestRecord.current?.addOutput {
            describeOutput(
                command: ["WLStorageEtcdTestChild"] + (process.arguments ?? []), standardOutput: output.text,
                standardError: errors.text)
        }
        try #require(waitFor("ready"), "the program did not get ready: \(printed) \(printedErrors)")
    }

    /// Sends one command line.
    func send(_ command: String) {
        try? input.write(contentsOf: Data((command + "\n").utf8))
    }

    /// Everything the program printed so far, line by line.
    var lines: [String] { printed.split(separator: "\n").map(String.init) }
    var printed: String { output.text }
    var printedErrors: String { errors.text }

    /// The values its acknowledged updates stored.
    var acknowledged: [Int] { lines.compactMap { $0.hasPrefix("acknowledged ") ? Int($0.dropFirst(13)) : nil } }
    /// The values of the updates that reported an error.
    var reported: [Int] { lines.compactMap { $0.hasPrefix("reported ") ? Int($0.dropFirst(9)) : nil } }

    /// Waits until the program has printed `line`.
    func waitFor(_ line: String, timeout: Double = 60) -> Bool {
        eventually(timeout: timeout) { lines.contains(line) }
    }

    /// Waits until the program has ended; kills it after `timeout` seconds. Returns how it ended.
    func waitForExit(timeout: Double = 60) -> (reason: Process.TerminationReason, status: Int32)? {
        guard eventually(timeout: timeout, { process.end != nil }), let end = process.end else {
            kill()
            return nil
        }
        return (end.reason, end.status)
    }

    /// Kills the program if it still runs, and closes its input.
    func kill() {
        if process.end == nil { Glibc.kill(process.processIdentifier, SIGKILL) }
        try? input.close()
    }
}
