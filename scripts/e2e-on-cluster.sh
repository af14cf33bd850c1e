#!/usr/bin/env bash
# Runs the service's end-to-end suite against a cluster through
# TRAINYARD_E2E_KUBECONFIG (docs/serve.md, "The end-to-end suite on a real
# cluster").
#
#   scripts/e2e-on-cluster.sh KUBECONFIG   # a disposable cluster with KWOK
#   scripts/e2e-on-cluster.sh              # the test API server as its own process
#
# Without an argument it starts `trainyard-testapi` (real clock, its
# simulated kubelet running pods) on a free port, so the same path that
# talks to a real cluster is exercised here.
set -euo pipefail
cd "$(dirname "$0")/.."
tests=(--test e2e --test e2e_admission --test e2e_sharing --test e2e_binds --test e2e_infer)
if [[ $# -ge 1 ]]; then
    TRAINYARD_E2E_KUBECONFIG="$1" cargo test --locked -p trainyard-serve "${tests[@]}"
    exit
fi
dir=$(mktemp -d)
cargo build --locked -q -p trainyard-testapi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
target/debug/trainyard-testapi --port "$port" --kubeconfig "$dir/kubeconfig" >"$dir/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
    [[ -s "$dir/kubeconfig" ]] && break
    sleep 0.1
done
TRAINYARD_E2E_KUBECONFIG="$dir/kubeconfig" cargo test --locked -p trainyard-serve "${tests[@]}"
