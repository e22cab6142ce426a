// A program killed at any system call of a write: each way the package puts a file in place is run in a child
// process that kills itself with SIGKILL on entry of its first call, then of its second, and so on until a run goes
// to its end (the child program counts the calls, through the fault seam under `StorageDirectory`). After each kill
// the next program to start in the directory must leave no temporary file of the writer behind, and every file must
// hold a whole value (Guarantees.md: Durability).
import Foundation
import Testing

@testable import WLStorage
@testable import WLStorageFiles

@Suite(.capturingOutput) struct KilledWriteTests {
    /// One way the package puts a file in place, as the child program's `write-path` mode runs it.
    enum WritePath: String, Sendable, CaseIterable, CustomTestStringConvertible {
        /// A set and a flush over an old value: `renameat` over the file.
        case replace
        /// The save of a default where nothing is stored: `renameat2` with `RENAME_NOREPLACE`.
        case createDefault = "create-default"
        /// A file whose type gained a field: its bytes are kept aside (`NAME~before-type-change`, written as a file
        /// of its own), then it is written back in the new shape.
        case keptAside = "kept-aside"
        /// A file that does not decode: moved aside (`NAME~corrupt-…`), then the default is saved.
        case movedAside = "moved-aside"
        /// The kept-aside path through a store of the directory: the copy is a key of the store.
        case storeKeptAside = "store-kept-aside"
        /// The moved-aside path through a store of the directory: the copy is a key of the store, written as a file.
        case storeMovedAside = "store-moved-aside"
        /// A value read in an older shape, rewritten in the newer one at the flush: the exchange of its file with the
        /// one in place (`renameat2` with `RENAME_EXCHANGE`), checked after.
        case rewrite
        /// The same, with another program's set renamed into place just before the exchange, which the rewrite puts
        /// back.
        case racedRewrite = "raced-rewrite"
        /// What the raced rewrite leaves when it is killed between its exchange and the exchange back (the rewrite in
        /// place, the other program's set under the exchange's name), resolved by the next program's clean-up: the
        /// clean-up killed at any of its calls.
        case interruptedExchange = "interrupted-exchange"

        var testDescription: String { rawValue }

        /// What the directory holds before the child starts: file names and contents.
        var before: [String: String] {
            switch self {
            case .replace: ["k": #""old""#]
            case .createDefault: [:]
            case .keptAside, .storeKeptAside: ["profile": #"{"name":"ada"}"#]
            case .movedAside, .storeMovedAside: ["bad": "not json"]
            case .rewrite, .racedRewrite, .interruptedExchange: ["panel": Self.olderPanel]
            }
        }

        static let olderPanel = #"{"stamp":0,"wide":false}"#
        /// The rewrite in the newer shape, which keeps the member the newer shape does not know.
        static let rewrittenPanel = #"{"stamp":0,"wide":false,"width":800}"#
        /// The other program's set of the raced rewrite.
        static let racedSet = #"{"stamp":9,"wide":true}"#

        /// Whether `contents` is a whole value that the file `name` may hold after a run of this path killed anywhere:
        /// what it held before, what the path writes, or a copy the path keeps.
        func isWhole(_ contents: String, name: String) -> Bool {
            let written: Set<String>
            switch self {
            case .replace: written = [#""old""#, #""new""#]
            case .createDefault: written = [#""default""#]
            case .keptAside, .storeKeptAside:
                written = [#"{"name":"ada"}"#, #"{"name":"ada","visits":5}"#, #"{"visits":5,"name":"ada"}"#]
            case .movedAside, .storeMovedAside: written = ["not json", #""default""#]
            case .rewrite: written = [Self.olderPanel, Self.rewrittenPanel]
            case .racedRewrite, .interruptedExchange: written = [Self.olderPanel, Self.rewrittenPanel, Self.racedSet]
            }
            // The child's next start (the `open` mode) saves its default, "", under `k` where nothing is stored.
            return written.contains(contents) || (name == "k" && contents == #""""#)
        }
    }

    /// The most calls a path may make; a path that makes more is reported as never finishing.
    static let maximumCalls = 400

    @Test(arguments: WritePath.allCases)
    func aProgramKilledAtAnyCallOfAWriteLeavesNoTemporaryFileOnceTheNextOneHasStarted(path: WritePath) throws {
        var finished = false
        for call in 1...Self.maximumCalls where !finished {
            try withTemporaryDirectory { directory in
                for (name, contents) in path.before {
                    try Data(contents.utf8).write(to: directory.appendingPathComponent(name))
                }
                let child = try ChildProcess(
                    "WLStorageTestChild", ["write-path", directory.path, "-", path.rawValue],
                    environment: ["WLSTORAGE_TEST_KILL_AT_CALL": "\(call)", "SWIFT_BACKTRACE": "enable=no"])
                let end = try #require(child.process.waitForEnd(), "the child did not end")
                let at: Comment = "\(path), killed at call \(call): \(child.lines.last ?? "")"
                if end.signaled {
                    #expect(end.status == SIGKILL, at)
                } else {
                    #expect(end.status == 0, at)
                    #expect(child.lines.contains("done"), at)
                    finished = true
                }

                // The next program to start in the directory.
                let next = try ChildProcess(
                    "WLStorageTestChild", ["open", directory.path, "k"], environment: ["SWIFT_BACKTRACE": "enable=no"])
                let nextEnd = try #require(next.process.waitForEnd(), "the next program did not end")
                #expect(nextEnd == ProcessEnd(status: 0, signaled: false), at)

                // Writers' temporary files, and the files of exchanges (`.xchg`).
                let isTemporary = { (name: String) in name.hasSuffix(".tmp") || name.hasSuffix(".xchg") }
                let left = entries(of: directory).filter(isTemporary)
                #expect(left.isEmpty, "\(at): temporary files left: \(left)")
                for name in entries(of: directory) where !isTemporary(name) {
                    let contents = String(decoding: contents(of: name, in: directory) ?? Data(), as: UTF8.self)
                    #expect(path.isWhole(contents, name: name), "\(at): \(name) holds \(contents)")
                }
                if child.lines.contains("raced") { expectTheRacedSetKept(in: directory, at: at) }
            }
        }
        #expect(finished, "the \(path) path did not end within \(Self.maximumCalls) calls")
    }

    /// After a raced rewrite, killed anywhere: the other program's set, stored after the rewrite's check, is in
    /// place, where the rewrite put it back, or where the next program's clean-up put it back when the rewrite was
    /// killed between its exchange and the exchange back.
    private func expectTheRacedSetKept(in directory: URL, at: Comment) {
        let holding = entries(of: directory).filter {
            contents(of: $0, in: directory) == Data(WritePath.racedSet.utf8)
        }
        #expect(!holding.isEmpty, "\(at): the other program's set is lost; \(entries(of: directory))")
        #expect(holding.contains("panel"), "\(at): the other program's set is not in place: \(holding)")
    }
}
