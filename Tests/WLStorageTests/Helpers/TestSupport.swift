// The helpers both test targets share (temporary directories, polling, child processes and their output, the
// `.capturingOutput` trait) live in the WLStorageTestSupport module; every file of this target sees them.
@_exported import WLStorageTestSupport
