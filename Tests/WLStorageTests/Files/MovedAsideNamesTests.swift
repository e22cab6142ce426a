// The names of files moved aside are never taken twice.
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct MovedAsideNamesTests {
    @Test func twoUndecodableFilesInOneSecondAreBothKept() throws {
        try withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("k")
            for garbage in ["first garbage", "second garbage"] {
                try Data(garbage.utf8).write(to: file)
                let reported = ReportedErrors.errors(under: directory).count
                let storage = fileStorage("k", in: directory, default: 0, flushInterval: nil)
                // As reported: `lastError` is cleared once the default is saved, which may come first.
                #expect(
                    ReportedErrors.errors(under: directory).dropFirst(reported).contains { $0.code == .decodingFailed })
                _ = storage
            }
            let aside = entries(of: directory).filter { $0.contains("~corrupt-") }
            #expect(aside.count == 2, "\(aside)")
            let contents = Set(
                aside.compactMap { try? String(contentsOf: directory.appendingPathComponent($0), encoding: .utf8) })
            #expect(contents == ["first garbage", "second garbage"])
        }
    }

    /// Fails the first `collisions` moves aside with `EEXIST`, as if a kept file had every name drawn, and with
    /// `fallback` makes `renameat2` unsupported, so that the `linkat` path is taken.
    private static func collide(_ collisions: Int, fallback: Bool = false, in directory: URL) -> Shared {
        let attempts = Shared()
        let path = directory.standardizedFileURL.path
        FaultInjection.install(
            { call, name in
                guard let name, name.contains("~corrupt-") else { return nil }
                if fallback && call == .rename { return .fail(EINVAL) }
                guard call == (fallback ? .link : .rename) else { return nil }
                let attempt = attempts.number.add(1, ordering: .relaxed).newValue
                return attempt <= collisions ? .fail(EEXIST) : nil
            }, forDirectory: path)
        return attempts
    }

    @Test(arguments: [false, true])
    func aNameAlreadyTakenIsNeverReplacedAnotherIsDrawn(fallback: Bool) throws {
        try withTemporaryDirectory { directory in
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
            let attempts = Self.collide(3, fallback: fallback, in: directory)
            try Data("garbage".utf8).write(to: directory.appendingPathComponent("k"))
            let storage = fileStorage("k", in: directory, default: 0, flushInterval: nil)
            // Reported; `lastError` may already be `nil` again, once the default is saved in the background.
            #expect(ReportedErrors.errors(under: directory).contains { $0.code == .decodingFailed })
            #expect(attempts.number.load(ordering: .relaxed) == 4)
            let aside = entries(of: directory).filter { $0.contains("~corrupt-") }
            #expect(aside.count == 1)
            #expect(
                aside.first.flatMap { try? String(contentsOfFile: directory.path + "/" + $0, encoding: .utf8) }
                    == "garbage")
            withExtendedLifetime(storage) {}
        }
    }

    @Test func whenEveryNameDrawnIsTakenTheFileStaysWhereItIsAndIsNeverOverwritten() throws {
        try withTemporaryDirectory { directory in
            defer { FaultInjection.remove(forDirectory: directory.standardizedFileURL.path) }
            _ = Self.collide(.max, in: directory)
            let file = directory.appendingPathComponent("k")
            try Data("garbage".utf8).write(to: file)
            let storage = fileStorage("k", in: directory, default: 0, flushInterval: nil)
            #expect(storage.lastError?.code == .writeFailed)
            storage.wrappedValue = 1
            storage.flush()
            // What is stored is unknown to the storage: its change, based on the default, never replaces the file.
            #expect(try String(contentsOf: file, encoding: .utf8) == "garbage")
            #expect(storage.hasPendingChanges)
        }
    }
}
