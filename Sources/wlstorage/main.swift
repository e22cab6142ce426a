import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// wlstorage: inspect and edit the files of a WLStorage directory. See Help.tool, or run `wlstorage --help`.

// The arguments as the bytes the system gave, which CommandLine.arguments repairs into valid UTF-8.
let rawArguments = (0..<Int(CommandLine.argc)).dropFirst().map { index in
    CommandLine.unsafeArgv[index].map { Array(UnsafeRawBufferPointer(start: $0, count: strlen($0))) } ?? []
}
let parsed =
    nonUTF8Argument(in: rawArguments).map { Result<Invocation, UsageError>.failure($0) }
    ?? parseArguments(Array(CommandLine.arguments.dropFirst()))

let status: ExitStatus
switch parsed {
case .failure(let error):
    Console.error("wlstorage: \(error.message)\n\(Help.usageLine(for: error.command))\n")
    let helpCommand = error.command.map { "wlstorage \($0.rawValue) --help" } ?? "wlstorage --help"
    Console.error("Run '\(helpCommand)' for more.\n")
    status = .usage
case .success(let invocation):
    do {
        status = try run(invocation, environment: ProcessInfo.processInfo.environment)
    } catch {
        Console.error("wlstorage: \(error.message)\n")
        if error.status == .usage { Console.error("Run 'wlstorage --help' for more.\n") }
        status = error.status
    }
}
exit(status.rawValue)
