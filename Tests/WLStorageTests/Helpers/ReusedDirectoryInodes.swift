// A directory removed under a live storage, and a new directory elsewhere that gets the removed one's inode: the
// setup of the tests of a reused inode, and whether the file system of the tests' temporary directories reuses inodes
// at all (tmpfs, for one, never does: those tests are skipped there, with the reason, rather than passed unchecked).
import Foundation
import Testing

@testable import WLStorage

/// Whether the file system of the tests' temporary directories gives a removed directory's inode to a directory made
/// after it.
enum InodeReuse {
    /// How many directories are made and removed before giving up on seeing an inode reused. Other tests making files
    /// meanwhile can take a freed inode first; a round is cheap.
    static let rounds = 200

    /// Probed once, with plain directories (no storage): a directory is made, removed, and another made, until the
    /// other has the removed one's device and inode number, up to ``rounds`` times.
    static let happensInTemporaryDirectories: Bool = {
        var template = Array((NSTemporaryDirectory() + "/wlstorage-inode-reuse-XXXXXX").utf8CString)
        guard
            let root = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!).map { String(cString: $0) } })
        else { return false }
        defer { try? FileManager.default.removeItem(atPath: root) }
        for round in 0..<rounds {
            let old = root + "/old\(round)"
            let new = root + "/new\(round)"
            guard mkdir(old, 0o700) == 0, let removed = identity(ofPath: old), rmdir(old) == 0,
                mkdir(new, 0o700) == 0
            else { return false }
            if identity(ofPath: new).map({ $0 == removed }) == true { return true }
        }
        return false
    }()

    static let notSeenReason: Comment = Comment(
        rawValue: "the file system of \(NSTemporaryDirectory()) gave no removed directory's inode to a new directory in"
            + " \(rounds) rounds (tmpfs never does), so the case cannot be made there")
}

/// A directory removed while a storage of it lived, and a new directory, made after, that has its inode.
struct ReusedDirectoryInode {
    /// The removed directory's path: nothing stands there now.
    let oldPath: String
    /// A storage of the key `k` at ``oldPath``, set to "old value" and flushed before the directory was removed.
    let oldStorage: WLStorage<String>
    /// The new directory: the removed one's device and inode number, at another path.
    let newPath: String
}

/// Makes a directory `old<n>` in `root` with a storage of `k` there, set and flushed, removes the directory while the
/// storage lives, and makes a directory `new<n>`; again, with the next `n`, until the new directory has the removed
/// one's inode, up to ``InodeReuse/rounds`` times.
///
/// For the tests enabled by ``InodeReuse/happensInTemporaryDirectories``: where the file system reuses inodes, not
/// getting one reused in all those rounds is a failure (an issue is recorded, and the test ends), not a case that
/// did not arise.
func directoryReusingARemovedOnesInode(in root: URL, sourceLocation: SourceLocation = #_sourceLocation) throws
    -> ReusedDirectoryInode
{
    var reused: ReusedDirectoryInode?
    for round in 0..<InodeReuse.rounds where reused == nil {
        let old = root.path + "/old\(round)"
        try makeDirectory(old)
        let oldStorage = storage("k", atPath: old)
        oldStorage.wrappedValue = "old value"
        oldStorage.flush()
        let inode = try #require(identity(ofPath: old), sourceLocation: sourceLocation)
        try FileManager.default.removeItem(atPath: old)
        let new = root.path + "/new\(round)"
        try makeDirectory(new)
        if identity(ofPath: new).map({ $0 == inode }) == true {
            reused = ReusedDirectoryInode(oldPath: old, oldStorage: oldStorage, newPath: new)
        }
    }
    let notReused = Comment(
        rawValue: "no new directory got a removed one's inode in \(InodeReuse.rounds) rounds, though this file system"
            + " reuses inodes (does the removed directory's storage keep its inode from being freed?)")
    return try #require(reused, notReused, sourceLocation: sourceLocation)
}
