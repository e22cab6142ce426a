// What the tests of faults around the PostgreSQL store share: SQL run as another program would, server processes
// terminated, and values shared between threads.
import Foundation
import Testing
import WLStorage

@testable import WLStoragePostgres

/// A suite of tests of faults: its tests reach these helpers as `Self.…`.
protocol PostgresFaultSuite {}

extension PostgresFaultSuite {
    /// A connection of the test's own, to run SQL as another program would.
    static func admin(_ url: String) throws -> PostgresConnection {
        try adminConnection(url)
    }

    @discardableResult
    static func sql(_ connection: PostgresConnection, _ text: String) throws -> [[Data?]] {
        try connection.query(text, deadline: .now + .seconds(10))
    }

    /// Terminates the server processes of `application` whose last statement matches `condition`; returns how many.
    static func terminate(
        _ connection: PostgresConnection, application: String, where condition: String
    ) throws -> Int {
        let rows = try sql(
            connection,
            """
            SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '\(application)' \
            AND pid <> pg_backend_pid() AND \(condition)
            """)
        return rows.count
    }

    /// Waits until no server process of `application` whose last statement matches `condition` is left: a terminated
    /// one ends when the server gets to it. Returns whether none was, within 30 s.
    static func waitUntilGone(
        _ connection: PostgresConnection, application: String, where condition: String
    ) throws -> Bool {
        try eventuallyThrowing(timeout: 30) {
            try sql(
                connection,
                """
                SELECT pid FROM pg_stat_activity WHERE application_name = '\(application)' \
                AND pid <> pg_backend_pid() AND \(condition)
                """
            ).isEmpty
        }
    }

    /// Runs `body` on a thread of its own; returns whether it ended within `seconds`.
    static func completes(within seconds: Double, _ body: @escaping @Sendable () -> Void) -> Bool {
        finishes(within: seconds, body)
    }
}

/// Counts calls, safely from any thread.
final class Counter: Sendable {
    let value = Shared(0)
    func increment() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}

/// Holds an observation, so that its own handler can cancel it.
final class ObservationBox: Sendable {
    let observation = Shared<WLStorageSubscription?>(nil)
}

/// A value shared between threads.
final class Shared<Value: Sendable>: Sendable {
    private let lock: Lock<Value>

    init(_ value: Value) {
        lock = Lock(value)
    }

    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R {
        lock.withLock { body(&$0) }
    }
}

/// A flag that is set once.
final class StopFlag: Sendable {
    private let flag = Shared(false)
    var isSet: Bool { flag.withLock { $0 } }
    func set() { flag.withLock { $0 = true } }
}
