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

    /// Makes a directory at `path` and removes it, then makes another beside it: whether it got the removed one's
    /// inode. Both are removed.
    static func reusesOnce(in path: String) -> Bool {
        guard mkdir(path, 0o700) == 0 else { return false }
        let removed = identity(ofPath: path)
        guard rmdir(path) == 0, mkdir(path + "-again", 0o700) == 0 else { return false }
        defer { rmdir(path + "-again") }
        guard let removed, let made = identity(ofPath: path + "-again") else { return false }
        return made == removed
    }

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
/// For the tests enabled by ``InodeReuse/happensInTemporaryDirectories``. Other programs making files can take every
/// freed inode first on a busy machine, so each round that misses also makes and removes a plain directory: when plain
/// directories got a removed one's inode in several rounds and a storage's never did, the storages keep their inodes
/// from being freed, and an issue is recorded; when neither did, the case could not be made now, and the test is
/// cancelled, saying so.
func directoryReusingARemovedOnesInode(in root: URL, sourceLocation: SourceLocation = #_sourceLocation) throws
    -> ReusedDirectoryInode
{
    var plainReuses = 0
    for round in 0..<InodeReuse.rounds {
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
            return ReusedDirectoryInode(oldPath: old, oldStorage: oldStorage, newPath: new)
        }
        if InodeReuse.reusesOnce(in: root.path + "/plain\(round)") { plainReuses += 1 }
    }
    guard plainReuses < 3 else {
        let kept = Comment(
            rawValue: "no new directory got the inode of a removed one that a storage used in \(InodeReuse.rounds)"
                + " rounds, while plain directories did in \(plainReuses): does the storage keep its inode from being"
                + " freed?")
        return try #require(nil as ReusedDirectoryInode?, kept, sourceLocation: sourceLocation)
    }
    try Test.cancel(
        Comment(
            rawValue: "other programs took every freed inode first in \(InodeReuse.rounds) rounds (the machine is busy"
                + " making files): the case could not be made now"),
        sourceLocation: sourceLocation)
}
