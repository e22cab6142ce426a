import Foundation

/// The settings and actions that concern every storage of the process, in one place.
///
/// ```swift
/// WLStorageSystem.errorHandler = { error in logger.warning("\(error)") }
/// WLStorageSystem.shutdownFlushTimeout = .seconds(5)
/// ```
///
/// Set them early, before the first storage is created, unless a setting's documentation says otherwise.
public enum WLStorageSystem {
    /// Writes the pending value of every live storage in the process, and returns when all are written.
    ///
    /// Call it from your own shutdown path when your program owns its signals (see ``flushesOnSignals``). Storages are
    /// written side by side, so a backer that hangs holds up no other storage.
    ///
    /// - Important: The calling thread waits for every write (from a backer's `write(value:)`, for none in flight).
    ///   Never call it from ``errorHandler``: a write that keeps failing would retry and report without end.
    public static func flushAll() { ShutdownHandling.flushEverything() }

    /// Whether the flush at exit or on SIGTERM, SIGINT or SIGHUP has begun: a store then retries a call that fails for
    /// a passing reason until its own timeout, as nothing would try again later.
    public static var isFlushingAtExit: Bool { Runtime.shared.shutdown.exitFlushStarted.load(ordering: .acquiring) }

    /// How long the flush at exit and on SIGTERM, SIGINT and SIGHUP lasts at most: 10 seconds unless you set it.
    ///
    /// Nothing is started once this time has passed; the flush returns and reports ``WLStorageError/Code/writeFailed``
    /// for what it left, which is lost. Set it below the time your supervisor waits before it kills the program (see
    /// <doc:ShutdownAndSignals>). ``flushAll()`` itself waits without this bound.
    public static var shutdownFlushTimeout: Duration {
        get { Runtime.shared.shutdown.state.withLock { $0.shutdownFlushTimeout } }
        set { Runtime.shared.shutdown.state.withLock { $0.shutdownFlushTimeout = max(newValue, .zero) } }
    }

    /// Whether the package flushes every storage on SIGTERM, SIGINT and SIGHUP, then ends the program by that signal.
    /// `true` by default.
    ///
    /// Set it to `false` before the first storage when your program owns its shutdown, and call ``flushAll()`` from it.
    /// A signal whose disposition was set before the first storage is left alone; normal exit flushes regardless.
    ///
    /// - Important: Set to `false` after the first storage, the signals stay handled through Dispatch, so the program
    ///   must handle them itself or they do nothing.
    public static var flushesOnSignals: Bool {
        get { Runtime.shared.shutdown.state.withLock { $0.signalHandlersWanted } }
        set {
            let started = Runtime.shared.shutdown.state.withLock { state in
                state.signalHandlersWanted = newValue
                return state.started
            }
            if started && newValue { ShutdownHandling.installSignalHandlers() }
        }
    }

    /// The largest value, in bytes of JSON, that storages read or write: 16 MiB unless you set it.
    ///
    /// A larger file is not read and never written over (the storage reports ``WLStorageError/Code/valueTooLarge``); a
    /// larger value is not written and stays pending. Set it early; it is clamped to 1 byte ... 1 GiB.
    public static var maximumValueSize: Int {
        get { ValueSizeLimit.maximum }
        set { ValueSizeLimit.maximum = newValue }
    }

    /// The most bytes a store is asked to hold or read for one value: ``maximumValueSize`` plus what encryption adds.
    public static var maximumStoredValueSize: Int { ValueSizeLimit.sealedMaximum }

    /// Reports `error` to ``errorHandler`` (or standard error): a store's error no storage call returns, as a feed's.
    public static func report(_ error: WLStorageError) {
        if let handler = errorHandler {
            handler(error)
        } else {
            _ = Array("\(error)\n".utf8).withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        }
    }

    /// Receives every error as it happens, on the thread where it happened; `nil` (the default) writes them to standard
    /// error, one line each.
    ///
    /// - Important: The handler often runs on a background thread, so it must be thread-safe and quick. It must not
    ///   call ``WLStorage/flush()`` on the storage that failed: that would retry and report again without end.
    public static var errorHandler: (@Sendable (WLStorageError) -> Void)? {
        get { Runtime.shared.errorHandler.withLock { $0 }?.handler }
        set {
            // Unwrapped, not passed through the generic `map`: that wraps the function in a conversion at every set.
            var box: ErrorHandlerBox? = if let newValue { ErrorHandlerBox(newValue) } else { nil }
            // The old handler, swapped into `box`, is released after the lock: releasing a closure can run user code.
            Runtime.shared.errorHandler.withLock { swap(&$0, &box) }
        }
    }
}
