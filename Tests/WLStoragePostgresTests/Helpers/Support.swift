import Foundation
import Testing
import WLStorage

@testable import WLStoragePostgres

/// How long a poll may go on: `seconds` of the poller's own time. A gap between two polls longer than 100 ms (the
/// poller was not scheduled: the machine or the test runner's pool was busy) counts as 100 ms, since what the poll
/// waits for could not run either. A wait still ends after ten times `seconds` on the wall clock.
struct Patience {
    private let seconds: Double
    private let start = ContinuousClock.now
    private var lastPoll = ContinuousClock.now
    private var spent: Duration = .zero

    init(seconds: Double) {
        self.seconds = seconds
    }

    /// Counts the time since the last poll; true once the wait has run out.
    mutating func hasRunOut() -> Bool {
        let now = ContinuousClock.now
        spent += min(now - lastPoll, .milliseconds(100))
        lastPoll = now
        return spent >= .seconds(seconds) || now - start >= .seconds(seconds * 10)
    }
}

/// Polls `condition` every 10 ms until it holds or `timeout` seconds of patience pass. Returns whether it held.
func eventually(timeout: Double = 20, _ condition: () throws -> Bool) rethrows -> Bool {
    var patience = Patience(seconds: timeout)
    while !patience.hasRunOut() {
        if try condition() { return true }
        usleep(10_000)
    }
    return try condition()
}

/// A namespace no other test uses.
func uniqueNamespace(_ name: String = #function) -> String {
    "\(name)-\(UUID().uuidString)"
}

/// The bytes of `text`.
func bytes(_ text: String) -> Data {
    Data(text.utf8)
}

/// Records what a store's feed reports.
final class FeedRecorder: Sendable {
    private final class Log: Sendable {
        let changes = Lock<[WLStorageStoreChange]>([])
    }

    private let log = Log()
    private let observation: WLStorageObservation?

    /// Starts observing `store`, and waits until its listener listens (it then reports `.everything`).
    init(_ store: WLStoragePostgresStore, waitForListening: Bool = true) throws {
        let log = self.log
        observation = store.observeChanges { change in log.changes.withLock { $0.append(change) } }
        if waitForListening {
            try #require(waitFor(.everything), "the listener did not start listening")
        }
    }

    /// Everything reported so far, in order.
    var reported: [WLStorageStoreChange] { log.changes.withLock { $0 } }

    /// Forgets what was reported so far.
    func clear() {
        log.changes.withLock { $0.removeAll() }
    }

    /// Waits until `change` is reported. Returns whether it was, within `timeout` seconds.
    func waitFor(_ change: WLStorageStoreChange, timeout: Double = 20) -> Bool {
        eventually(timeout: timeout) { reported.contains(change) }
    }

    /// Stops observing.
    func cancel() {
        observation?.cancel()
    }
}

/// A quiet `WLStorageError.handler` for the tests that create storages, installed before their first one: it keeps the
/// errors that storages report (the tests provoke them on purpose) instead of printing them, so that a passing run
/// prints none.
///
/// `swift test` runs every test target in one process, and the WLStorage tests install a recorder of their own, on
/// which some of their tests depend: a handler already in place is left alone. (The PostgreSQL tests that create
/// storages start after a server does, well after the WLStorage tests' first.)
enum ReportedErrors {
    private static let recorded = Lock<[WLStorageError]>([])
    private static let installation: Void = {
        guard WLStorageError.handler == nil else { return }
        WLStorageError.handler = { error in
            recorded.withLock { errors in
                if errors.count >= 10_000 { errors.removeFirst(5_000) }
                errors.append(error)
            }
        }
    }()

    /// Installs the recording handler, the first time only.
    static func install() {
        installation
    }
}

/// A connection of the test's own, to run SQL as another program would.
func adminConnection(_ url: String) throws -> PostgresConnection {
    let connection = PostgresConnection(settings: try PostgresSettings(url: url, timeout: .seconds(10)))
    try connection.connect(deadline: .now + .seconds(10))
    return connection
}

/// Runs `sql` with text `parameters`, and returns the first column of its first row as text.
@discardableResult
func sqlValue(_ connection: PostgresConnection, _ sql: String, _ parameters: [String] = []) throws -> String? {
    let rows = try connection.query(sql, parameters.map { .text($0) }, deadline: .now + .seconds(30))
    return rows.first?.first?.flatMap { $0 }.map { String(decoding: $0, as: UTF8.self) }
}

extension PostgresCluster {
    /// A libpq URL of `database` on the server, as `user`, with `options` (libpq's `options`, unescaped).
    func connectionURL(database: String = "postgres", user: String = "postgres", options: String? = nil) -> String {
        var url = "postgresql:///\(database)?host=\(directory.path)&port=\(port)&user=\(user)"
        if let options {
            url += "&options=" + (options.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? options)
        }
        return url
    }
}
