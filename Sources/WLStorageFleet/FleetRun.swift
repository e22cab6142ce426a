import Foundation

/// The store the fleet's programs share, as a test sets it up: it starts programs on it and reads what it holds.
public protocol FleetSharedStore {
    /// Starts a program of `version` named `name` (unique in the run), with `flushInterval`.
    func start(name: String, version: FleetVersion, flushInterval: Int?) throws -> FleetProcess
    /// Returns once nothing the program `name`, just killed, started can still change the store (a PostgreSQL server
    /// can still commit what a client sent before it died).
    func awaitGone(name: String) throws
    /// The bytes stored under `key`, read directly.
    func stored(key: String) throws -> Data?
    /// What the store holds besides the keys' values and what the package may keep beside them (the bytes of a value
    /// kept from before its type changed; a temporary file of a killed writer): anything moved aside, for one.
    func strays(keys: [String]) throws -> [String]
    /// Disrupts the store as its server, or the network to it, does: restarts, dropped connections, latency; the
    /// disruption `kind` (0 to 3) picks. Returns once the server answers again, saying what it did; `nil` for a store
    /// that has no server (a directory).
    func disrupt(kind: Int) throws -> String?
}

extension FleetSharedStore {
    public func disrupt(kind: Int) throws -> String? { nil }
}

/// A failure of the fleet's invariant, with the seed that replays the run and its last operations.
public struct FleetProblem: Error, CustomStringConvertible {
    public let description: String
}

/// A small, seedable generator (SplitMix64).
public struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// One run of a fleet of programs (child processes) over a shared store, and the model that judges it.
///
/// Operations, drawn from the seed, one at a time (each waits for its program's answer): start a program as any of the
/// three versions (FleetValues.swift; restarted as its version or, now and then, as any other: a deploy or a rollback
/// in any order) with a flush interval of 0, 1 s or none; open a key; set; update; flush; read; release a storage; exit
/// (which flushes); kill with SIGKILL (what is pending is lost); wait a little while background writes and change feeds
/// run; a disruption of the store's server, where it has one (a restart, fast or as after a crash, every connection
/// dropped, latency turned on or off); and a change seen by the fleet (below). Each set has a stamp of its own, increasing in the run's order, from
/// which every field of its value follows.
///
/// The programs write in the background, when they want, and hear of each other's writes through the store's feed:
/// the order of the writes is the machine's. So the model claims only what holds whatever that order. It knows, for
/// each set, its *window*: from the operation that made it to the operation after which its program can no longer
/// write it (a later flush of that storage returned, or the program exited or was killed and is gone; a released
/// storage's set stays open until its program ends). A set *covered* by a flush (or by an update answered with nothing
/// pending, or by a normal exit) was written at some moment inside its own operation or after it, and before the cover.
///
/// The checks:
///
/// - a value a program holds (answered by open, set, update, flush, read) is its default, or made by a set of the key
///   that started before, as the reader's version reads it: the fields that the writer's version knows too (under any
///   name) are the set's, the others are its default's or kept from a set stored before; it is never a value no set
///   made;
/// - a program that set the key holds its set, or a set whose window ended after its own set started (a value written
///   after its own); never the default;
/// - no version serves its default while a value it can map is stored: a program that opened the key after a covered
///   set holds a set's value, or its default while reporting `storedByAnotherVersion`, and then only V1 or V2 after a
///   V3 set of the case they do not know; V3 reads every version's values and never reports it;
/// - a change made on one version is seen by every running version that has the field, under any name: now and then
///   every other program flushes the key, one sets and flushes it, and every other program's storage of it comes to
///   hold that set as its version reads it (unless it cannot read it: V1 and V2 meeting `spacious`);
/// - at the end, every program stopped, the bytes of each key are read directly: after any covered set, they are a
///   set's value (never the default), of the last covered set or of a set whose window ended after that set started
///   (last writer wins: it may have been written after it); their fields the writer's version knows are its set's (V3
///   writes `theme` alike), and the members it does not know are absent or those of a set stored before, never a
///   default's unless a default could have been saved there (a program opened the key before anything was stored);
/// - nothing is moved aside, and no program reports an error that loses or refuses a value (`changeDiscarded`,
///   `decodingFailed`, `typeMismatch`…).
public final class FleetRun {
    public static let keys = ["settings", "profile"]
    public static let programCount = 3

