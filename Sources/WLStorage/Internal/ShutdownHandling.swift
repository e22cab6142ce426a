/// Flushing at shutdown. Filled in by the shutdown work; for now only the registry's flush.
enum ShutdownHandling {
    static func storageCreated() {}
}

extension WLStorage where T == Never {
    /// Writes the pending value of every live storage in the process, and returns when all are written.
    public static func flushAll() {
        for cell in StorageRegistry.shared.liveCells() {
            cell.flush()
        }
    }
}
