import Foundation

/// Any JSON value as Foundation reads it, to compare: numbers by their digits (`Decimal`), else as `Double` or integer.
package enum JSONValue: Decodable, Equatable, Sendable {
    case null, unreadable
    case bool(Bool)
    case number(Decimal)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Decimal.self) {
            self = .number(value)
        } else if let value = try? container.decode(Double.self) {
            // A spelling no `Decimal` reads (`1.0e-128`) of a number one holds compares as that number.
            self = Decimal(string: "\(value)").map(JSONValue.number) ?? .double(value)
        } else if let value = try? container.decode(Int64.self) {
            // A number neither reads, such as 1e-500, which Foundation reads as an integer 0.
            self = .number(Decimal(value))
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            // A value the decoder skips but no type reads (`1e400`, a lone surrogate): one writers copy as it was.
            self = (try? container.decode([String: JSONValue].self)).map(JSONValue.object) ?? .unreadable
        }
    }
}