    /// The errors a program may report without a fault: a value of another version it cannot read, and transient
    /// failures of the system or the server (the value then stays pending and is retried).
    static let acceptedErrors: Set<String> = [
        "storedByAnotherVersion", "readFailed", "writeFailed", "backerFailed", "directoryUnavailable",
    ]

    struct SetRecord {
        let program: Int
        let version: FleetVersion
        /// The operation that made it.
        let start: Int
        /// The operation after which its program can no longer write it; `nil` while it can.
        var end: Int?
    }

    /// A program's storage of a key, from its open to its release.
    struct Instance {
        let opened: Int
        /// The stamps of the sets made through it, in order.
        var sets: [Int] = []
    }

    struct Program {
        let index: Int
        var version: FleetVersion
        var generation = 0
        var process: FleetProcess?
        var storages: [String: Instance] = [:]
        /// Per key, the last set of this run of the program, through any of its storages: an exit flushes it.
        var lastSet: [String: Int] = [:]
        /// The sets this run of the program may still write.
        var openWindows: [(key: String, stamp: Int)] = []
        var name: String { "P\(index)-\(generation)" }
    }

    public let seed: UInt64
    let shared: any FleetSharedStore
    var random: SplitMix64
    var operation = 0
    var nextStamp = 1
    var programs: [Program]
    var sets: [String: [Int: SetRecord]] = [:]
    /// Per key: the covered sets, with the operation that covered each.
    var covered: [String: [(stamp: Int, by: Int)]] = [:]
    /// Per key: a program opened it while nothing covered was stored, so its default may have been saved (and its
    /// members kept by a write of another version after it).
    var defaultPossible: Set<String> = []
    var trace: [String] = []
    /// How many times each kind of operation ran, and what the run saw, for ``summary``.
    var counts: [String: Int] = [:]

    public init(seed: UInt64, shared: any FleetSharedStore) {
        self.seed = seed
        self.shared = shared
        random = SplitMix64(seed: seed)
        programs = (0..<Self.programCount).map { Program(index: $0, version: FleetVersion.allCases.reversed()[$0 % 3]) }
    }

    deinit {
        for program in programs { try? program.process?.kill() }
    }

    func fail(_ message: String) -> FleetProblem {
        // What each running program reported last: the errors behind an answer.
        let reported = programs.compactMap { program -> String? in
            guard let process = program.process else { return nil }
            let lines = process.reportedErrors.suffix(5).map(\.line)
            return lines.isEmpty ? nil : "\(process.name) reported:\n    " + lines.joined(separator: "\n    ")
        }
        return FleetProblem(
            description: "seed \(seed) (replay with WLSTORAGE_SEED=\(seed)): operation \(operation): \(message)\n"
                + "last operations:\n  " + trace.suffix(40).joined(separator: "\n  ")
                + (reported.isEmpty ? "" : "\n" + reported.joined(separator: "\n")))
    }

    /// What the run did, in numbers: its operations by kind, the sets covered, the values read that a program could
    /// not read (`storedByAnotherVersion`), and what each key ended holding.
    public var summary: String {
        "seed \(seed): " + counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }

    func count(_ kind: String) {
        counts[kind, default: 0] += 1
    }

    func note(_ line: String) {
        trace.append("\(operation): \(line)")
        if trace.count > 400 { trace.removeFirst(200) }
    }

    // MARK: Operations

    /// Runs `operations` operations, then stops every program and checks what the store holds.
    public func run(operations: Int) throws {
        for _ in 0..<operations {
            operation += 1
            try step()
        }
        operation += 1
        for index in programs.indices where programs[index].process != nil {
            try exit(index)
        }
        try checkFinal()
    }

