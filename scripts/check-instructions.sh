#!/usr/bin/env bash
# Instruction-count check: runs the callgrind benchmarks of
# crates/bench/benches/instructions.rs (gungraun, under valgrind) and
# compares each benchmark's instruction count with the committed baseline
# crates/bench/baseline/instructions.toml.
#
#   scripts/check-instructions.sh            run, compare, print the table;
#                                            exit 1 when a count rose by more
#                                            than 10% or a benchmark is missing
#                                            from the baseline or the results
#   scripts/check-instructions.sh --bless    run and rewrite the baseline
#   scripts/check-instructions.sh --results FILE [--bless]
#                                            use gungraun's JSON lines in FILE
#                                            (`cargo bench ... -- --output-format=json`)
#                                            instead of running the benchmarks
#
# Needs valgrind and gungraun-runner of exactly the gungraun version in
# Cargo.lock (scripts/install-test-tools.sh installs it). Exit status: 0
# passed, 1 failed the check, 2 could not run.
set -euo pipefail
cd "$(dirname "$0")/.."

baseline=crates/bench/baseline/instructions.toml
limit_pct=10
bless=0
results=""
while [ $# -gt 0 ]; do
    case "$1" in
        --bless) bless=1 ;;
        --results)
            [ $# -ge 2 ] || { echo "check-instructions: --results needs a file" >&2; exit 2; }
            results="$2"
            shift
            ;;
        -h | --help)
            awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
            exit 0
            ;;
        *)
            echo "check-instructions: unknown argument '$1' (see --help)" >&2
            exit 2
            ;;
    esac
    shift
done

# The gungraun version the benchmarks are built with, from Cargo.lock.
gungraun_version=$(awk '/^name = "gungraun"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
if [ -z "$gungraun_version" ]; then
    echo "check-instructions: no gungraun package in Cargo.lock" >&2
    exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -z "$results" ]; then
    if ! command -v valgrind >/dev/null 2>&1; then
        echo "check-instructions: valgrind not found: cannot count instructions" >&2
        exit 2
    fi
    export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
    runner_version=$(gungraun-runner --version 2>/dev/null | awk '{ print $2 }' || true)
    if [ "$runner_version" != "$gungraun_version" ]; then
        echo "check-instructions: gungraun-runner ${runner_version:-not found}, the benchmarks need $gungraun_version:" >&2
        echo "  cargo install gungraun-runner --version $gungraun_version --locked --debug   (or scripts/install-test-tools.sh)" >&2
        exit 2
    fi
    echo "running the instruction-count benchmarks ($(valgrind --version), gungraun $gungraun_version)"
    start=$(date +%s)
    # JSON lines on stdout, one per benchmark; the build and gungraun's
    # own messages go to stderr.
    cargo bench --locked -p trainyard-bench --bench instructions -- --output-format=json \
        >"$tmp/results.jsonl"
    echo "built and ran the benchmarks in $(($(date +%s) - start)) s"
    results="$tmp/results.jsonl"
fi

rustc_version=$(rustc --version)
valgrind_version=$(valgrind --version 2>/dev/null || echo "valgrind not found")

python3 - "$results" "$baseline" "$limit_pct" "$bless" "$rustc_version" "$valgrind_version" "$gungraun_version" <<'EOF'
"""Compare gungraun's JSON summaries with the committed baseline."""
import json
import sys
import tomllib

results_path, baseline_path, limit_pct, bless, rustc, valgrind, gungraun = sys.argv[1:]
limit_pct = float(limit_pct)
bless = bless == "1"
# Two runs of the same binary differ by up to ~0.04% (the core's HashMap
# caches are seeded at random per process); changes within this band are
# reported as noise.
NOISE_PCT = 0.1
BLESS = "scripts/check-instructions.sh --bless"


def fail(msg):
    print(f"check-instructions: {msg}", file=sys.stderr)
    sys.exit(1)


def read_results(path):
    counts = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                bench = json.loads(line)
                name = f"{bench['function_name']}.{bench['id']}"
                [profile] = [p for p in bench["profiles"] if p["tool"] == "Callgrind"]
                ir = profile["data"]["total"]["metrics"]["Ir"]["values"]["new"]
            except (KeyError, ValueError, TypeError) as e:
                fail(f"{path}:{n}: not a gungraun benchmark summary with a callgrind Ir count ({e!r})")
            if name in counts:
                fail(f"{path}:{n}: benchmark {name} appears twice")
            counts[name] = int(ir)
    if not counts:
        fail(f"{path}: no benchmark results (did the benchmarks run?)")
    return counts


