import Foundation
import Testing
import WLStorageJSON
import WLStorageTestSupport

@testable import WLStorage

// What a storage reads for the types `JSONDecoder` decodes its own way, and for bytes of another version: the same
// value, and the same error, as `JSONDecoder` alone gives.

private struct Receipt: Codable, Equatable, Sendable {
    var paid: Date
    var payload: Data
    var link: URL
    var total: Decimal
    var items: [Date]
}

private enum Theme: String, Codable, Sendable {
    case light, dark
}

private struct Appearance: Codable, Equatable, Sendable {
    var theme = Theme.light
    var fontSize = 13
}

@Suite(.onTestThreads) struct StoredValueFallbackTests: StoredFileSuite {
    @Test func aValueWithTheTypesJSONDecoderDecodesItsOwnWayReadsAsJSONDecoderReadsIt() throws {
        try withTemporaryDirectory { directory in
            let receipt = Receipt(
                paid: Date(timeIntervalSinceReferenceDate: 812_345.25), payload: Data([0, 1, 254, 255]),
                link: URL(string: "https://example.com/a?b=c")!, total: Decimal(string: "12.345")!,
                items: [Date(timeIntervalSinceReferenceDate: -1.5)])
            let text = try JSONCoders.encoder.encode(receipt)
            try write(text, key: "receipt", in: directory)
            let fallback = Receipt(
                paid: Date(timeIntervalSinceReferenceDate: 0), payload: Data(), link: URL(string: "https://a")!,
                total: 0, items: [])
            let storage = WLStorage(
                key: "receipt", defaultValue: fallback, flushInterval: nil, store: .directory(directory))
            #expect(storage.wrappedValue == (try JSONDecoder().decode(Receipt.self, from: text)))
            #expect(storage.wrappedValue == receipt)
            #expect(storage.lastError == nil)
        }
    }

    /// Bytes of another version: a newer enum case. The message and the underlying error are `JSONDecoder`'s.
    @Test func bytesOfAnotherVersionGiveTheSameErrorCodeAndMessageAsBefore() throws {
        try withTemporaryDirectory { directory in
            let newer = #"{"fontSize":18,"theme":"sepia"}"#
            try write(newer, key: "appearance", in: directory)
            let storage = WLStorage(
                key: "appearance", defaultValue: Appearance(), flushInterval: nil, store: .directory(directory))
            #expect(storage.wrappedValue == Appearance())
            let error = try #require(storage.lastError)
            #expect(error.code == .storedByAnotherVersion)
            #expect(error.path == directory.appendingPathComponent("appearance").path)
            #expect(
                error.message
                    == "the file holds JSON that does not decode as Appearance: another version of the"
                    + " program stored it; it is left as it is, and this storage uses its last value (the default at"
                    + " start) until it is set")
            var expected: (any Error)?
            do {
                _ = try JSONDecoder().decode(Appearance.self, from: Data(newer.utf8))
            } catch {
                expected = error
            }
            #expect(error.underlying.map { "\($0)" } == expected.map { "\($0)" })
            #expect(error.underlying.map { "\($0)" }?.contains("sepia") == true)
        }
    }
}
