#!/usr/bin/env bash
# Regenerates the dashboard's screenshots in docs/ui/ (issue 48): one PNG
# per view (queues, jobs, job, gpus, evictions) at 1400x900, taken by the
# browser test (crates/api/tests/ui_browser.rs) in headless Chromium on its
# cluster (two teams, a reclaim, running and pending jobs, a topology).
# Needs Chromium and Playwright: scripts/install-browser.sh.
#   scripts/ui-screenshots.sh [DIR]     (default docs/ui)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-docs/ui}"
mkdir -p "$dir"
export PATH="$(python3 -m site --user-base 2>/dev/null)/bin:$PATH"
# Fail, not skip, when the browser is missing: the point is the pictures.
TRAINYARD_REQUIRE_TOOLS=1 TRAINYARD_UI_SCREENSHOTS="$dir" \
    cargo test -p trainyard-api --test ui_browser -- --exact \
    every_view_shows_what_the_api_answers_and_follows_the_cluster --nocapture
for v in queues jobs job gpus evictions; do
    test -s "$dir/$v.png" || { echo "ui-screenshots: $dir/$v.png was not written" >&2; exit 1; }
done
ls -l "$dir"/*.png