def write_baseline(path, counts):
    lines = [
        "# Instruction counts (callgrind Ir) of the benchmarks in",
        "# crates/bench/benches/instructions.rs: the baseline that",
        f"# scripts/check-instructions.sh compares with. A rise of more than {limit_pct:g}%",
        "# fails CI; update this file in the same commit as the change, with the",
        "# reason in the commit message.",
        "#",
        f"# Written by `{BLESS}` (one run of",
        "# `cargo bench -p trainyard-bench --bench instructions`); counts of the same",
        "# binary differ by up to ~0.04% between runs (HashMap seeds).",
        "",
        "[toolchain]",
        f'rustc = "{rustc}"',
        f'valgrind = "{valgrind}"',
        f'gungraun = "{gungraun}"',
        "",
        "[instructions]",
    ]
    lines += [f'"{name}" = {count}' for name, count in sorted(counts.items())]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


counts = read_results(results_path)
if bless:
    write_baseline(baseline_path, counts)
    print(f"wrote {len(counts)} benchmarks to {baseline_path}:")
    for name, count in sorted(counts.items()):
        print(f"  {name} = {count:,}")
    sys.exit(0)

try:
    with open(baseline_path, "rb") as f:
        base_doc = tomllib.load(f)
except FileNotFoundError:
    fail(f"no baseline {baseline_path}: write one with `{BLESS}`")
except tomllib.TOMLDecodeError as e:
    fail(f"{baseline_path}: {e}")
base = base_doc.get("instructions")
if not isinstance(base, dict) or not base:
    fail(f"{baseline_path}: no [instructions] table")

rows, failures, notes = [], [], []
for name in sorted(set(base) | set(counts)):
    old, new = base.get(name), counts.get(name)
    if not isinstance(old, int) and name in base:
        fail(f"{baseline_path}: {name} is not an integer count")
    if old is None:
        rows.append((name, "-", f"{new:,}", "not in baseline"))
        failures.append(f"{name}: ran, but has no count in {baseline_path}")
        continue
    if new is None:
        rows.append((name, f"{old:,}", "-", "did not run"))
        failures.append(f"{name}: in {baseline_path}, but not in the results")
        continue
    pct = (new - old) * 100.0 / old
    if pct > limit_pct:
        verdict = f"{pct:+.2f}%  REGRESSION (> +{limit_pct:g}%)"
        failures.append(f"{name}: {old:,} -> {new:,} instructions ({pct:+.2f}%)")
    elif pct < -limit_pct:
        verdict = f"{pct:+.2f}%  faster: update the baseline"
        notes.append(name)
    elif abs(pct) <= NOISE_PCT:
        verdict = f"{pct:+.2f}%  (noise)"
    else:
        verdict = f"{pct:+.2f}%"
    rows.append((name, f"{old:,}", f"{new:,}", verdict))

head = ("benchmark", "baseline", "now", "change")
widths = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
fmt = lambda r: f"| {r[0]:<{widths[0]}} | {r[1]:>{widths[1]}} | {r[2]:>{widths[2]}} | {r[3]:<{widths[3]}} |"
print(fmt(head))
print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
for r in rows:
    print(fmt(r))

recorded = base_doc.get("toolchain", {})
if recorded.get("rustc") not in (None, rustc):
    print(f"note: the baseline was written with {recorded['rustc']}, this is {rustc}; "
          "instruction counts move with the compiler")
if notes:
    print(f"note: {', '.join(notes)} fell by more than {limit_pct:g}%: "
          f"run `{BLESS}` and commit the lower baseline so later rises are measured from it")
if failures:
    print(f"\nFAILED: instruction counts checked against {baseline_path}:")
    for f in failures:
        print(f"  {f}")
    print(f"If the change is intended, run `{BLESS}` and commit {baseline_path} "
          "with the reason in the commit message.")
    sys.exit(1)
print(f"\nPASSED: no benchmark rose by more than {limit_pct:g}% over {baseline_path}.")
print(f"To update the baseline after an intended change: `{BLESS}`, then commit {baseline_path} with the reason.")
EOF
