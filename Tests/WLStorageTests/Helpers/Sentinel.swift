import Foundation

/// A file that a key or a path escaping a storage directory would reach, in the test's own temporary folder: a test
/// that probes an escape points at it, never at a real file of the system, and checks afterwards that it is unchanged.
struct Sentinel {
    let url: URL
    let contents: Data
    private let identity: [Int]

    /// Makes the file `outside/sentinel` in `folder` (the test's temporary folder), with the folder `outside`.
    init(in folder: URL) throws {
        let outside = folder.appendingPathComponent("outside", isDirectory: true)
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        url = outside.appendingPathComponent("sentinel")
        contents = Data("sentinel: nothing may write here\n".utf8)
        try contents.write(to: url)
        identity = try Self.identity(of: url)
    }

    /// The absolute path of the file.
    var path: String { url.path }

    /// The absolute path of the folder that holds the file.
    var folder: URL { url.deletingLastPathComponent() }

    /// Whether the file is the one made, as it was made: same bytes, same inode, same modification time, and alone in
    /// its folder (a temporary file left beside it is a write that failed half way).
    var isUnchanged: Bool {
        guard let now = try? Self.identity(of: url), now == identity,
            FileManager.default.contents(atPath: url.path) == contents
        else { return false }
        return entries(of: folder) == [url.lastPathComponent]
    }

    private static func identity(of url: URL) throws -> [Int] {
        var status = stat()
        guard lstat(url.path, &status) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return [
            Int(status.st_dev), Int(status.st_ino), Int(status.st_mode), Int(status.st_size),
            Int(status.st_mtim.tv_sec), Int(status.st_mtim.tv_nsec),
        ]
    }
}
