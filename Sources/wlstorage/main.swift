import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// wlstorage: inspect and edit the files of a WLStorage directory. See Help.tool, or run `wlstorage --help`.

let status: ExitStatus
switch parseArguments(Array(CommandLine.arguments.dropFirst())) {
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
