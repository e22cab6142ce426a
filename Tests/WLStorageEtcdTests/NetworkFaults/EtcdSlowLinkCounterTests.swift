import Foundation
import Testing
import WLStorage
import WLStorageEtcd
import WLStorageTestSupport

/// Three programs increment one counter with `update` through a link 10 ms away from their only member, which cuts
/// every connection, goes silent and comes back (forwarding late what it held), and whose member is killed and started
/// again: the counter ends holding exactly the number of updates that returned with no error (an update reported as of
/// unknown outcome may count once), each of which stored a value of its own.
@Suite(.onTestThreads, .enabled(if: EtcdServer.shouldRun, EtcdServer.skipReason))
struct EtcdSlowLinkCounterTests {
    @Test func anExactlyOnceCounterEndsExactThroughALinkThatIsCutSilencedAndWhoseMemberIsKilled() throws {
        let server = try EtcdServer.started()
        defer { server.remove() }
        let proxy = try TCPProxy(to: server.clientPort)
        defer { proxy.stop() }
        proxy.delay(.milliseconds(10))
        let namespace = uniqueNamespace()
        let programs = try (0..<3).map { _ in
            try CounterProgram(endpoints: [proxy.endpoint], namespace: namespace, key: "count")
        }
        defer { for program in programs { program.kill() } }
        func progress(_ step: String) throws {
            let counts = programs.map { $0.acknowledged.count }
            for (program, count) in zip(programs, counts) {
                try #require(
                    eventually(timeout: 120) { program.acknowledged.count >= count + 10 },
                    "no progress \(step): \(programs.map(\.printedErrors))")
            }
        }
        for program in programs { program.send("go") }
        try progress("at the start")
        proxy.cutAll()
        try progress("after a cut")
        let errors = programs.map(\.printedErrors.count)
        proxy.set(.holding)
        // Silent until a program says so (a call's timeout, or the feed's probe), then forwarding what it held.
        _ = eventually(timeout: 120) { zip(programs, errors).contains { $0.printedErrors.count > $1 } }
        proxy.set(.forwarding)
        try progress("after the link was silent")
        server.stop()
        try server.start()
        try progress("after the member was killed")
        proxy.cutAll()
        try progress("after a second cut")
        for program in programs { program.send("stop") }
        for program in programs {
            #expect(program.waitFor("stopped", timeout: 120))
            let end = program.waitForExit(timeout: 60)
            #expect(end?.reason == .exit && end?.status == 0, "\(program.printedErrors)")
        }
        let store = try WLStorageEtcdStore(endpoints: [server.endpoint], namespace: namespace)
        let total = try #require(try store.read(key: "count").flatMap { Int(String(decoding: $0, as: UTF8.self)) })
        let values = programs.flatMap(\.acknowledged)
        let unknown = programs.map(\.reported.count).reduce(0, +)
        #expect(
            (values.count...values.count + unknown).contains(total),
            "\(values.count) acknowledged, \(unknown) reported, the counter holds \(total)")
        let twice = Dictionary(grouping: values, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
        #expect(twice.isEmpty, "values stored by two acknowledged updates: \(twice)")
    }
}
