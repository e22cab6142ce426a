import Foundation
import Testing
import WLStorage

@testable import WLStoragePostgres

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
        /// How many times ``WLStorageStoreChange/everything`` was reported after the first time; not cleared.
        let reconnections = Lock(-1)
    }

    private let log = Log()
    private let observation: WLStorageSubscription?

    /// Starts observing `store`, and waits until its listener listens (it then reports `.everything`).
    init(_ store: WLStoragePostgresStore, waitForListening: Bool = true) throws {
        let log = self.log
        observation = store.observeChanges { change in
            if change == .everything { log.reconnections.withLock { $0 += 1 } }
            log.changes.withLock { $0.append(change) }
        }
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
    func waitFor(_ change: WLStorageStoreChange, timeout: Double = 30) -> Bool {
        eventually(timeout: timeout) { reported.contains(change) }
    }

    /// Waits until a change of `key` is reported, or an ``WLStorageStoreChange/everything`` after the one that
    /// started the feed (the listener reconnected: notifications sent meanwhile were lost, and every key is to be read
    /// again). Returns whether one was, within `timeout` seconds.
    func waitForChange(of key: String, timeout: Double = 30) -> Bool {
        eventually(timeout: timeout) { reported.contains(.key(key)) || log.reconnections.withLock { $0 } > 0 }
    }

    /// Stops observing.
    func cancel() {
        observation?.cancel()
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

/// Polls `condition`, which may throw (a query), every 10 ms until it holds or `timeout` seconds of patience pass;
/// returns whether it held, and throws what it throws.
func eventuallyThrowing(timeout: Double = 30, _ condition: () throws -> Bool) throws -> Bool {
    var patience = Patience(seconds: timeout)
    while !patience.hasRunOut() {
        if try condition() { return true }
        usleep(10_000)
    }
    return try condition()
}

/// The error `call` throws once it is not a timeout: the server's refusal of a connection, which a loaded machine may
/// take longer than any timeout to give, so a call that timed out is made again (for up to 5 minutes). `nil` when the
/// call succeeds, or only times out.
func serverRefusal(_ call: () throws -> Void) -> WLStorageError? {
    var patience = Patience(seconds: 300)
    while true {
        do {
            try call()
            return nil
        } catch let error as WLStorageError where (error.underlying as? PostgresError)?.kind == .timedOut {
            if patience.hasRunOut() { return nil }
        } catch {
            return error as? WLStorageError
        }
    }
}
