/// The options given before the command.
struct GlobalOptions: Equatable {
    /// The storage directory given with `--dir`.
    var directory: String?
    /// The program whose default directory to use, given with `--program`.
    var program: String?
    /// The suite whose directory to use, given with `--suite`: the directory `.suite(name)` names in the library.
    var suite: String?
    /// Whether `--debug` selects the debug build's folder, `.wlstorage_debug`.
    var debug = false
    /// The PostgreSQL connection string given with `--postgres`: the commands work on the store's rows.
    var postgres: String?
    /// The etcd endpoints given with `--etcd`, separated by commas: the commands work on the store's keys.
    var etcd: String?
    /// The namespace given with `--namespace`, with `--postgres` or `--etcd`.
    var namespace: String?
    /// The key file given with `--key-file`: the values are encrypted with the key it holds.
    var keyFile: String?
}

/// The commands of the tool, by the name typed on the command line.
enum CommandName: String, CaseIterable, Equatable {
    case get, set, rm, path, hash, list, verify, watch, help
}

/// What `help` shows besides the tool's help: a command's, or how keys and programs name files and folders.
enum HelpTopic: Equatable {
    case command(CommandName)
    case naming
}

/// A command with its arguments.
enum Command: Equatable {
    /// Help for the tool, or on one topic.
    case help(HelpTopic?)
    /// Prints the values of `keys`, one or more.
    case get(keys: [String])
    /// Stores `json`; `set KEY --string TEXT` gives the JSON string of TEXT.
    case set(key: String, json: String)
    case remove(key: String)
    case path(key: String)
    case hash(key: String)
    /// Lists the directory's entries, or only those of `keys` when there are any.
    case list(keys: [String])
    case verify
    /// Prints the value of `key` at each change; stops after `count` values when it is given.
    case watch(key: String, count: Int?)
}

/// Everything the command line asks for.
struct Invocation: Equatable {
    var options: GlobalOptions
    var command: Command
}

/// A command line the tool cannot run. The tool exits with status 64 (`EX_USAGE`).
struct UsageError: Error, Equatable {
    /// What is wrong, as one sentence.
    var message: String
    /// The command whose usage to point to, if the error is within one.
    var command: CommandName?
}

/// The first of `arguments`, the bytes of the command line after the program's name, that is not UTF-8, as a
/// usage error that says which and where.
///
/// Swift's `CommandLine.arguments` turns bytes that are not UTF-8 into U+FFFD, so such an argument would be read as
/// another key, another value or another path than the one given. Keys and values are Swift strings in the
/// programs that use the library, always valid UTF-8, so the tool takes only UTF-8 arguments.
func nonUTF8Argument(in arguments: [[UInt8]]) -> UsageError? {
    for (index, bytes) in arguments.enumerated() {
        var offset = 0
        while offset < bytes.count {
            let length = utf8SequenceLength(bytes, at: offset)
            if length == 0 {
                let hex = String(bytes[offset], radix: 16)
                let byte = "0x" + (hex.count == 1 ? "0" + hex : hex)
                return UsageError(
                    message: "argument \(index + 1) is not UTF-8 (byte \(byte) at byte \(offset))", command: nil)
            }
            offset += length
        }
    }
    return nil
}

/// Parses the arguments that follow the program's name.
///
/// The grammar is `[--dir DIR | --program NAME [--debug] | --suite NAME | --postgres URL [--namespace NS]
/// | --etcd ENDPOINTS [--namespace NS]] [--key-file PATH] COMMAND [ARGUMENT...]`. Global options come before the command; `--name=value` and `--name value` are both accepted.
/// Within a command, a token that starts with `--` is an option, `-h` asks for help and any other token (including
/// a negative number such as `-1`) is an argument; after a lone `--` every token is an argument.
///
/// - Returns: The invocation, or the usage error that stops it. Nothing is checked against the file system or
///   the environment here.
func parseArguments(_ arguments: [String]) -> Result<Invocation, UsageError> {
    var options = GlobalOptions()
    var index = arguments.startIndex
    while index < arguments.endIndex, arguments[index].hasPrefix("-") {
        let token = arguments[index]
        index += 1
        if token == "--" { break }
        let (name, inlineValue) = splitOption(token)
        switch name {
        case "--help", "-h":
            return .success(Invocation(options: options, command: .help(nil)))
        case "--debug":
            guard inlineValue == nil else { return usage("option --debug takes no value") }
            options.debug = true
        case "--dir", "--program", "--suite", "--postgres", "--etcd", "--namespace", "--key-file":
            let value: String
            if let inlineValue {
                value = inlineValue
            } else if index < arguments.endIndex {
                value = arguments[index]
                index += 1
            } else {
                return usage("option \(name) needs a value")
            }
            guard !value.isEmpty else { return usage("option \(name) needs a non-empty value") }
            switch name {
            case "--dir": options.directory = value
            case "--program": options.program = value
            case "--suite": options.suite = value
            case "--postgres": options.postgres = value
            case "--etcd": options.etcd = value
            case "--key-file": options.keyFile = value
            default: options.namespace = value
            }
        default:
            return usage("unknown option '\(name)'")
        }
    }
    if [options.directory, options.program, options.suite].compactMap({ $0 }).count > 1 {
        return usage("give one of --dir, --program and --suite")
    }
    if options.suite != nil && options.debug {
        return usage("--debug goes with --program: a suite's directory is the same for every build")
    }
    if options.postgres != nil
        && (options.directory != nil || options.program != nil || options.suite != nil || options.debug)
    {
        return usage("give --postgres or a directory (--dir, --program, --suite, --debug), not both")
    }
    if options.postgres != nil && options.etcd != nil {
        return usage("give --postgres or --etcd, not both")
    }
    if options.etcd != nil
        && (options.directory != nil || options.program != nil || options.suite != nil || options.debug)
    {
        return usage("give --etcd or a directory (--dir, --program, --suite, --debug), not both")
    }
    if options.namespace != nil && options.postgres == nil && options.etcd == nil {
        return usage("--namespace goes with --postgres or --etcd")
    }
    guard index < arguments.endIndex else { return usage("missing command") }
    guard let name = CommandName(rawValue: arguments[index]) else {
        return usage("unknown command '\(arguments[index])'")
    }
    return parseCommand(name, Array(arguments[(index + 1)...])).map { Invocation(options: options, command: $0) }
}

