/// A storage's default, made at most once and only when needed. The maker is user code, so it runs outside every
/// lock: two threads may both make it; the first wins, the other's value is released after the lock.
final class LazyDefault<T: Sendable>: Sendable {
    private let made = Lock<T?>(nil)
    private let make: @Sendable () -> T

    init(_ make: @escaping @Sendable () -> T) { self.make = make }

    /// The default, made now if it has not been. Never call it under a lock of the package.
    var value: T {
        if let value = made.withLock({ $0 }) { return value }
        let value = make()
        return made.withLock { made in
            if let earlier = made { return earlier }
            made = value
            return value
        }
    }

    /// The default when it has been made, else `nil`: what code under a lock may use.
    var ifMade: T? { made.withLock { $0 } }
}

extension JobOutcome {
    /// Whether finishing the job may return to the default: it is made before the cell's lock is taken.
    var mayNeedDefault: Bool {
        switch self {
        case .read(.absent), .read(.movedAside), .checked(.removed): true
        default: false
        }
    }
}

/// A cell's default: made already (held inline, no allocation), or a typed key's, made when first needed.
enum CellDefault<T: Sendable>: Sendable {
    case made(T)
    case lazy(LazyDefault<T>)

    var value: T {
        switch self {
        case .made(let value): value
        case .lazy(let lazy): lazy.value
        }
    }

    var ifMade: T? {
        switch self {
        case .made(let value): value
        case .lazy(let lazy): lazy.ifMade
        }
    }
}
