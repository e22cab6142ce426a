import Foundation
import Synchronization
import Testing
import WLStorageJSON
import WLStorageTestSupport

@testable import WLStorage

// A type's `init(from:)` is the user's code: a read runs it once for bytes in the type's shape, whatever types the
// value holds, and no more than it must for bytes of an earlier shape.

/// A value of plain fields, whose `init(from:)` counts its runs.
private struct CountedProfile: Codable, Equatable, Sendable {
    static let decodes = Atomic<Int>(0)
    var name: String
    var size: Int

    init(name: String, size: Int) {
        self.name = name
        self.size = size
    }

    init(from decoder: any Decoder) throws {
        Self.decodes.add(1, ordering: .relaxed)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        size = try container.decode(Int.self, forKey: .size)
    }
}

/// A value holding types `JSONDecoder` decodes its own way, whose `init(from:)` counts its runs.
private struct CountedReceipt: Codable, Equatable, Sendable {
    static let decodes = Atomic<Int>(0)
    var paid: Date
    var total: Decimal

    init(paid: Date, total: Decimal) {
        self.paid = paid
        self.total = total
    }

    init(from decoder: any Decoder) throws {
        Self.decodes.add(1, ordering: .relaxed)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        paid = try container.decode(Date.self, forKey: .paid)
        total = try container.decode(Decimal.self, forKey: .total)
    }
}

/// A value that gained a field since its bytes were stored, whose `init(from:)` counts its runs.
private struct CountedGrown: Codable, Equatable, Sendable {
    static let decodes = Atomic<Int>(0)
    var name: String
    var size: Int

    init(name: String, size: Int) {
        self.name = name
        self.size = size
    }

    init(from decoder: any Decoder) throws {
        Self.decodes.add(1, ordering: .relaxed)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        size = try container.decode(Int.self, forKey: .size)
    }
}

@Suite(.onTestThreads) struct DecodeCountTests: StoredFileSuite {
    @Test func readingAValueStoredInItsShapeRunsItsDecoderOnce() throws {
        try withTemporaryDirectory { directory in
            try write(#"{"name":"ada","size":7}"#, key: "profile", in: directory)
            let before = CountedProfile.decodes.load(ordering: .relaxed)
            let storage = WLStorage(
                key: "profile", defaultValue: CountedProfile(name: "", size: 0), flushInterval: nil,
                store: .directory(directory))
            #expect(storage.wrappedValue == CountedProfile(name: "ada", size: 7))
            #expect(storage.lastError == nil)
            #expect(CountedProfile.decodes.load(ordering: .relaxed) - before == 1)
        }
    }

    @Test func readingAValueOfDatesAndDecimalsRunsItsDecoderOnce() throws {
        try withTemporaryDirectory { directory in
            let receipt = CountedReceipt(
                paid: Date(timeIntervalSinceReferenceDate: 812_345.25), total: Decimal(string: "12.5")!)
            try write(try JSONCoders.encoder.encode(receipt), key: "receipt", in: directory)
            let before = CountedReceipt.decodes.load(ordering: .relaxed)
            let storage = WLStorage(
                key: "receipt", defaultValue: CountedReceipt(paid: Date(timeIntervalSinceReferenceDate: 0), total: 0),
                flushInterval: nil, store: .directory(directory))
            #expect(storage.wrappedValue == receipt)
            #expect(storage.lastError == nil)
            #expect(CountedReceipt.decodes.load(ordering: .relaxed) - before == 1)
        }
    }

    /// Bytes stored before the type gained a field: one decode that fails as they are, one with the field filled in.
    @Test func readingBytesOfAnEarlierShapeRunsItsDecoderOnceAsTheyAreAndOnceFilledIn() throws {
        try withTemporaryDirectory { directory in
            try write(#"{"name":"ada"}"#, key: "grown", in: directory)
            let before = CountedGrown.decodes.load(ordering: .relaxed)
            let storage = WLStorage(
                key: "grown", defaultValue: CountedGrown(name: "", size: 3), flushInterval: nil,
                store: .directory(directory))
            #expect(storage.wrappedValue == CountedGrown(name: "ada", size: 3))
            #expect(storage.lastError == nil)
            #expect(CountedGrown.decodes.load(ordering: .relaxed) - before == 2)
        }
    }
}
