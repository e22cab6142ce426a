import Foundation

/// Whether bytes are a JSON text, as Foundation reads one: `JSONSerialization`'s verdict, with any value at the top
/// (`42`, `"abc"`, `null`), and its words for what is wrong.
///
/// It judges what is wrong with bytes that did not decode (not JSON at all, or JSON of another shape); whether bytes
/// decode is `JSONDecoder`'s to say. Like it, `JSONSerialization` reads UTF-8 with or without a byte order mark, arrays
/// and objects nested up to 512 deep, and refuses numbers beyond the range of a `Double`. Unlike `JSONDecoder`, which
/// reads strings and numbers only when asked for them, it checks every one.
package enum JSONSyntax {
    /// Why `data` is not a JSON text, in `JSONSerialization`'s words with the offset of the byte it is about, counted
    /// from 0 (`Invalid value around character 2`); `nil` when it is one.
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
