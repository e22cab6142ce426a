import Foundation
import WLStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What other ways of keeping a value across restarts cost per change.
enum PeerCases {
    static func peers(_ harness: Harness) -> [Row] {
        withTemporaryDirectory("peers") { directory in
            // UserDefaults on Linux keeps a suite in `$XDG_CONFIG_HOME/<suite>.plist` (`~/.config` by default), as
            // the environment was when the program started: a suite of its own, removed at the end.
            let suite = "WLStorageBenchmarks-\(getpid())"
            let defaults = UserDefaults(suiteName: suite)!
            defer { defaults.removePersistentDomain(forName: suite) }

            let steady = AccessCases.intStorage(in: directory.appendingPathComponent("steady"), flushInterval: 3600)
            steady.flush()
            steady.wrappedValue = -1
            let flushed = AccessCases.intStorage(in: directory.appendingPathComponent("flushed"), flushInterval: nil)
            flushed.flush()
            let encoder = JSONEncoder()
            let atomicURL = directory.appendingPathComponent("atomic")

            // Every operation stores a new number: a counter per variant, not the loop index, which restarts
            // with each round (UserDefaults writes nothing for an unchanged value).
            var (setCount, defaultsCount, flushCount, syncCount, atomicCount) = (0, 0, 0, 0, 0)
            let memory = harness.measure(
                [
                    Variant("WLStorage set") { n in
                        for _ in 0..<n {
                            setCount += 1
                            steady.wrappedValue = setCount
                        }
                    },
                    Variant("UserDefaults set") { n in
                        for _ in 0..<n {
                            defaultsCount += 1
                            defaults.set(defaultsCount, forKey: "value")
                        }
                    },
                ], settings: harness.fast)
            // Interleaved in blocks of several operations rather than one by one: a rewrite in place by
            // UserDefaults slows the journal commit of the next write by rename, and only the first write of a block
            // pays for the block before it.
            let diskVariants = [
                Variant("WLStorage set + flush()") { n in
                    for _ in 0..<n {
                        flushCount += 1
                        flushed.wrappedValue = flushCount
                        flushed.flush()
                    }
                },
                Variant("UserDefaults set + synchronize()") { n in
                    for _ in 0..<n {
                        syncCount += 1
                        defaults.set(-syncCount, forKey: "value")
                        defaults.synchronize()
                    }
                },
                Variant("encode + Data.write(.atomic)") { n in
                    for _ in 0..<n {
                        atomicCount += 1
                        try! encoder.encode(atomicCount).write(to: atomicURL, options: .atomic)
                    }
                },
            ]
            let blocks =
                harness.quick
                ? RunSettings(rounds: 5, warmUpRounds: 1, roundNanoseconds: 3_000_000, maximumOperations: 8)
                : RunSettings(rounds: 25, warmUpRounds: 2, roundNanoseconds: 8_000_000, maximumOperations: 16)
            let disk = harness.measure(diskVariants, settings: blocks)

            func row(_ subject: String, _ subjectStats: Stats, _ peer: String, _ peerStats: Stats) -> Row {
                Row(
                    caseID: "peers", title: "peers: an Int per change", subject: subject, value: subjectStats,
                    baseline: peer, baselineValue: peerStats)
            }
            let set = memory["WLStorage set"]!
            let setFlush = disk["WLStorage set + flush()"]!
            return [
                row("WLStorage set", set, "UserDefaults set", memory["UserDefaults set"]!),
                row(
                    "WLStorage set", set, "UserDefaults set + synchronize()", disk["UserDefaults set + synchronize()"]!),
                row("WLStorage set", set, "encode + Data.write(.atomic)", disk["encode + Data.write(.atomic)"]!),
                row(
                    "WLStorage set + flush()", setFlush, "UserDefaults set + synchronize()",
                    disk["UserDefaults set + synchronize()"]!),
                row(
                    "WLStorage set + flush()", setFlush, "encode + Data.write(.atomic)",
                    disk["encode + Data.write(.atomic)"]!),
            ]
        }
    }
}
