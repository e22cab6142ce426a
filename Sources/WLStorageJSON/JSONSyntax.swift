import Foundation

/// Whether bytes that did not decode are a JSON text as `JSONSerialization` reads one, and its words for what is wrong.
package enum JSONSyntax {
    /// Why `data` is not JSON, in `JSONSerialization`'s words (`Invalid value around character 2`); `nil` if it is.
    package static func problem(in data: Data) -> String? {
        do {
            _ = try JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed)
            return nil
        } catch {
            var reason = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
            if reason.hasSuffix(".") { reason.removeLast() }
            return reason
        }
    }
}
