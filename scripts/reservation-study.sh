#!/usr/bin/env bash
# The reservations study of docs/simulator.md ("Reservations and
# backfill"): each dataset under reservations on (the default) and off
# (maxGangs: 0), with walltimes exact (--walltime-factor 1) and twice the
# run time (2); and with no walltime declared, reservations on without
# the runtime estimate (runtimeEstimate: null) and with it (the default:
# the ends of running jobs from the runtimes their queue's jobs were
# observed to run).
# Prints one Markdown table per dataset from the runs' summary.json files.
#
#   scripts/reservation-study.sh OUT_DIR [TRAINYARD_BINARY]
#
# Needs ../shared/data/openb beside the checkout for the openb rows
# (skipped, with a note, without it). A release build is expected:
#   cargo build --release --bin trainyard
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/reservation-study.sh OUT_DIR [TRAINYARD_BINARY]}
bin=${2:-target/release/trainyard}
mkdir -p "$out"
printf '{}\n' > "$out/on.yaml"
printf 'reservations: {maxGangs: 0}\n' > "$out/off.yaml"
printf 'reservations: {runtimeEstimate: {}}\n' > "$out/estimate.yaml"
printf 'reservations: {runtimeEstimate: null}\n' > "$out/no-estimate.yaml"

run() { # name, then simulate's input arguments
    local name=$1
    shift
    for w in 1 2; do
        "$bin" simulate "$@" --walltime-factor "$w" \
            --policy "$out/on.yaml" --policy "$out/off.yaml" \
            --out "$out/$name-w$w" --output json > /dev/null
    done
    "$bin" simulate "$@" --policy "$out/no-estimate.yaml" --policy "$out/estimate.yaml" \
        --out "$out/$name-w0" --output json > /dev/null
}

run week --cluster examples/sim/cluster.yaml --queues examples/sim/queues.yaml \
    --workload examples/sim/workload.yaml
run teams --cluster examples/sim/teams-cluster.yaml --queues examples/sim/teams-queues.yaml \
    --workload examples/sim/teams-workload.yaml
run starve --cluster examples/sim/cluster.yaml --queues examples/sim/starve-queues.yaml \
    --workload examples/sim/starve-workload.yaml
openb=../shared/data/openb
if [ -f "$openb/openb_pod_list_default.csv" ]; then
    run openb --cluster "$openb/openb_node_list_gpu_node.csv" \
        --trace "$openb/openb_pod_list_default.csv"
else
    echo "note: $openb not found: the openb rows are left out" >&2
fi

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def fmt(s):
    s = int(round(s))
    if s < 60: return f"{s}s"
    if s < 3600: return f"{s//60}m{s%60:02d}s"
    if s < 86400: return f"{s//3600}h{(s%3600)//60:02d}m"
    return f"{s//86400}d{(s%86400)//3600}h"
for name in ["week", "teams", "starve", "openb"]:
    runs = []
    for w, pol, label in [
        (1, "on", "on, walltime ×1"),
        (1, "off", "off, walltime ×1"),
        (2, "on", "on, walltime ×2"),
        (2, "off", "off, walltime ×2"),
        (0, "no-estimate", "on, no walltime"),
        (0, "estimate", "on + estimate, no walltime"),
    ]:
        p = os.path.join(out, f"{name}-w{w}", pol, "summary.json")
        if os.path.exists(p):
            runs.append((label, json.load(open(p))))
    if not runs:
        continue
    print(f"\n### {name}\n")
    print("| | " + " | ".join(r[0] for r in runs) + " |")
    print("|---" * (len(runs) + 1) + "|")
    classes = []
    for _, s in runs:
        for c in s.get("waitBySize", []):
            if c["class"] not in classes:
                classes.append(c["class"])
    for c in classes:
        cells = []
        for _, s in runs:
            m = next((x for x in s.get("waitBySize", []) if x["class"] == c), None)
            if m is None:
                cells.append("-")
                continue
            w = m["waitSeconds"]
            never = f" ({m['neverStarted']} never started)" if m["neverStarted"] else ""
            cells.append(f"{fmt(w['p50'])} / {fmt(w['p95'])} / {fmt(w['p99'])}{never}")
        print(f"| wait p50/p95/p99, {c} GPUs | " + " | ".join(cells) + " |")
    rows = [
        ("GPU allocation", lambda s: f"{100*s['gpuAllocationRatio']:.1f}%"),
        ("Jain's index", lambda s: f"{s['jainFairness']:.3f}"),
        ("lost GPU-hours", lambda s: f"{s['preemption']['lostGpuHours']:.0f}"),
        ("reserved jobs", lambda s: str(s.get("reservedJobs", 0))),
    ]
    for label, f in rows:
        print(f"| {label} | " + " | ".join(f(s) for _, s in runs) + " |")
PY