    func step() throws {
        let roll = Int.random(in: 0..<100, using: &random)
        let index = Int.random(in: 0..<Self.programCount, using: &random)
        let key = Self.keys[Int.random(in: 0..<Self.keys.count, using: &random)]
        // Now and then the store's server restarts or drops every connection, while the programs run.
        if (84..<88).contains(roll) {
            let disruption: String?
            do {
                disruption = try shared.disrupt(kind: roll - 84)
            } catch { throw fail("the store could not be disrupted: \(error)") }
            if let disruption {
                note(disruption)
                count(disruption)
                return
            }
        }
        guard programs[index].process != nil else {
            // A stopped program starts, as its version or, now and then, as any other (a deploy or a rollback).
            if roll % 3 == 0 {
                let others = FleetVersion.allCases.filter { $0 != programs[index].version }
                programs[index].version = others[Int.random(in: 0..<others.count, using: &random)]
            }
            try start(index)
            return
        }
        guard programs[index].storages[key] != nil else {
            try open(index, key)
            return
        }
        switch roll {
        case 0..<28: try set(index, key, update: false)
        case 28..<34: try set(index, key, update: true)
        case 34..<48: try flush(index, key)
        case 48..<62: try read(index, key)
        case 62..<66: try close(index, key)
        case 66..<70: try exit(index)
        case 70..<76: try kill(index)
        case 79..<84: try propagate(index, key)
        case 76..<79:
            let milliseconds = Int.random(in: 10...300, using: &random)
            note("wait \(milliseconds) ms")
            count("wait")
            usleep(UInt32(milliseconds) * 1_000)
        default: try set(index, key, update: false)
        }
    }

    func start(_ index: Int) throws {
        programs[index].generation += 1
        let interval = [nil, 0, 1][Int.random(in: 0..<3, using: &random)]
        let name = programs[index].name
        let version = programs[index].version
        note("\(name) starts as \(version), flush interval \(interval.map { "\($0) s" } ?? "none")")
        count("start as \(version)")
        do {
            programs[index].process = try shared.start(name: name, version: version, flushInterval: interval)
        } catch { throw fail("\(name) could not start: \(error)") }
        programs[index].storages = [:]
        programs[index].lastSet = [:]
        programs[index].openWindows = []
        for key in Self.keys where Bool.random(using: &random) {
            try open(index, key)
        }
    }

    func ask(_ index: Int, _ command: String, noted: Bool = true) throws -> [String] {
        guard let process = programs[index].process else { throw fail("P\(index) is not running") }
        let answer: String
        do {
            answer = try process.ask(command)
        } catch { throw fail("\(error)") }
        if noted {
            note("\(process.name) \(programs[index].version): \(command) -> \(answer)")
            count(String(command.prefix { $0 != " " }))
        }
        return answer.split(separator: " ").map(String.init)
    }

    func open(_ index: Int, _ key: String) throws {
        if covered[key] == nil { defaultPossible.insert(key) }
        let words = try ask(index, "open \(key)")
        guard words.count == 3, words[0] == "opened" else { throw fail("unexpected answer \(words)") }
        programs[index].storages[key] = Instance(opened: operation)
        try checkHeld(index, key, json: words[1], error: words[2])
    }

    func set(_ index: Int, _ key: String, update: Bool) throws {
        let stamp = nextStamp
        nextStamp += 1
        sets[key, default: [:]][stamp] = SetRecord(
            program: index, version: programs[index].version, start: operation, end: nil)
        programs[index].storages[key]?.sets.append(stamp)
        programs[index].lastSet[key] = stamp
        programs[index].openWindows.append((key, stamp))
        let words = try ask(index, "\(update ? "update" : "set") \(key) \(stamp)")
        let json: String
        if update {
            guard words.count == 4, words[0] == "updated" else { throw fail("unexpected answer \(words)") }
            json = words[3]
            if words[1] == "0" { cover(key, stamp) }
        } else {
            guard words.count == 2, words[0] == "set" else { throw fail("unexpected answer \(words)") }
            json = words[1]
        }
        // The set's value; or, once it is written (at once, by an update or a leading-edge write), a value another
        // program wrote after it, adopted before the answer: ``checkHeld`` allows only those.
        if self.stamp(of: json) != stamp { count("answered a set with a later value") }
        try checkHeld(index, key, json: json, error: "none")
    }

