import WLStorage
import WLStorageFiles

/// Removes the temporary files of writers that crashed, with the library's own lock protocol, and returns the names
/// of those removed.
///
/// The library's ``StorageDirectory/removeAbandonedTemporaryFiles()`` does the work: under the directory's exclusive
/// `flock` it removes only regular files named as its writers name them (`NAME~` and 16 lowercase hex digits and
/// `.tmp`, `NAME` being a key's file name or a copy of one kept aside), and of those only the ones whose exclusive
/// `flock` it can take, which a writer at work holds until it has renamed its file. So a temporary file still present
/// afterwards belongs to a writer at work, and a file of any other name (`report~draft.tmp`) is never touched. The
/// file a rewrite left under its exchange's name (`NAME~…-….xchg`) is resolved from what it holds: another program's
/// value that the rewrite displaced goes back in place when the rewrite's file is still there.
func removeAbandonedTemporaryFiles(in directory: StorageDirectory) throws(WLStorageError) -> [String] {
    try directory.removeAbandonedTemporaryFiles().sorted()
}
