import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

struct RewrittenProfile: Codable, Equatable {
    var name: String
    var visits: Int
}

/// The earlier shape, read through a migration and rewritten in the current one.
struct RewrittenProfileV0: Codable {
    var login: String
}

let rewriteMigrations: [WLStorageMigration<RewrittenProfile>] = [
    .from(RewrittenProfileV0.self) { RewrittenProfile(name: $0.login, visits: 1) }
]

/// A value read through a migration is written back in the current shape; that rewrite is not a change of the
/// program's user, and never replaces what another program stored after the read, even when the news of that change
/// has not reached the storage yet.
@Suite(.onTestThreads) struct MigratedValueRewriteTests {
    /// The other program's change reaches the file through a hard link in another directory, so the watch of the
    /// storage's directory hears nothing of it: only the rewrite itself can notice that the file is no longer the one it
    /// read.
    @Test func aRewriteOfAFileChangedUnheardSinceItWasReadGivesWay() throws {
        try withTemporaryDirectory { directory in
            try Data(#"{"login":"ada"}"#.utf8).write(to: directory.appendingPathComponent("profile"))
            let elsewhere = directory.appendingPathComponent("elsewhere", isDirectory: true)
            try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: false)
            let link = elsewhere.appendingPathComponent("profile")
            #expect(Glibc.link(directory.appendingPathComponent("profile").path, link.path) == 0)

            let storage = WLStorage(
                key: "profile", defaultValue: RewrittenProfile(name: "new", visits: 0), flushInterval: nil,
                store: .directory(directory), migrations: rewriteMigrations)
            #expect(storage.wrappedValue == RewrittenProfile(name: "ada", visits: 1))
            #expect(storage.hasPendingChanges)  // the rewrite

            // Another program stores its value in place, through the other link.
            let theirs = #"{"name":"bob","visits":42}"#
            let handle = try FileHandle(forWritingTo: link)
            try handle.truncate(atOffset: 0)
            try handle.write(contentsOf: Data(theirs.utf8))
            try handle.close()

            storage.flush()
            #expect(
                stored(RewrittenProfile.self, key: "profile", in: directory)
                    == RewrittenProfile(name: "bob", visits: 42))
            #expect(storage.wrappedValue == RewrittenProfile(name: "bob", visits: 42))
            #expect(!storage.hasPendingChanges)
        }
    }
}
