import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What a row must reach: a ratio to its baseline, or a value, at most `limit`.
struct Target: Encodable {
    enum Kind: String, Encodable {
        case ratio
        case value
    }

    var kind: Kind
    var limit: Double
    /// The unit of `limit` for a value target.
    var unit: String?

    static func ratio(atMost limit: Double) -> Target {
        Target(kind: .ratio, limit: limit, unit: nil)
    }

    static func value(atMost limit: Double, unit: String) -> Target {
        Target(kind: .value, limit: limit, unit: unit)
    }

    var text: String {
        switch kind {
        case .ratio: return "≤ \(formatRatio(limit))"
        case .value: return "≤ \(formatQuantity(limit, unit: unit ?? ""))"
        }
    }
}

/// One line of the results: a measured value, optionally its baseline, the ratio and the target.
struct Row: Encodable {
    /// The case this row belongs to, as `--filter` matches it.
    var caseID: String
    /// What is measured, in words.
    var title: String
    var subject: String
    var value: Stats
    var baseline: String?
    var baselineValue: Stats?
    /// `value` over `baselineValue` (see ``Stats/ratio(to:)``).
    var ratio: Double?
    var target: Target?
    /// Whether the target is met; `nil` for rows that only report.
    var met: Bool?
    var note: String?
    /// A missed target fails the run (its exit status is 1), outside `--quick`: the hot paths whose drift must not go
    /// unseen.
    var guards: Bool

    init(
        caseID: String, title: String, subject: String, value: Stats, baseline: String? = nil,
        baselineValue: Stats? = nil, target: Target? = nil, note: String? = nil, guards: Bool = false
    ) {
        self.caseID = caseID
        self.title = title
        self.subject = subject
        self.value = value
        self.baseline = baseline
        self.baselineValue = baselineValue
        self.ratio = baselineValue.map { value.ratio(to: $0) }
        self.target = target
        self.note = note
        self.guards = guards
        if let target {
            switch target.kind {
            case .ratio: self.met = ratio.map { $0 <= target.limit }
            case .value: self.met = value.median <= target.limit
            }
        }
    }
}

/// The machine the results come from.
struct Machine: Encodable {
    var processors: Int
    var cpu: String
    var kernel: String

    static func current() -> Machine {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n")
            .first { $0.hasPrefix("model name") }
            .flatMap { $0.split(separator: ":", maxSplits: 1).last }
            .map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown"
        var names = utsname()
        uname(&names)
        let release = withUnsafeBytes(of: &names.release) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
        return Machine(processors: Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), cpu: model, kernel: release)
    }
}

/// Everything one run measured.
struct Report: Encodable {
    var machine: Machine
    var mode: String
    var date: String
    var rows: [Row]
    var skipped: [String]

    var missed: [Row] { rows.filter { $0.met == false } }

    func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data = try! encoder.encode(self)
        return String(decoding: data, as: UTF8.self)
    }

    /// A Markdown table: case, value, baseline, ratio, target, met.
    func table() -> String {
        var lines = [
            "WLStorage benchmarks (\(mode)), \(date)",
            "machine: \(machine.processors) processors, \(machine.cpu), Linux \(machine.kernel)",
            "values: median of the rounds (min–max); ratio = value / baseline, both measured in this run"
                + " (the median of round-by-round ratios where they were measured side by side)",
            "",
            "| case | value | baseline | ratio | target | met? |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for row in rows {
            let value = "\(row.subject): \(formatStats(row.value))"
            let baseline = row.baseline.map { name in
                row.baselineValue.map { "\(name): \(formatStats($0))" } ?? name
            }
            let met: String
            switch row.met {
            case true?: met = "yes"
            case false?: met = row.guards ? "MISSED (fails the run)" : "MISSED"
            case nil: met = "—"
            }
            var title = row.title
            if let note = row.note { title += " (\(note))" }
            let cells = [
                title, value, baseline ?? "—", row.ratio.map(formatRatio) ?? "—", row.target?.text ?? "—", met,
            ]
            lines.append(
                "| " + cells.map { $0.replacingOccurrences(of: "|", with: "\\|") }.joined(separator: " | ") + " |")
        }
        lines.append("")
        for name in skipped {
            lines.append("skipped: \(name)")
        }
        let missed = self.missed
        lines.append(
            missed.isEmpty
                ? "all targets met"
                : "\(missed.count) target(s) MISSED: "
                    + missed.map { "\($0.title) vs \($0.baseline ?? "target")" }
                    .joined(separator: "; "))
        return lines.joined(separator: "\n")
    }
}

// MARK: Formatting

func formatRatio(_ ratio: Double) -> String {
    if ratio >= 100 { return String(format: "%.0fx", ratio) }
    if ratio >= 0.01 { return String(format: "%.2fx", ratio) }
    return String(format: "%.1ex", ratio)
}

func formatQuantity(_ value: Double, unit: String) -> String {
    switch unit {
    case "ns":
        let magnitude = abs(value)
        if magnitude >= 1_000_000_000 { return String(format: "%.2f s", value / 1_000_000_000) }
        if magnitude >= 1_000_000 { return String(format: "%.3g ms", value / 1_000_000) }
        if magnitude >= 1_000 { return String(format: "%.3g µs", value / 1_000) }
        return String(format: "%.3g ns", value)
    case "count":
        return String(format: "%.0f", value)
    case "B" where abs(value) >= 100:
        return String(format: "%.0f B", value)
    default:
        return String(format: "%.3g", value) + " " + unit
    }
}

func formatStats(_ stats: Stats) -> String {
    let median = formatQuantity(stats.median, unit: stats.unit)
    guard stats.samples.count > 1 else { return median }
    return "\(median) (\(formatQuantity(stats.min, unit: stats.unit))–\(formatQuantity(stats.max, unit: stats.unit)))"
}
