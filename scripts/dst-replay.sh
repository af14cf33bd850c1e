#!/usr/bin/env bash
# Replays one seed of the service's deterministic simulation and prints its
# whole event trace (docs/service-simulation.md):
#   scripts/dst-replay.sh SEED [SECONDS] [trainyard-dst options, e.g. --policy-churn=false]
# The same seed gives the same trace, byte for byte.
set -euo pipefail
cd "$(dirname "$0")/.."
seed="${1:?usage: scripts/dst-replay.sh SEED [SECONDS]}"
cargo build --locked --release -p trainyard-dst
exec target/release/trainyard-dst --seed "$seed" --seconds "${2:-300}" --trace "${@:3}"
