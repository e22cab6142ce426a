import Foundation

/// Whether bytes that did not decode are a JSON text, and `JSONSerialization`'s words for what is wrong.
package enum JSONSyntax {
    /// Why `data` is not JSON, in `JSONSerialization`'s words (`Invalid value around character 2`); `nil` if it is: as
    /// `JSONDecoder` reads it, or with `strict`, as `JSONSerialization` does (it refuses `1e400`, `01`, bad UTF-8).
    package static func problem(in data: Data, strict: Bool = false) -> String? {
        if !strict, (try? JSONCoders.decoder.decode(JSONValue.self, from: data)) != nil { return nil }
        do {
            _ = try JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed)
            return nil
        } catch {
            let reason = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
            return reason.hasSuffix(".") ? String(reason.dropLast()) : reason
        }
    }
}
