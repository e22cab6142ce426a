// Values of every Codable shape, stored, dropped and read again by a new storage, come back equal.
import Foundation
import Synchronization
import Testing

@testable import WLStorage

struct Profile: Codable, Sendable, Equatable {
    var name: String
    var age: Int
    var tags: [String]
    var scores: [String: Double]
    var nickname: String?
}

/// Stores `value`, drops the storage, opens a new one and returns what it reads, with the file's bytes.
private func roundTrip<T: Codable & Sendable>(_ value: T, default defaultValue: T) throws -> (T, Data) {
    try withTemporaryDirectory { directory in
        do {
            let storage = fileStorage("value", in: directory, default: defaultValue, flushInterval: nil)
            storage.wrappedValue = value
            storage.flush()
        }
        let bytes = try Data(contentsOf: directory.appendingPathComponent("value"))
        let reopened = fileStorage("value", in: directory, default: defaultValue, flushInterval: nil)
        return (reopened.wrappedValue, bytes)
    }
}

@Suite(.capturingOutput) struct RoundTripTests {
    private func check<T: Codable & Sendable & Equatable>(_ value: T, default defaultValue: T) throws {
        let (read, bytes) = try roundTrip(value, default: defaultValue)
        #expect(read == value)
        // The file holds exactly what JSONEncoder makes of the value, as the reference library writes it.
        #expect(try JSONDecoder().decode(T.self, from: bytes) == value)
        if !(value is Set<Int>) && !(value is [String: Int]) && !(value is Profile) {
            #expect(bytes == (try JSONEncoder().encode(value)))
        }
    }

    @Test func scalarsRoundTrip() throws {
        try check(true, default: false)
        try check(-42, default: 0)
        try check(Int.max, default: 0)
        try check(Float(3.25), default: 0)
        try check(Double.pi, default: 0)
        try check("héllo \"world\"\n", default: "")
    }

    @Test func optionalsRoundTripIncludingNil() throws {
        try check(String?.some("x"), default: nil)
        try check(String?.none, default: "not nil")
        try check(Date?.some(Date(timeIntervalSinceReferenceDate: 123_456.5)), default: nil)
        try check(Date?.none, default: Date(timeIntervalSinceReferenceDate: 1))
    }

    @Test func dataAndCollectionsRoundTrip() throws {
        try check(Data([0, 1, 2, 255]), default: Data())
        try check([1, 2, 3], default: [])
        try check(Set([3, 1, 2]), default: [])
        try check(["a": 1, "b": 2], default: [:])
        try check([[String]](repeating: ["x", "y"], count: 3), default: [])
    }

    @Test func structsRoundTrip() throws {
        try check(
            Profile(name: "Ada", age: 36, tags: ["math"], scores: ["a": 1.5], nickname: nil),
            default: Profile(name: "", age: 0, tags: [], scores: [:], nickname: "n"))
    }
}
