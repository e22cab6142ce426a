import Foundation
import Synchronization

/// The backers that keep a stored value's bytes from before its type changed, to remove once the value is written in
/// the current shape. A table, not a per-backer flag: it happens once in a type's life.
enum KeptOriginals {
    private static let backers = Lock(Set<ObjectIdentifier>())
    private static let count = Atomic<Int>(0)

    /// Whether any backer keeps bytes: one atomic load, before a write looks further.
    static var any: Bool { count.load(ordering: .relaxed) > 0 }

    static func keep(_ backer: AnyObject) {
        backers.withLock { backers in
            if backers.insert(ObjectIdentifier(backer)).inserted { count.add(1, ordering: .relaxed) }
        }
    }

    /// Whether `backer` kept bytes; it no longer counts as keeping them.
    static func take(_ backer: AnyObject) -> Bool {
        backers.withLock { backers in
            guard backers.remove(ObjectIdentifier(backer)) != nil else { return false }
            count.subtract(1, ordering: .relaxed)
            return true
        }
    }

    /// After `backer` writes in the current shape, removes the bytes it kept (retried after its next write on failure).
    static func settle(_ backer: AnyObject, remove: () throws -> Void) {
        guard any, take(backer) else { return }
        do {
            try remove()
        } catch {
            keep(backer)
        }
    }

    /// Called as a backer goes: its identifier may be reused by another object.
    static func forget(_ backer: AnyObject) {
        guard any else { return }
        _ = take(backer)
    }
}