    /// Flushes a storage; returns whether nothing is pending after it.
    @discardableResult
    func flush(_ index: Int, _ key: String) throws -> Bool {
        let words = try ask(index, "flush \(key)")
        guard words.count == 4, words[0] == "flushed" else { throw fail("unexpected answer \(words)") }
        guard let instance = programs[index].storages[key] else { return false }
        if words[1] == "0" {
            if let last = instance.sets.last { cover(key, last) }
            // The storage can no longer write any set made through it: what was pending is written.
            endWindows(index) { $0.key == key && instance.sets.contains($0.stamp) }
        } else if !Self.acceptedErrors.contains(words[2]) || words[2] == "storedByAnotherVersion" {
            throw fail("P\(index)'s flush of \(key) returned with the value still pending, and error \(words[2])")
        }
        try checkHeld(index, key, json: words[3], error: words[2])
        return words[1] == "0"
    }

    func read(_ index: Int, _ key: String) throws {
        let words = try ask(index, "read \(key)")
        guard words.count == 3, words[0] == "value" else { throw fail("unexpected answer \(words)") }
        try checkHeld(index, key, json: words[1], error: words[2])
    }

    /// A change seen by the fleet: every other program's storage of `key` flushes, so that none has a set of its own
    /// pending; the program `index` sets the key and flushes it; then every other program's storage of the key comes to
    /// hold that set as its version reads it (the fields its version shares with the writer's, under any name, are the
    /// set's), unless its version cannot read the set. Not claimed where the model cannot: a flush left a value
    /// pending (a transient failure), or a released storage's set may still be written.
    func propagate(_ index: Int, _ key: String) throws {
        let others = programs.indices.filter { $0 != index && programs[$0].storages[key] != nil }
        for other in others {
            guard try flush(other, key) else {
                count("change not followed: a flush left a value pending")
                return
            }
        }
        try set(index, key, update: Bool.random(using: &random))
        let stamp = nextStamp - 1
        guard try flush(index, key) else {
            count("change not followed: a flush left a value pending")
            return
        }
        guard !programs.contains(where: { $0.openWindows.contains { $0.key == key } }) else {
            count("change not followed: a released storage's set may still be written")
            return
        }
        let writer = programs[index].version
        let made = writer.made(by: stamp)
        note("every other program's \(key) is to come to hold the set \(stamp) of \(writer)")
        count("change followed")
        for other in others {
            let version = programs[other].version
            if version.cannotRead(setOf: writer, stamp: stamp) {
                count("change followed by a version that cannot read it")
                continue
            }
            // A set writes the fields it changed: one it left as it read it (`mode`) may hold another version's case.
            if let stored = try? shared.stored(key: key), version.reads(stored) == nil {
                count("change followed by a version that cannot read a field another set left")
                continue
            }
            let deadline = ContinuousClock.now + .seconds(60)
            var polls = 0
            while true {
                let words = try ask(other, "read \(key)", noted: false)
                guard words.count == 3, words[0] == "value" else { throw fail("unexpected answer \(words)") }
                try checkHeld(other, key, json: words[1], error: words[2])
                polls += 1
                let held = version.value(Data(words[1].utf8))
                if let held, held["stamp"] == "\(stamp)" {
                    if let disagreement = version.disagreement(held, with: made, of: writer) {
                        throw fail("P\(other) \(version) holds \(words[1]) for the set \(stamp): \(disagreement)")
                    }
                    note("P\(other) \(version) holds \(words[1]) after \(polls) reads")
                    count(version == writer ? "change seen by another program" : "change seen by another version")
                    break
                }
                guard ContinuousClock.now < deadline else {
                    throw fail(
                        "P\(other) \(version)'s \(key) holds \(words[1]) (\(words[2])) 60 s after the set \(stamp) of"
                            + " \(writer) was flushed, and nothing else was pending: the change is not seen")
                }
                usleep(10_000)
            }
        }
    }

