#!/usr/bin/env bash
# Runs two builds of the benchmark executable in turn, round after round, and prints each case's figures for both:
# the way to measure a change "before and after in one run, interleaved", so that the machine's load falls on both.
#
#   Benchmarks/Scripts/compare-builds.sh BEFORE_BINARY AFTER_BINARY ROUNDS [--quick] [--filter NAME]...
#
# Build each side with `swift build -c release --product WLStorageBenchmarks` in its own checkout (a git worktree of
# the earlier commit, for example). Every round runs BEFORE then AFTER (odd rounds) or AFTER then BEFORE (even
# rounds). The table gives, for every row, the median over the rounds of each side's value and ratio to its baseline.
set -euo pipefail
if [[ $# -lt 3 ]]; then
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
before=$1 after=$2 rounds=$3
shift 3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((round = 1; round <= rounds; round++)); do
    if ((round % 2)); then order=(before after); else order=(after before); fi
    for side in "${order[@]}"; do
        binary=$before
        [[ $side == after ]] && binary=$after
        echo "round $round: $side" >&2
        # A side that misses a guarded target exits 1 after its figures: they are kept, and the miss is said.
        status=0
        "$binary" --json "$@" >"$out/$side-$round.json" 2>"$out/$side-$round.log" || status=$?
        if ((status == 1)); then
            echo "round $round: $side missed a guarded target: $(tail -n 1 "$out/$side-$round.log")" >&2
        elif ((status != 0)); then
            echo "round $round: $side failed with status $status:" >&2
            tail -n 20 "$out/$side-$round.log" >&2
            exit "$status"
        fi
    done
done
python3 - "$out" "$rounds" <<'PYTHON'
import json, statistics, sys
directory, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for side in ("before", "after"):
    for round in range(1, rounds + 1):
        with open(f"{directory}/{side}-{round}.json") as file:
            for row in json.load(file)["rows"]:
                # Rows of one subject against different baselines (get against a Mutex, and against the floor) stay apart.
                key = (row["caseID"], row["title"], row.get("subject", ""), row.get("baseline") or "")
                entry = rows.setdefault(key, {"before": [], "after": [], "unit": row["value"]["unit"]})
                entry[side].append((row["value"]["median"], row.get("ratio")))

def summary(samples, unit):
    if not samples:
        return "-"
    value = statistics.median(v for v, _ in samples)
    ratios = [r for _, r in samples if r is not None]
    text = f"{value:.4g} {unit}"
    if ratios:
        text += f", {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
    return text

print(f"| Case | Row | Baseline | Before | After |")
print(f"| --- | --- | --- | --- | --- |")
for (case, title, subject, baseline), entry in rows.items():
    print(f"| {case} | {title} ({subject}) | {baseline or '-'} | {summary(entry['before'], entry['unit'])} | "
          f"{summary(entry['after'], entry['unit'])} |")
PYTHON