/// Parses the arguments of the command `name`.
private func parseCommand(_ name: CommandName, _ arguments: [String]) -> Result<Command, UsageError> {
    var positional: [String] = []
    var count: Int?
    var string: String?
    var index = 0
    var onlyArguments = false
    while index < arguments.count {
        let token = arguments[index]
        index += 1
        if onlyArguments || !(token.hasPrefix("--") || token == "-h") {
            positional.append(token)
            continue
        }
        let (option, inlineValue) = splitOption(token)
        switch option {
        case "--":
            onlyArguments = true
        case "--help", "-h":
            return .success(.help(.command(name)))
        case "--string" where name == .set:
            // The next token is the text whatever it looks like, so that `--string --x` stores "--x".
            guard let text = inlineValue ?? (index < arguments.count ? arguments[index] : nil) else {
                return usage("option --string needs a value (give '' for the empty string)", name)
            }
            if inlineValue == nil { index += 1 }
            string = text
        case "--count" where name == .watch:
            guard let text = inlineValue ?? (index < arguments.count ? arguments[index] : nil) else {
                return usage("option --count needs a value", name)
            }
            if inlineValue == nil { index += 1 }
            guard let number = Int(text), number > 0 else {
                return usage("option --count needs a positive whole number, not '\(text)'", name)
            }
            count = number
        default:
            return usage("unknown option '\(option)' for \(name.rawValue)", name)
        }
    }

    let expected: [String]
    switch name {
    case .help:
        guard positional.count <= 1 else { return usage("unexpected argument '\(positional[1])'", name) }
        guard let topic = positional.first else { return .success(.help(nil)) }
        if topic == "naming" { return .success(.help(.naming)) }
        guard let command = CommandName(rawValue: topic) else {
            let topics = CommandName.allCases.map(\.rawValue) + ["naming"]
            return usage("unknown help topic '\(topic)' (topics: \(topics.joined(separator: ", ")))", name)
        }
        return .success(.help(.command(command)))
    case .list: return .success(.list(keys: positional))
    case .get:
        guard !positional.isEmpty else { return usage("missing argument KEY", name) }
        return .success(.get(keys: positional))
    case .verify: expected = []
    case .set: expected = string == nil ? ["KEY", "JSON"] : ["KEY"]
    case .rm, .path, .hash, .watch: expected = ["KEY"]
    }
    if positional.count < expected.count {
        return usage("missing argument \(expected[positional.count])", name)
    }
    if positional.count > expected.count {
        let extra = positional[expected.count]
        if name == .set, string != nil {
            return usage("unexpected argument '\(extra)': with --string, the text is the one after --string", name)
        }
        return usage("unexpected argument '\(extra)'", name)
    }

    switch name {
    case .set: return .success(.set(key: positional[0], json: string.map(JSONText.string) ?? positional[1]))
    case .rm: return .success(.remove(key: positional[0]))
    case .path: return .success(.path(key: positional[0]))
    case .hash: return .success(.hash(key: positional[0]))
    case .verify: return .success(.verify)
    case .watch: return .success(.watch(key: positional[0], count: count))
    case .help, .get, .list: return .success(.help(nil))  // each returned above
    }
}

/// Splits `--name=value` into its name and value; any other token is a name without a value.
private func splitOption(_ token: String) -> (name: String, value: String?) {
    guard token.hasPrefix("--"), let equals = token.firstIndex(of: "=") else { return (token, nil) }
    return (String(token[..<equals]), String(token[token.index(after: equals)...]))
}

private func usage<T>(_ message: String, _ command: CommandName? = nil) -> Result<T, UsageError> {
    .failure(UsageError(message: message, command: command))
}
