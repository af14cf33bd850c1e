#!/usr/bin/env bash
# The dashboard's browser benchmark (issue 48; docs/benchmarks.md): 5,000
# nodes and 50,000 pods on the in-process test API server, the service at
# its default 1 s cycle, each view rendered in headless Chromium and its
# updates timed while pods end and others bind. Needs Chromium and
# Playwright (scripts/install-browser.sh). Extra arguments go to the
# benchmark: --nodes N --pods P --rounds R.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(python3 -m site --user-base 2>/dev/null)/bin:$PATH"
exec cargo run --locked --release -p trainyard-api --example ui_bench -- "$@"
