import Foundation
import Synchronization
import WLStorageCore

/// The names the package's writers give files: a key's file, temporary files, exchange files, kept-bytes names.
extension StorageDirectory {
    /// Whether `name` is a writer's temporary file (`NAME~<16 hex>.tmp`) or exchange file.
    package static func isTemporary(_ name: String) -> Bool { writtenFileName(ofTemporary: name) != nil }

    /// The file the temporary file `name` was to become, or `nil` when it is not one.
    package static func writtenFileName(ofTemporary name: String) -> String? {
        if name.hasSuffix(exchangeSuffix) { return interruptedExchange(name)?.name }
        let utf8 = Array(name.utf8)
        let suffix = 1 + 16 + 4
        guard utf8.count > suffix, name.hasSuffix(".tmp") else { return nil }
        let tilde = utf8.count - suffix
        guard utf8[tilde] == UInt8(ascii: "~") else { return nil }
        guard utf8[(tilde + 1)..<(tilde + 17)].allSatisfy(FileName.isLowercaseHexDigit) else { return nil }
        let written = String(decoding: utf8[..<tilde], as: UTF8.self)
        return keyFileName(of: written) != nil ? written : nil
    }

    package static let exchangeSuffix = ".xchg"

    /// The name a conditional replacement gives its written file for the exchange: `NAME~<expected's
    /// ``FileIdentity/lastingStamp`` in 16 hex>-<written's>.xchg`. It exists only while the replacement holds the
    /// directory's lock exclusively, so clean-up finding one knows its writer died mid-exchange.
    package static func exchangeName(for name: String, replacing expected: FileIdentity, with written: FileIdentity)
        -> String
    {
        "\(name)~\(FileName.hex(of: expected.lastingStamp))-\(FileName.hex(of: written.lastingStamp))\(exchangeSuffix)"
    }

    /// The file name and the two stamps of the exchange file `name`, or `nil` when it is not one.
    package static func interruptedExchange(_ name: String) -> (name: String, expected: UInt64, written: UInt64)? {
        let utf8 = Array(name.utf8)
        let suffix = 1 + 16 + 1 + 16 + exchangeSuffix.utf8.count
        guard utf8.count > suffix, name.hasSuffix(exchangeSuffix) else { return nil }
        let tilde = utf8.count - suffix
        guard utf8[tilde] == UInt8(ascii: "~"), utf8[tilde + 17] == UInt8(ascii: "-") else { return nil }
        let expected = utf8[(tilde + 1)..<(tilde + 17)]
        let written = utf8[(tilde + 18)..<(tilde + 34)]
        guard expected.allSatisfy(FileName.isLowercaseHexDigit), written.allSatisfy(FileName.isLowercaseHexDigit),
            let expectedStamp = UInt64(String(decoding: expected, as: UTF8.self), radix: 16),
            let writtenStamp = UInt64(String(decoding: written, as: UTF8.self), radix: 16)
        else { return nil }
        let file = String(decoding: utf8[..<tilde], as: UTF8.self)
        guard keyFileName(of: file) != nil else { return nil }
        return (file, expectedStamp, writtenStamp)
    }

    /// The key file `name` belongs to (itself, or `NAME` of its `~before-type-change`/`~corrupt-…` forms), or `nil`.
    package static func keyFileName(of name: String) -> String? {
        if FileName.isKeyFileName(name) { return name }
        guard let tilde = name.utf8.firstIndex(of: UInt8(ascii: "~")) else { return nil }
        let base = String(name[..<tilde])
        let rest = name[tilde...]
        guard FileName.isKeyFileName(base), rest == keptOriginalSuffix || rest.hasPrefix(movedAsideMarker) else {
            return nil
        }
        return base
    }

    /// What the name of a value's bytes kept from before its type changed ends with, after the name of its file.
    package static let keptOriginalSuffix = "~before-type-change"

    /// Whether `name` holds a value's bytes kept from before its type changed.
    package static func isKeptOriginal(_ name: String) -> Bool { name.hasSuffix(keptOriginalSuffix) }

    /// Whether `name` is a file moved aside because it did not decode.
    package static func isMovedAside(_ name: String) -> Bool { name.contains(movedAsideMarker) }

    /// What follows the name of a file in the name it is moved aside to, before the time and a random number.
    package static let movedAsideMarker = "~corrupt-"

    /// `NAME~` and 16 hex digits and `.tmp`, from a counter mixed with a random seed drawn once per process.
    static func temporaryName(for name: String) -> String {
        let count = FileSystemState.shared.temporaryNames.add(1, ordering: .relaxed).newValue
        return "\(name)~\(FileName.hex(of: mix(FileSystemState.shared.temporaryNameSeed &+ count))).tmp"
    }

    /// A bijection of 64-bit numbers that scatters consecutive ones (the finalizer of SplitMix64).
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    package static func movedAsideName(for name: String, at date: Date = Date()) -> String {
        var time = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        let stamp = String(
            format: "%04d%02d%02dT%02d%02d%02dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
            parts.tm_hour, parts.tm_min, parts.tm_sec)
        return "\(name)\(movedAsideMarker)\(stamp)-\(FileName.hex(of: .random(in: .min ... .max)))"
    }
}
