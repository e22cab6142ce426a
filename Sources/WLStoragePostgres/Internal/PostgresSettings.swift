internal import CWLStorageLibPQ
import Foundation

/// A connection string as libpq parsed it (`PQconninfoParse`, once, so a bad string is refused at creation): the
/// options to connect with, the server and database, and the secrets every message is cleared of (``redact(_:)``).
struct PostgresSettings: Sendable {
    /// The options handed to `PQconnectStartParams`: those of the connection string, then the store's own defaults.
    let keywords: [String]
    let values: [String]
    /// `postgresql://host:port/dbname`, without user or password.
    let location: String
    /// The `search_path` the connection sets (in `options` or `PGOPTIONS`): the schema of a table named without one.
    let searchPath: String?
    /// The values of the options libpq marks as secret (the password), as parsed and as written in the string.
    private let secrets: [String]

    /// Parses `url`; `timeout`, rounded up to seconds, is the connect timeout unless the string sets one.
    init(url: String, timeout: Duration) throws(PostgresError) {
        let written = Self.writtenSecrets(in: url)
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(url, &errorMessage) else {
            var message = "libpq cannot parse the connection string"
            if let errorMessage {
                let reason = String(cString: errorMessage).trimmingCharacters(in: .whitespacesAndNewlines)
                PQfreemem(errorMessage)
                message += ": " + Self.redact(reason, secrets: written)
            }
            throw PostgresError(.invalidSettings, message)
        }
        let entries = Self.entries(options)
        let parsed = entries.map { (keyword: $0.keyword, value: $0.value) }
        var secrets = written + entries.filter { $0.secret && !$0.value.isEmpty }.map(\.value)
        // A `dbname` (or `PGDATABASE`) may itself be a connection string, with a password: it is hidden too.
        let givenDatabase = parsed.last { $0.keyword == "dbname" }?.value ?? ""
        // libpq's defaults, from the environment (`PGHOST`, `PGPORT`, …) and its compiled-in values.
        let fallback =
            PQconndefaults().map { Dictionary(Self.entries($0).map { ($0.keyword, $0.value) }) { _, last in last } }
            ?? [:]
        secrets += [givenDatabase, fallback["dbname"] ?? ""].flatMap(Self.embeddedSecrets(in:))
        // Longest first, so that a secret containing another is hidden whole.
        self.secrets = Array(Set(secrets.filter { !$0.isEmpty })).sorted { $0.utf8.count > $1.utf8.count }

        // Whole seconds, rounded up, at least 2; a timeout of any length fits (libpq reads the value as an `int`).
        let (whole, fraction) = timeout.components
        let rounded = fraction > 0 && whole < Int64(Int32.max) ? whole + 1 : whole
        let seconds = max(2, min(rounded, Int64(Int32.max)))
        let defaults: [(keyword: String, value: String)] = [
            ("connect_timeout", String(seconds)),
            ("keepalives", "1"),
            ("keepalives_idle", "30"),
            ("keepalives_interval", "10"),
            ("keepalives_count", "3"),
            ("fallback_application_name", "WLStorage"),
        ]
        // Keys and payloads are exchanged as UTF-8, whatever the string asked for.
        let connectOptions =
            parsed.filter { $0.keyword != "client_encoding" }
            + defaults.filter { option in !parsed.contains { $0.keyword == option.keyword } }
            + [("client_encoding", "UTF8")]
        self.keywords = connectOptions.map(\.keyword)
        self.values = connectOptions.map(\.value)

        let given = Dictionary(parsed, uniquingKeysWith: { _, last in last })
        func value(_ keyword: String) -> String? {
            [given[keyword], fallback[keyword]].compactMap { $0 }.first { !$0.isEmpty }
        }
        let host = value("host") ?? value("hostaddr") ?? ""
        let port = value("port") ?? "5432"
        let database = Self.redact(value("dbname") ?? value("user") ?? "", secrets: self.secrets)
        self.location = "postgresql://\(Self.servers(hosts: host, ports: port))/\(Self.escape(database))"
        let hidden = self.secrets
        self.searchPath = value("options").flatMap(Self.searchPath(inOptions:)).map {
            Self.redact($0, secrets: hidden)
        }
    }

    /// `text` with every secret of the connection string replaced by `*****`.
    func redact(_ text: String) -> String { Self.redact(text, secrets: secrets) }

    private static func redact(_ text: String, secrets: [String]) -> String {
        secrets.filter { !$0.isEmpty }.reduce(text) { $0.replacingOccurrences(of: $1, with: "*****") }
    }

