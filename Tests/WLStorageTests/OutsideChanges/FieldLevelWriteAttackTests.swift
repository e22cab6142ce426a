// Field-level writes under a hostile fleet: numbers a `Double` cannot hold, a removal of unknown fields whose write
// failed, three versions of a type changing one key of a store that writes on condition, and a key another program
// removes or empties while a change goes onto it (Guarantees.md: Several programs, one file).
import Dispatch
import Foundation
import Testing
import WLStorageTestSupport

@testable import WLStorage

@Suite(.capturingOutput, .serialized) struct FieldLevelWriteAttackTests {
    struct Ledger: Codable, Sendable, Equatable {
        var owner: String
        var balance: Decimal
    }

    static let key = "ledger"

    /// The members of `data`, a JSON object.
    static func object(_ data: Data?) throws -> [String: Any] {
        let data = try #require(data)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// Another program sets an amount with more digits than a `Double` holds; this storage changes another field. The
    /// amount, a field this storage never changed, must keep every digit.
    @Test func aDecimalAnotherProgramSetKeepsItsDigitsThroughAMergedWrite() throws {
        try withTemporaryDirectory { scratch in
            try withTemporaryDirectory { directory in
                let url = directory.appendingPathComponent(Self.key)
                try Data(#"{"balance":100,"owner":"ann"}"#.utf8).write(to: url)
                let storage = manualStorage(Self.key, in: directory, default: Ledger(owner: "", balance: 0))
                try #require(storage.wrappedValue.owner == "ann")
                let amount = try #require(Decimal(string: "12345678901234567.89"))
                try whileTheFileMonitorIsHeld(scratch: scratch) {
                    try replaceFromOutside(url, with: #"{"balance":12345678901234567.89,"owner":"ann"}"#)
                    storage.wrappedValue.owner = "bob"
                    storage.flush()
                }
                let data = try #require(contents(of: Self.key, in: directory))
                let stored = try JSONDecoder().decode(Ledger.self, from: data)
                #expect(stored == Ledger(owner: "bob", balance: amount), "\(String(decoding: data, as: UTF8.self))")
                #expect(eventually(timeout: 60) { storage.wrappedValue == Ledger(owner: "bob", balance: amount) })
            }
        }
    }
}
