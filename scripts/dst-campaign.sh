#!/usr/bin/env bash
# A campaign of the service's deterministic simulation (docs/service-simulation.md):
#   scripts/dst-campaign.sh MINUTES [FIRST_SEED]   # seeds on every core for MINUTES
# A failing seed prints its faults, violations and trace tail; replay it with
#   cargo run --release -p trainyard-dst -- --seed N --trace
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:?usage: scripts/dst-campaign.sh MINUTES [FIRST_SEED]}"
first="${2:-$(date +%s)}"
cargo build --locked --release -p trainyard-dst
exec target/release/trainyard-dst --from "$first" --minutes "$minutes"
