// `mount` and `umount` run as child processes, for the tests of bind mounts and of directories mounted over.
import Foundation

/// Runs `/bin/mount` or `/bin/umount` with `arguments`; returns whether it succeeded.
func runMount(_ tool: String, _ arguments: [String]) -> Bool {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/" + tool)
    process.arguments = arguments
    guard (try? process.run()) != nil else { return false }
    return process.waitForEnd()?.status == 0
}
