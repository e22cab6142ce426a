import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

/// When a store's backer adopts the bytes a notification carried, and when it reads the key instead.
@Suite(.onTestThreads) struct CarriedVersionsTests {
    private static func change(_ version: Int64, _ text: String?) -> WLStorageCarriedChange {
        WLStorageCarriedChange(key: "k", version: version, data: text.map { Data($0.utf8) })
    }

    private static func decide(known: Int64?, _ changes: [WLStorageCarriedChange], mustRead: Bool = false)
        -> CarriedVersions.Decision
    {
        var versions = CarriedVersions(known: known)
        versions.offer(changes, mustRead: mustRead)
        return versions.take()
    }

    @Test func theNextVersionIsAdopted() {
        #expect(Self.decide(known: 4, [Self.change(5, "five")]) == .adopt(Data("five".utf8), version: 5))
    }

    @Test func consecutiveVersionsAreAdoptedUpToTheNewest() {
        let changes = [Self.change(5, "five"), Self.change(6, "six"), Self.change(7, "seven")]
        #expect(Self.decide(known: 4, changes) == .adopt(Data("seven".utf8), version: 7))
    }

    /// The feed reports a key's writes in the order they were made; versions out of that order cannot tell which is the
    /// newest write (a key made anew starts its versions again), and the key is read.
    @Test func versionsReportedOutOfOrderAreRead() {
        let changes = [Self.change(7, "seven"), Self.change(5, "five"), Self.change(6, "six")]
        #expect(Self.decide(known: 4, changes) == .read)
    }

    /// The key was made anew behind the store's back after the next version: the last change reported, version 1, is
    /// its newest write, and the next version's bytes are not.
    @Test func aKeyMadeAnewAfterTheNextVersionIsRead() {
        #expect(Self.decide(known: 5, [Self.change(6, "six"), Self.change(1, "made anew")]) == .read)
    }

    /// Made anew and written up to the known version again: its versions cannot be told from those already seen.
    @Test func aKeyMadeAnewUpToTheKnownVersionIsRead() {
        let changes = [Self.change(1, "one"), Self.change(2, "two"), Self.change(3, "three")]
        #expect(Self.decide(known: 3, changes) == .read)
        #expect(Self.decide(known: 5, [Self.change(5, "other"), Self.change(3, "made anew")]) == .read)
    }

    /// Made anew and written past the known version, the last change follows on from it: the newest write is taken.
    @Test func aKeyMadeAnewPastTheKnownVersionIsTakenAtItsNewest() {
        let changes = (1...Int64(4)).map { Self.change($0, "new \($0)") }
        #expect(Self.decide(known: 3, changes) == .adopt(Data("new 4".utf8), version: 4))
    }

    @Test func theKnownVersionHeardAgainIsStale() {
        #expect(Self.decide(known: 5, [Self.change(5, "same"), Self.change(5, "same")]) == .stale)
    }

    @Test func theKnownVersionAloneIsStale() {
        #expect(Self.decide(known: 5, [Self.change(5, "same")]) == .stale)
        #expect(Self.decide(known: 5, [Self.change(5, nil)]) == .stale)
    }

    /// The known version heard with other bytes than those known (those the backer wrote, say) is another write that
    /// made the key anew up to it, behind the store's back: the key is read. Heard with the same bytes, or without any,
    /// it is stale.
    @Test func theKnownVersionWithOtherBytesIsRead() {
        var versions = CarriedVersions()
        versions.know(5, bytes: Data("mine".utf8))
        versions.offer([Self.change(5, "mine"), Self.change(5, "other")], mustRead: false)
        #expect(versions.take() == .read)
        versions.know(5, bytes: Data("mine".utf8))
        versions.offer([Self.change(5, "mine"), Self.change(5, nil)], mustRead: false)
        #expect(versions.take() == .stale)
    }

    /// The backer's own writes heard after the last of them (its checks behind): the newest change reported is the
    /// known version with the bytes known, and the versions before it are old news. Without the bytes at hand, the
    /// older versions cannot be told from a key made anew, and the key is read.
    @Test func theKnownVersionWithItsBytesHeardLastIsStale() {
        var versions = CarriedVersions()
        versions.know(6, bytes: Data("six".utf8))
        versions.offer([Self.change(4, "four"), Self.change(5, "five"), Self.change(6, "six")], mustRead: false)
        #expect(versions.take() == .stale)
        versions.know(6, bytes: nil)
        versions.offer([Self.change(5, "five"), Self.change(6, "six")], mustRead: false)
        #expect(versions.take() == .read)
        versions.know(6, bytes: Data("six".utf8))
        versions.offer([Self.change(6, "six"), Self.change(5, "made anew")], mustRead: false)
        #expect(versions.take() == .read)
    }

    /// Versions all older than the known one come from a key removed and made anew behind the store's back (its versions
    /// start again), or from a sender replaying old ones: the key is read.
    @Test func versionsAllOlderThanTheKnownOneAreRead() {
        #expect(Self.decide(known: 5, [Self.change(2, "old")]) == .read)
        #expect(Self.decide(known: 5, [Self.change(4, nil)]) == .read)
        #expect(Self.decide(known: 6, [Self.change(1, "one"), Self.change(2, "two")]) == .read)
    }

    @Test func staleVersionsBesideTheNextOneDoNotStopIt() {
        #expect(
            Self.decide(known: 5, [Self.change(4, "old"), Self.change(6, "six")])
                == .adopt(Data("six".utf8), version: 6))
    }

    @Test(arguments: [
        ("a gap", Int64?(4), [CarriedVersionsTests.change(6, "six")], false),
        (
            "a gap before the newest", 4,
            [CarriedVersionsTests.change(5, "five"), CarriedVersionsTests.change(7, "seven")], false
        ),
        ("no version known", nil, [CarriedVersionsTests.change(5, "five")], false),
        ("a change too large to carry", 4, [CarriedVersionsTests.change(5, nil)], false),
        ("a change reported without its bytes", 4, [CarriedVersionsTests.change(5, "five")], true),
        ("nothing carried", 4, [], false),
    ])
    func readsTheKeyAfter(_ what: String, known: Int64?, changes: [WLStorageCarriedChange], mustRead: Bool) {
        #expect(Self.decide(known: known, changes, mustRead: mustRead) == .read, "\(what)")
    }

    @Test func tooManyChangesBetweenTwoChecksAreRead() {
        let changes = (5...Int64(5 + CarriedVersions.limit)).map { Self.change($0, "\($0)") }
        #expect(Self.decide(known: 4, changes) == .read)
    }

    @Test func whatWasOfferedIsTakenOnce() {
        var versions = CarriedVersions(known: 4)
        versions.offer([Self.change(5, "five")], mustRead: true)
        #expect(versions.take() == .read)
        versions.known = 5
        #expect(versions.take() == .read)
        versions.offer([Self.change(6, "six")], mustRead: false)
        #expect(versions.take() == .adopt(Data("six".utf8), version: 6))
    }
}
