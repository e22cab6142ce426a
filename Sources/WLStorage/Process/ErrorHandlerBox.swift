import WLStorageCore

/// The error handler as the runtime holds it (see ``Runtime/errorHandler``).
final class ErrorHandlerBox: Sendable {
    let handler: @Sendable (WLStorageError) -> Void

    init(_ handler: @escaping @Sendable (WLStorageError) -> Void) { self.handler = handler }
}
