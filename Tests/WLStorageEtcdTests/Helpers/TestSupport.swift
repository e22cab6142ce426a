// The helpers the test targets share (temporary directories, polling, the store contract, recorded errors) live in
// the WLStorageTestSupport module; every file of this target sees them.
@_exported import WLStorageTestSupport
