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
    /// written side by side, so one backer that hangs keeps no other storage from being written.
    ///
    /// - Important: The calling thread waits for every write. Called from a backer's `write(value:)`, it waits for no
    ///   write in flight. Never call it from ``errorHandler``: a write that keeps failing would retry and report
    ///   without end.
    public static func flushAll() { ShutdownHandling.flushEverything() }

    /// Whether the flush at exit or on SIGTERM, SIGINT or SIGHUP has begun.
    ///
    /// A store reads it to retry a call that fails for a passing reason until its own timeout rather than give up at
    /// once, since nothing would try again after the program ends.
    public static var isFlushingAtExit: Bool { Runtime.shared.shutdown.exitFlushStarted.load(ordering: .acquiring) }

    /// How long the flush at exit and on SIGTERM, SIGINT and SIGHUP lasts at most: 10 seconds unless you set it.
    ///
    /// Nothing is started once this time has passed; the flush then returns, reports
    /// ``WLStorageError/Code/writeFailed`` for what it left, and a value not written by then is lost. It bounds all the
    /// stores' calls together, where a store's own timeout bounds each call.
    ///
    /// Set it below the time your supervisor waits before it kills the program (systemd's `TimeoutStopSec`, Docker's
    /// `stop` timeout, Kubernetes' `terminationGracePeriodSeconds`). ``flushAll()`` itself waits without this bound.
    public static var shutdownFlushTimeout: Duration {
        get { Runtime.shared.shutdown.state.withLock { $0.shutdownFlushTimeout } }
        set { Runtime.shared.shutdown.state.withLock { $0.shutdownFlushTimeout = max(newValue, .zero) } }
    }

    /// Whether the package flushes every storage on SIGTERM, SIGINT and SIGHUP, then ends the program by that
    /// signal. `true` by default.
    ///
    /// Set it to `false` before the first storage is created when your program owns its shutdown, and call
    /// ``flushAll()`` from your shutdown path. A signal whose disposition the program set before the first storage is
    /// left alone either way. Storages are flushed at normal exit whatever this says.
    ///
    /// - Important: Set to `false` after the first storage, the signals stay handled through Dispatch (which cannot
    ///   give them back to their default action), so the program must handle them itself or they do nothing.
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
    /// A larger file is not read: it is left as it is, the storage reports ``WLStorageError/Code/valueTooLarge`` and
    /// starts from its default, which it never writes over that file. A larger value is not written: it stays pending,
    /// and the error is reported. Set it early; values are clamped to 1 byte ... 1 GiB.
    public static var maximumValueSize: Int {
        get { ValueSizeLimit.maximum }
        set { ValueSizeLimit.maximum = newValue }
    }

    /// The most bytes a store is asked to hold for one value: ``maximumValueSize`` plus what an encrypted store adds.
    /// A store that bounds what it reads reads at most this.
    public static var maximumStoredValueSize: Int { ValueSizeLimit.sealedMaximum }

    /// Reports `error` to ``errorHandler``, or to standard error when there is none: for a store's errors that no call
    /// of a storage returns, such as a feed that lost its connection.
    public static func report(_ error: WLStorageError) {
        if let handler = errorHandler {
            handler(error)
        } else {
            _ = Array("\(error)\n".utf8).withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        }
    }

    /// Receives every error as it happens, on the thread where it happened.
    ///
    /// When `nil` (the default), errors are written to standard error, one line each.
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
