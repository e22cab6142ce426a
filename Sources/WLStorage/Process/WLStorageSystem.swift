/// The settings and actions that concern every storage of the process: one home for them, as a logging system has
/// one for its handlers.
///
/// ```swift
/// WLStorageSystem.errorHandler = { error in logger.warning("\(error)") }
/// WLStorageSystem.shutdownFlushTimeout = .seconds(5)
/// // … and in your own shutdown path:
/// WLStorageSystem.flushAll()
/// ```
///
/// Set them early, before the first storage is created, unless a setting's documentation says otherwise.
public enum WLStorageSystem {
    /// Writes the pending value of every live storage in the process, and returns when all are written.
    ///
    /// Call it from your own shutdown path when your program owns its signals (see ``flushesOnSignals``). It is
    /// also what the package runs at exit and on SIGTERM, SIGINT and SIGHUP. Storages with nothing pending cost
    /// nothing, so calling it again is cheap.
    ///
    /// The storages are written side by side, by the calling thread and threads of the package, so that one backer
    /// that hangs (a network store that stopped answering) keeps no other storage from being written; the call
    /// returns when every write has ended.
    ///
    /// - Important: The calling thread waits for every write. Called from a backer's `write(value:)`, it writes the
    ///   storages that are idle and waits for no write in flight (which might be waiting for this one). Never call
    ///   it from ``errorHandler``, where a write that keeps failing would retry and report again without end.
    public static func flushAll() {
        ShutdownHandling.flushEverything()
    }

    /// Whether the flush at exit or on SIGTERM, SIGINT or SIGHUP has begun.
    ///
    /// A store reads it to be patient then: a call that fails for a reason that passes (a server restarting or failing
    /// over refuses connections for a moment) is tried again until the store's own timeout, rather than given up at
    /// once, since the program ends after the flush and nothing would try again later. The PostgreSQL store does so.
    public static var isFlushingAtExit: Bool {
        Runtime.shared.shutdown.exitFlushStarted.load(ordering: .acquiring)
    }

    /// How long the flush at exit and on SIGTERM, SIGINT and SIGHUP lasts at most, whatever the backers and stores do:
    /// 10 seconds unless you set it.
    ///
    /// The flush writes the storages side by side (the storages of one store in one batch), and starts nothing once
    /// this time has passed. It then returns even while writes are still running, reports
    /// ``WLStorageError/Code/writeFailed`` for what it left, and the program ends: a value not written by then is
    /// lost, as with `kill -9`, and what a store committed stays committed (a PostgreSQL store commits a batch in
    /// chunks, each kept once committed). A store's own timeout bounds each of its calls; this bounds them all, so
    /// that 40 stores of a server that does not answer hold up the exit for this time, not 40 timeouts.
    ///
    /// Set it below the time your supervisor waits before it kills the program (systemd's `TimeoutStopSec`, 90 s by
    /// default; Docker's `stop` timeout, 10 s; Kubernetes' `terminationGracePeriodSeconds`, 30 s), and above the
    /// timeout of your stores when you can. ``flushAll()`` itself waits for every write, without this bound.
    public static var shutdownFlushTimeout: Duration {
        get { ShutdownHandling.shutdownFlushTimeout }
        set { ShutdownHandling.shutdownFlushTimeout = newValue }
    }

    /// Whether the package flushes every storage on SIGTERM, SIGINT and SIGHUP, then ends the program by that
    /// signal. `true` by default.
    ///
    /// Set it to `false` before the first storage is created when your program owns its shutdown (for example
    /// with a service lifecycle library), and call ``flushAll()`` from your shutdown path. A signal whose
    /// disposition the program set before the first storage (ignored, or a handler) is left alone either way.
    /// Storages are flushed at normal exit (`exit()`, a return from `main`) whatever this says.
    ///
    /// It can be turned off and on again at any time; set to `true` after being `false` from the start, it installs
    /// the handlers then.
    ///
    /// - Important: Set to `false` after the first storage, the package stops acting on these signals, but the
    ///   signals stay handled through Dispatch (libdispatch cannot give a signal back to its default action and take
    ///   it again later). The program must then handle them itself, with a Dispatch signal source of its own or
    ///   `sigaction`; if it does not, they do nothing. To keep the default action, set it to `false` before the
    ///   first storage is created.
    public static var flushesOnSignals: Bool {
        get { ShutdownHandling.signalHandlersWanted }
        set { ShutdownHandling.signalHandlersWanted = newValue }
    }

    /// The largest value, in bytes of JSON, that storages read or write: 16 MiB unless you set it.
    ///
    /// Values live in memory and files are read whole, so a file of any size would otherwise be allocated in full (a
    /// sparse file of a terabyte uses no disk). A file larger than this is not read: it is left as it is, and the
    /// storage reports ``WLStorageError/Code/valueTooLarge`` and starts from its default, which it never writes over
    /// that file. A value that encodes to more than this is not written: it stays pending, and the error is reported.
    ///
    /// It applies to the whole process, and to the command-line tool's reads. Set it early, before the storages that
    /// need a larger value are created. Values below 1 count as 1, and above 1 GiB as 1 GiB.
    public static var maximumValueSize: Int {
        get { ValueSizeLimit.maximum }
        set { ValueSizeLimit.maximum = newValue }
    }

    /// The most bytes a store is asked to hold for one value: ``maximumValueSize``, and what an encrypted store over it
    /// adds to each value it seals. A store that bounds what it reads (so that a value of any size stored by someone
    /// else is not allocated in full) reads at most this.
    public static var maximumStoredValueSize: Int { ValueSizeLimit.sealedMaximum }

    /// Reports `error` as the package reports its own: to ``errorHandler``, or to standard error when there is none.
    /// For a store's errors that no call of a storage returns, such as a feed that lost its connection.
    public static func report(_ error: WLStorageError) {
        WLStorageError.report(error)
    }

    /// Receives every error as it happens, on the thread where it happened.
    ///
    /// When `nil` (the default), errors are written to standard error, one line each. Set it once, early,
    /// to route errors to your logger.
    ///
    /// - Important: The handler runs on whatever thread met the error, often a background thread that writes, so it
    ///   must be thread-safe, and should be quick. It must not call back into the storage that failed: a
    ///   ``WLStorage/flush()`` there would retry a failing write and report it again, without end.
    public static var errorHandler: (@Sendable (WLStorageError) -> Void)? {
        get { WLStorageError.currentHandler }
        set { WLStorageError.currentHandler = newValue }
    }
}
