import Foundation
import Testing
import WLStorage
import WLStorageFleet
import WLStorageTestSupport

@testable import WLStoragePostgres

/// Payloads that another program may send on the store's channel, cut, changed or forged at random: each is refused,
/// read as a change to read, or read as a carried change of a positive version of the store's table; none crashes.
@Suite(.onTestThreads)
struct PostgresPayloadParsingTests {
    @Test func changedPayloadsAreRefusedOrReadAsChangesOfTheStoresTable() {
        let namespace = "ns"
        let table = "16384"
        let valid =
            WLStoragePostgresStore.payload(namespace: namespace, key: "käy") + "7.\(table):"
            + Data("{\"a\":1}".utf8).base64EncodedString()
        let alphabet = Array("0123456789:.*kc-+ns=/AZaz".utf8) + [0xC3, 0xA4, 0xFF]
        var random = SplitMix64(seed: 42)  // a fixed sequence, so that a failure is met again
        var carried = 0
        for _ in 0..<5_000 {
            var bytes = Array(valid.utf8)
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                switch Int.random(in: 0..<3, using: &random) {
                case 0 where !bytes.isEmpty: bytes.remove(at: Int.random(in: 0..<bytes.count, using: &random))
                case 1:
                    bytes.insert(
                        alphabet.randomElement(using: &random)!, at: Int.random(in: 0...bytes.count, using: &random))
                default:
                    if !bytes.isEmpty {
                        bytes[Int.random(in: 0..<bytes.count, using: &random)] = alphabet.randomElement(using: &random)!
                    }
                }
            }
            let payload = String(decoding: bytes, as: UTF8.self)
            guard
                case .carried(let change) = WLStoragePostgresStore.change(
                    fromPayload: payload, namespace: namespace, table: table)
            else { continue }
            carried += 1
            #expect(change.version > 0, "\(payload)")
            #expect(payload.contains(".\(table)"), "\(payload)")
        }
        // Some changed payloads are still carried changes (a changed key, a changed version).
        #expect(carried > 0)
    }

    @Test func versionsThatDoNotFitOrAreNotPositiveAreChangesToRead() {
        let table = "16384"
        for version in ["0", "-1", "-9223372036854775808", "9223372036854775808", "99999999999999999999", "", "1e3"] {
            let payload = WLStoragePostgresStore.payload(namespace: "ns", key: "k") + "\(version).\(table):MQ=="
            #expect(
                WLStoragePostgresStore.change(fromPayload: payload, namespace: "ns", table: table)
                    == .change(.key("k")), "\(version)")
        }
        let largest = WLStoragePostgresStore.payload(namespace: "ns", key: "k") + "9223372036854775807.\(table):MQ=="
        #expect(
            WLStoragePostgresStore.change(fromPayload: largest, namespace: "ns", table: table)
                == .carried(WLStorageCarriedChange(key: "k", version: .max, data: Data("1".utf8))))
    }
}
