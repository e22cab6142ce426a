import Foundation
import WLStorage

/// A program of the fleet: storages of the fleet's keys, of one version of the type, in a store shared with other
/// programs, driven by one command a line on standard input, each answered by one line on standard output.
///
/// Commands (`KEY` one of the fleet's keys, `STAMP` a positive number):
///
/// - `open KEY`: creates the storage; answers `opened VALUE ERROR`.
/// - `set KEY STAMP`, `update KEY STAMP`: stores the value made from `STAMP` (by a set, or by `update`); answers
///   `set VALUE` or `updated PENDING ERROR VALUE`.
/// - `flush KEY`: answers `flushed PENDING ERROR VALUE` once `flush()` has returned.
/// - `read KEY`: answers `value VALUE ERROR`.
/// - `close KEY`: releases the storage (its `deinit` hands what is pending to the package); answers `closed`.
/// - `exit`: exits normally, which flushes every storage; no answer.
///
/// `VALUE` is the storage's value as JSON with sorted keys (no spaces), `PENDING` is `0` or `1`
/// (`hasPendingChanges`), and `ERROR` the code of `lastError`, or `none`. Every error reported to
/// `WLStorageSystem.errorHandler` is printed on standard error as `error CODE MESSAGE`.
public enum FleetProgram {
    /// Runs the program until `exit` or the end of its input, then exits.
    public static func run<Store: WLStorageStore>(version: FleetVersion, flushInterval: Int?, store: Store) -> Never {
        WLStorageSystem.errorHandler = { error in
            let line = "error \(error.code.name) \(error.message)".replacingOccurrences(of: "\n", with: " ")
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
        var storages: [String: any FleetProgramStorage] = [:]
        while let line = readLine() {
            let words = line.split(separator: " ").map(String.init)
            guard let command = words.first else { continue }
            let key = words.count > 1 ? words[1] : ""
            let stamp = words.count > 2 ? Int(words[2]) : nil
            switch (command, storages[key]) {
            case ("open", nil):
                let storage: any FleetProgramStorage =
                    switch version {
                    case .v1: ProgramStorage<FleetValueV1>(key: key, flushInterval: flushInterval, store: store)
                    case .v2: ProgramStorage<FleetValueV2>(key: key, flushInterval: flushInterval, store: store)
                    case .v3: ProgramStorage<FleetValueV3>(key: key, flushInterval: flushInterval, store: store)
                    }
                storages[key] = storage
                answer("opened \(storage.valueAndError)")
            case ("set", let storage?) where stamp != nil:
                storage.set(stamp!)
                answer("set \(storage.encodedValue)")
            case ("update", let storage?) where stamp != nil:
                storage.update(stamp!)
                answer("updated \(storage.pendingErrorAndValue)")
            case ("flush", let storage?):
                storage.flush()
                answer("flushed \(storage.pendingErrorAndValue)")
            case ("read", let storage?):
                answer("value \(storage.valueAndError)")
            case ("close", _?):
                storages[key] = nil
                answer("closed")
            case ("exit", _):
                exit(0)
            default:
                answer("refused \(line)")
            }
        }
        exit(0)
    }

    /// Writes one line straight to the descriptor, unbuffered.
    private static func answer(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

/// A storage of the program, of any version.
protocol FleetProgramStorage: AnyObject {
    var encodedValue: String { get }
    var errorCode: String { get }
    var pending: Int { get }
    func set(_ stamp: Int)
    func update(_ stamp: Int)
    func flush()
}

extension FleetProgramStorage {
    /// The value, whether a change is pending, and the code of `lastError`, as they stood together: an outside change
    /// loaded between reading one and another (which clears the error the opening reported), or a retried write made
    /// meanwhile, would pair a value before it with an error or pending state after it.
    private var consistent: (value: String, pending: Int, error: String) {
        while true {
            let (error, pending) = (errorCode, self.pending)
            let value = encodedValue
            if errorCode == error, self.pending == pending { return (value, pending, error) }
        }
    }

    /// `VALUE ERROR`, as they stood together.
    var valueAndError: String {
        let (value, _, error) = consistent
        return "\(value) \(error)"
    }

    /// `PENDING ERROR VALUE`, as they stood together.
    var pendingErrorAndValue: String {
        let (value, pending, error) = consistent
        return "\(pending) \(error) \(value)"
    }
}

private final class ProgramStorage<Value: FleetValue>: FleetProgramStorage {
    let storage: WLStorage<Value>

    init<Store: WLStorageStore>(key: String, flushInterval: Int?, store: Store) {
        storage = WLStorage(
            key: key, defaultValueClosure: { Value.defaultValue }, flushInterval: flushInterval, store: store,
            migrations: Value.migrations)
    }

    var encodedValue: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(storage.wrappedValue)).map { String(decoding: $0, as: UTF8.self) } ?? "?"
    }

    var errorCode: String { storage.lastError?.code.name ?? "none" }
    var pending: Int { storage.hasPendingChanges ? 1 : 0 }

    func set(_ stamp: Int) { storage.wrappedValue = Value.made(by: stamp) }
    func update(_ stamp: Int) { storage.update { $0 = Value.made(by: stamp) } }
    func flush() { storage.flush() }
}
