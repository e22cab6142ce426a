import Foundation
import WLStorage

/// A global storage, which Swift never deinitialises: only the package's exit flush can write it.
enum Globals {
    nonisolated(unsafe) static var directory = URL(fileURLWithPath: "/nonexistent")
    nonisolated(unsafe) static var key = ""
    static let storage = WLStorage(
        defaultValueClosure: { "" }, flushInterval: 3_600,
        backer: WLStorageDefaultBacker<String>(key: key, directory: directory))
}

/// The default backer, slowed down: each write announces itself on standard output and takes half a second.
final class SlowBacker: WLStorageBacker {
    let key: String
    private let backer: WLStorageDefaultBacker<String>

    init(directory: URL, key: String) {
        self.key = key
        self.backer = WLStorageDefaultBacker(key: key, directory: directory)
    }

    func read(defaultValueClosure: () -> String) throws -> String {
        try backer.read(defaultValueClosure: defaultValueClosure)
    }

    func write(value: String) throws {
        say("writing")
        usleep(500_000)
        try backer.write(value: value)
    }
}

/// Writes a line straight to the descriptor, unbuffered, so the test sees it at once.
func say(_ line: String, to handle: FileHandle = .standardOutput) {
    handle.write(Data((line + "\n").utf8))
}

/// The reference library's syntax, in a class: the default directory, which the test sets with WLSTORAGE_DIRECTORY.
final class Profile {
    @WLStorage(key: "first_name", defaultValue: nil)
    var firstName: String?
}

/// The same in a struct.
struct Appearance {
    @WLStorage(key: "theme", defaultValue: "dark")
    var theme: String
}
