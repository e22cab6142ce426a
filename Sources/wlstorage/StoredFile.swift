import Foundation
import WLStorage
import WLStorageFiles

/// Reading the files of a storage directory as the library would, never more than the library's maximum value size.
///
/// A file is opened by its name's bytes (`O_RDONLY|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC|O_NOCTTY`) and checked with
/// `fstat` before a byte is read: a symlink, a directory or a special file is refused, and a file larger than the
/// limit is reported as too large without being read. A file that grows while it is read stops being read one byte
/// past the limit. So a sparse file of a terabyte costs no more than a small one.
enum StoredFile {
    /// The largest file the library reads, in bytes.
    static var limit: Int { ValueSizeLimit.maximum }

    /// What a file holds, read whole.
    enum Contents {
        case bytes(Data)
        /// The file is larger than ``limit``; `size` is what `fstat` said, or what was read when the file grew.
        case tooLarge(size: Int64)
    }

    /// What a file holds, judged.
    enum Verdict {
        case json, empty, invalid(String), tooLarge(size: Int64)
    }

    /// The contents of the file `name`, or `nil` when there is no such file.
    ///
    /// - Throws: What ``StorageDirectory/openEntryForReading(named:)`` throws, and
    ///   ``WLStorageError/Code/readFailed`` when reading fails.
    ///
    /// An encrypted value's file is read up to ``ValueSizeLimit/sealedMaximum`` (`sealed`): it holds the value and
    /// what encryption adds to it.
    static func read(
        _ name: [UInt8], in directory: StorageDirectory, sealed: Bool = false
    ) throws(WLStorageError) -> Contents? {
        let limit = sealed ? ValueSizeLimit.sealedMaximum : limit
        guard let file = try directory.openEntryForReading(named: name) else { return nil }
        guard file.size <= limit else { return .tooLarge(size: file.size) }
        // One byte more than the size, so that the end of the file is seen without growing the buffer.
        var data = Data(count: Int(file.size) + 1)
        var filled = 0
        while true {
            filled = try fill(&data, from: filled, reading: file)
            if filled < data.count { break }  // the end of the file
            if filled > limit { return .tooLarge(size: Int64(filled)) }
            data.count = min(2 * data.count + 4_096, limit + 1)  // the file grew since fstat
        }
        if filled > limit { return .tooLarge(size: Int64(filled)) }
        data.count = filled
        return .bytes(data)
    }

    /// The first `count` bytes of the file `name` (fewer when it is shorter), or `nil` when there is no such file or
    /// it is not a regular file.
    ///
    /// - Throws: What ``StorageDirectory/openEntryForReading(named:)`` throws for a regular file that cannot be
    ///   opened, and ``WLStorageError/Code/readFailed`` when reading fails.
    static func prefix(_ name: [UInt8], in directory: StorageDirectory, count: Int) throws(WLStorageError) -> [UInt8]? {
        guard let file = try openIfRegular(name, in: directory) else { return nil }
        var data = Data(count: count)
        let filled = try fill(&data, from: 0, reading: file)
        return Array(data[..<filled])
    }

    /// Reads `file` into `data` from the offset `start` until `data` is full or the file ends, and returns how much
    /// of `data` is filled.
    private static func fill(
        _ data: inout Data, from start: Int, reading file: borrowing ReadableEntry
    ) throws(WLStorageError) -> Int {
        var filled = start
        while filled < data.count {
            let result = data.withUnsafeMutableBytes { buffer in
                Result { () throws(WLStorageError) in
                    try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
                }
            }
            let count = try result.get()
            if count == 0 { break }
            filled += count
        }
        return filled
    }

    /// The file `name` opened for reading, or `nil` when there is none or it is not a regular file.
    private static func openIfRegular(
        _ name: [UInt8], in directory: StorageDirectory
    ) throws(WLStorageError) -> ReadableEntry? {
        do {
            return try directory.openEntryForReading(named: name)
        } catch  where error.code == .notARegularFile {
            return nil
        }
    }

    /// What the file `name` holds, judged by ``JSONText/problem(in:)``, or `nil` when there is no such file.
    ///
    /// - Throws: As ``read(_:in:sealed:)``.
    static func check(_ name: [UInt8], in directory: StorageDirectory) throws(WLStorageError) -> Verdict? {
        switch try read(name, in: directory) {
        case nil: return nil
        case .tooLarge(let size): return .tooLarge(size: size)
        case .bytes(let data):
            if data.isEmpty { return .empty }
            if let problem = JSONText.problem(in: data) { return .invalid(problem) }
            return .json
        }
    }

    /// The sentence for a file larger than ``limit``, without the file.
    static var tooLargeReason: String {
        "larger than the maximum value size the library reads (\(limit) bytes)"
    }
}
