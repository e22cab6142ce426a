// The tool on values it must print: nothing hostile in a stored value reaches the terminal as a control.
import Dispatch
import Foundation
import Observation
import Synchronization
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct ToolOutputEscapingTests {
    /// `list` escapes names so that no terminal control reaches the terminal; `get` prints a value's strings as they
    /// are stored. JSON allows C1 controls (U+009B is CSI) and bidirectional overrides (U+202E) raw in a string, so a
    /// value written by another program reaches the terminal as controls. `\u009b` is the same JSON value, printed
    /// safely.
    @Test func getPrintsNoTerminalControlsFromAStoredValue() throws {
        try withTemporaryDirectory { root in
            let hostile = "\"a\u{9B}31mred\u{202E}txt.exe\""
            try Data(hostile.utf8).write(to: root.appendingPathComponent("k"))
            let get = try ChildProcess("wlstorage", ["--dir", root.path, "get", "k"])
            let end = try #require(get.waitForExit(timeout: 30))
            #expect(end.status == 0)
            #expect(eventually(timeout: 30) { get.printed.hasSuffix("\n") })
            let controls = get.printed.unicodeScalars.filter {
                (0x80...0x9F).contains($0.value) || $0.properties.generalCategory == .format
            }
            #expect(controls.isEmpty, "printed raw: \(controls.map { String($0.value, radix: 16) })")
        }
    }
}
