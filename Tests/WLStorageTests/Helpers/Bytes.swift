import Foundation

@testable import WLStorage

/// The UTF-8 bytes of `text`.
func json(_ text: String) -> Data { Data(text.utf8) }
