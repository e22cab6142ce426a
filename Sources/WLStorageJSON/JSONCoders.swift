import Foundation

/// One encoder and one decoder for every backer, thread-safe: `JSONEncoder` output with sorted keys.
package enum JSONCoders {
    package static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()
    package static let decoder = JSONDecoder()
}