    func close(_ index: Int, _ key: String) throws {
        let words = try ask(index, "close \(key)")
        guard words == ["closed"] else { throw fail("unexpected answer \(words)") }
        programs[index].storages[key] = nil
    }

    /// A normal exit: every storage's pending value is flushed.
    func exit(_ index: Int) throws {
        guard let process = programs[index].process else { return }
        note("\(process.name) exits")
        count("exit")
        do {
            try process.exit()
        } catch { throw fail("\(error)") }
        for (key, stamp) in programs[index].lastSet { cover(key, stamp) }
        try ended(index, process)
    }

    /// SIGKILL: what is pending is lost.
    func kill(_ index: Int) throws {
        guard let process = programs[index].process else { return }
        note("\(process.name) is killed")
        count("kill")
        do {
            try process.kill()
            try shared.awaitGone(name: process.name)
        } catch { throw fail("\(error)") }
        try ended(index, process)
    }

    func ended(_ index: Int, _ process: FleetProcess) throws {
        endWindows(index) { _ in true }
        programs[index].process = nil
        programs[index].storages = [:]
        let faults = process.reportedErrors.filter { !Self.acceptedErrors.contains($0.code) }
        if !faults.isEmpty {
            throw fail("\(process.name) reported: \(faults.map(\.line).joined(separator: "\n"))")
        }
        // Only a value of a case it does not know is another version's: V3 reads every version's values, and V1 and V2
        // those of every set but V3's `spacious` ones.
        let version = programs[index].version
        if let line = process.reportedErrors.first(where: { $0.code == "storedByAnotherVersion" })?.line,
            !sets.values.contains(where: { $0.contains { version.cannotRead(setOf: $0.value.version, stamp: $0.key) } })
        {
            throw fail("\(process.name) \(version) reported a value it can map as another version's: \(line)")
        }
        // A program built with ThreadSanitizer prints its reports on standard error (a killed one exits without the
        // status that says so).
        if process.errorOutput.contains("ThreadSanitizer") {
            throw fail("\(process.name) printed a ThreadSanitizer report:\n\(process.errorOutput)")
        }
    }

    func cover(_ key: String, _ stamp: Int) {
        covered[key, default: []].append((stamp, operation))
        count("covered set")
    }

    func endWindows(_ index: Int, where matches: ((key: String, stamp: Int)) -> Bool) {
        programs[index].openWindows.removeAll { window in
            guard matches(window) else { return false }
            sets[window.key]?[window.stamp]?.end = operation
            return true
        }
    }
}

extension FleetRun {
    /// The runs a test makes: one of `WLSTORAGE_SEED` when set (a replay), else runs of random seeds, of
    /// `operationsPerRun` operations each, over `WLSTORAGE_OPERATIONS` operations in all (`defaultOperations` unless
    /// set).
    public static func plannedRuns(defaultOperations: Int, operationsPerRun: Int) -> [(seed: UInt64, operations: Int)] {
        let environment = ProcessInfo.processInfo.environment
        let total = environment["WLSTORAGE_OPERATIONS"].flatMap { Int($0) } ?? defaultOperations
        let perRun = min(operationsPerRun, max(1, total))
        if let seed = environment["WLSTORAGE_SEED"].flatMap({ UInt64($0) }) { return [(seed, perRun)] }
        let runs = max(1, (total + perRun - 1) / perRun)
        return (0..<runs).map { _ in (UInt64.random(in: 0...UInt64.max), perRun) }
    }
}
