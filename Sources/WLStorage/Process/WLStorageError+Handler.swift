import WLStorageCore

extension WLStorageError {
    /// Receives every error as it happens: see ``WLStorageSystem/errorHandler``.
    @available(*, deprecated, renamed: "WLStorageSystem.errorHandler")
    public static var handler: (@Sendable (WLStorageError) -> Void)? {
        get { WLStorageSystem.errorHandler }
        set { WLStorageSystem.errorHandler = newValue }
    }
}

/// The error handler as the runtime holds it (see ``Runtime/errorHandler``).
final class ErrorHandlerBox: Sendable {
    let handler: @Sendable (WLStorageError) -> Void

    init(_ handler: @escaping @Sendable (WLStorageError) -> Void) { self.handler = handler }
}
