// A symlink pointed at a new target in one step, for the tests of symlinks on the way to a storage directory.
import Foundation

/// Points the symlink `link` at `target` atomically, as `ln -sfn` and `mv -T` do in deployments.
func retarget(_ link: URL, to target: String) throws {
    let temporary = link.deletingLastPathComponent().appendingPathComponent(
        ".link-\(UInt32.random(in: 0...UInt32.max))")
    guard symlink(target, temporary.path) == 0 else { throw SystemCallFailed(errno: errno) }
    guard rename(temporary.path, link.path) == 0 else { throw SystemCallFailed(errno: errno) }
}