    /// The password as written in `url` (a URI's user information after the colon, raw and decoded, or a `password=`
    /// value), found without libpq so that it is hidden even from libpq's message about a string it cannot parse.
    private static func writtenSecrets(in url: String) -> [String] {
        var found: [String] = []
        if let scheme = url.range(of: "://") {
            let authority = url[scheme.upperBound...].prefix { $0 != "/" && $0 != "?" }
            if let at = authority.lastIndex(of: "@") {
                let userInformation = authority[..<at]
                if let colon = userInformation.firstIndex(of: ":") {
                    let password = String(userInformation[userInformation.index(after: colon)...])
                    found += [password, password.removingPercentEncoding].compactMap { $0 }
                }
            }
            for pair in url.split(whereSeparator: { $0 == "?" || $0 == "&" }) {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0].lowercased().hasSuffix("password") {
                    found += [String(parts[1]), String(parts[1]).removingPercentEncoding].compactMap { $0 }
                }
            }
        } else {
            var search = url[...]
            while let range = search.range(of: "password") {
                search = search[range.upperBound...]
                var value = search.drop { $0 == " " }
                guard value.first == "=" else { continue }
                value = value.dropFirst().drop { $0 == " " }
                let quoted = value.first == "'"
                found.append(
                    String(quoted ? value.dropFirst().prefix { $0 != "'" } : value.prefix { !$0.isWhitespace }))
            }
        }
        return found.filter { !$0.isEmpty }
    }

    /// The passwords of `database` when it is itself a connection string, as written and as libpq parses them.
    private static func embeddedSecrets(in database: String) -> [String] {
        guard database.contains("=") || database.contains("://") else { return [] }
        let parsed = PQconninfoParse(database, nil).map { entries($0).filter(\.secret).map(\.value) } ?? []
        return (writtenSecrets(in: database) + parsed).filter { !$0.isEmpty }
    }

    /// The value given to `search_path` by libpq's `options` (`-c search_path=a,b`, `-csearch_path=…`,
    /// `--search_path=…`, `--search-path=…`; a backslash escapes the next character), the last one when several are.
    static func searchPath(inOptions options: String) -> String? {
        var words: [String] = []
        var word = ""
        var escaped = false
        for character in options {
            if escaped || (character != "\\" && !character.isWhitespace) {
                word.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else {
                if !word.isEmpty { words.append(word) }
                word = ""
            }
        }
        if !word.isEmpty { words.append(word) }
        var found: String?
        var index = 0
        while index < words.count {
            var setting: Substring?
            if words[index] == "-c", index + 1 < words.count {
                setting = words[index + 1][...]
                index += 1
            } else if words[index].hasPrefix("--") || words[index].hasPrefix("-c") {
                setting = words[index].dropFirst(2)
            }
            index += 1
            guard let setting, let equals = setting.firstIndex(of: "=") else { continue }
            let name = setting[..<equals].lowercased().replacingOccurrences(of: "-", with: "_")
            if name == "search_path" { found = String(setting[setting.index(after: equals)...]) }
        }
        return found
    }

    /// The options with a value of a libpq option array, in order, each with whether libpq marks it secret; frees it.
    private static func entries(
        _ options: UnsafeMutablePointer<PQconninfoOption>
    ) -> [(keyword: String, value: String, secret: Bool)] {
        defer { PQconninfoFree(options) }
        var entries: [(keyword: String, value: String, secret: Bool)] = []
        var option = options
        while let keyword = option.pointee.keyword {
            defer { option += 1 }
            guard let value = option.pointee.val else { continue }
            let secret = option.pointee.dispchar.map { String(cString: $0) == "*" } ?? false
            entries.append((String(cString: keyword), String(cString: value), secret))
        }
        return entries
    }

    private static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// `host:port`, or `a:1,b:2` for several servers (`host=a,b port=1,2`); one port serves every host.
    static func servers(hosts: String, ports: String) -> String {
        let hostList = hosts.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let portList = ports.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        return hostList.enumerated().map { index, host in
            let port = portList.count == hostList.count ? portList[index] : (portList.first ?? "5432")
            return "\(escape(host)):\(escape(port.isEmpty ? "5432" : port))"
        }.joined(separator: ",")
    }

    /// `text` percent-encoded for a URI component.
    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }
}

/// A failure of a connection or a query, its message already free of secrets.
struct PostgresError: Error, CustomStringConvertible, Sendable {
    enum Kind: Sendable {
        /// The connection string or a name given to the store is not usable.
        case invalidSettings
        case connectionFailed
        /// A connection or a query took longer than the timeout; the connection was dropped.
        case timedOut
        case connectionLost
        case queryFailed
    }

    var kind: Kind
    var message: String
    /// The server's SQLSTATE code, for a refused statement.
    var sqlState: String?

    init(_ kind: Kind, _ message: String, sqlState: String? = nil) {
        self.kind = kind
        self.message = message
        self.sqlState = sqlState
    }

    var description: String { message }
}
