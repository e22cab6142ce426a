import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A file that a child process writes its standard output or error to, and the test reads at any time.
///
/// A file rather than a pipe: what the child wrote before it ended is all there as soon as it has ended. A pipe read by
/// a `readabilityHandler` delivers it later, on a Dispatch thread of its own, so a test that reads the output as soon
/// as it sees the child's end can miss its last lines on a busy machine (a `watch` seen to end after printing
/// `(missing)` while the text still lacked it); and a pipe's end of file can be held off by another test's child that
/// inherited it while being started. The file is removed at once; the open descriptor keeps it until it is closed.
public final class CapturedOutput: Sendable {
    private let descriptor: Int32

    public init() throws {
        var template = Array((NSTemporaryDirectory() + "/wlstorage-child-output-XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        // Only the child started with it as its output needs it; another test's child inheriting it is harmless.
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }

    /// The descriptor, for the child's standard output or error; the child gets a copy of it.
    public var handle: FileHandle {
        FileHandle(fileDescriptor: descriptor, closeOnDealloc: false)
    }

    /// Everything written so far.
    public var text: String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(bytes.count)) }
            if count > 0 {
                bytes += chunk[..<count]
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
