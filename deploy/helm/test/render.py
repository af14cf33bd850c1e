#!/usr/bin/env python3
"""Renders and lints the Trainyard chart with the real Helm library.

The Helm SDK comes from the `helm-python-sdk` wheel on PyPI (it bundles Helm
as a shared library and works offline; scripts/install-test-tools.sh
installs it). tests/tests/deploy.rs drives this script; by hand:

  render.py render [-f VALUES]... --out DIR
      Renders the chart (release "trainyard", namespace "trainyard-system")
      and writes each non-empty manifest to DIR/<template file>, the chart's
      CRDs to DIR/crds/. Prints the files written, one a line.
  render.py lint [-f VALUES]... [--kube-version v1.35.0]
      Lints the chart strictly; prints every finding; exits 1 on a warning
      or an error.
  render.py manifests --out deploy/manifests
      Writes the plain manifests (default values) for kubectl users.
  render.py prometheus-rule --out deploy/prometheus
      Writes the chart's PrometheusRule (prometheusRule.enabled, otherwise
      default values) as trainyard-rules.yaml for kubectl users.

Values that the chart refuses (values.schema.json, or a check in the
templates) exit 2 with Helm's message on stderr, naming the key.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

try:
    from helm_python import HelmError, chart
except ImportError as e:  # the caller prints SKIPPED or fails on this code
    print(f"helm-python-sdk is not installed: {e}", file=sys.stderr)
    sys.exit(3)

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy" / "helm" / "trainyard"
RELEASE = "trainyard"
NAMESPACE = "trainyard-system"

# Lint severities of the Helm SDK: 1 info, 2 warning, 3 error.
WARNING = 2

# The order in which kubectl should create the plain manifests' objects
# (Helm's install order for these kinds).
KIND_ORDER = [
    "Namespace",
    "CustomResourceDefinition",
    "ServiceAccount",
    "ConfigMap",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "Deployment",
    "PodDisruptionBudget",
    "ServiceMonitor",
    "PrometheusRule",
]

MANIFEST_HEADER = """\
# Trainyard: the scheduler service, its CRDs and RBAC, as plain manifests for
# clusters without Helm: kubectl apply --server-side -f deploy/manifests/
#
# Generated from the Helm chart deploy/helm/trainyard with its default values
# (release "trainyard", namespace "trainyard-system"); do not edit. Change the
# chart, then regenerate with:
#   python3 deploy/helm/test/render.py manifests --out deploy/manifests
# tests/tests/deploy.rs fails while this file differs from the chart.
"""

NAMESPACE_DOC = f"""\
apiVersion: v1
kind: Namespace
metadata:
  name: {NAMESPACE}
  labels:
    app.kubernetes.io/part-of: trainyard
    # The scheduler's pod meets the "restricted" Pod Security Standard.
    pod-security.kubernetes.io/enforce: restricted
"""


def load_values(files: list[str]) -> dict:
    """The values files merged left to right, as `helm -f a -f b` does."""
    merged: dict = {}
    for f in files:
        doc = chart.values_from_yaml(Path(f).read_text())
        merged = deep_merge(merged, doc or {})
    return merged


def deep_merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def render(values: dict) -> dict[str, str]:
    """Template path -> rendered text, without NOTES.txt and empty output."""
    with chart.Chart.load(CHART) as c:
        out = c.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    return {
        path: text.strip() + "\n"
        for path, text in sorted(out.items())
        if not path.endswith("NOTES.txt") and text.strip()
    }


def crds() -> list[tuple[str, str]]:
    with chart.Chart.load(CHART) as c:
        return [(Path(x["filename"]).name, x["data"]) for x in c.crds]


def documents(text: str) -> list[str]:
    docs = re.split(r"^---[ \t]*$", text, flags=re.M)
    return [d.strip() + "\n" for d in docs if re.search(r"^kind:", d, flags=re.M)]


def kind_of(doc: str) -> str:
    m = re.search(r"^kind:\s*(\S+)", doc, flags=re.M)
    return m.group(1) if m else ""


def cmd_render(args: argparse.Namespace) -> int:
    manifests = render(load_values(args.values))
    out = Path(args.out)
    (out / "crds").mkdir(parents=True, exist_ok=True)
    for path, text in manifests.items():
        target = out / Path(path).name
        target.write_text(text)
        print(target)
    for name, data in crds():
        target = out / "crds" / name
        target.write_text(data)
        print(target)
    return 0


def cmd_lint(args: argparse.Namespace) -> int:
    report = chart.lint(
        CHART,
        load_values(args.values),
        strict=True,
        namespace=NAMESPACE,
        kube_version=args.kube_version,
    )
    failed = False
    for m in report.get("messages", []):
        severity = m.get("severity", 0)
        label = {1: "INFO", 2: "WARNING", 3: "ERROR"}.get(severity, "UNKNOWN")
        print(f"[{label}] {m.get('path', '')}: {m.get('error', '').strip()}")
        failed |= severity >= WARNING
    for e in report.get("errors", []):
        print(f"[ERROR] {e.strip()}")
        failed = True
    print(f"{report.get('total_charts_linted', 0)} chart(s) linted, {'failed' if failed else 'passed'}")
    return 1 if failed else 0


def cmd_manifests(args: argparse.Namespace) -> int:
    docs = [NAMESPACE_DOC]
    docs += [data.strip() + "\n" for _, data in crds()]
    for text in render({}).values():
        docs += documents(text)
    for d in docs:
        if kind_of(d) not in KIND_ORDER:
            print(f"no place in KIND_ORDER for kind {kind_of(d)!r}", file=sys.stderr)
            return 1
    docs.sort(key=lambda d: KIND_ORDER.index(kind_of(d)))
    # kubectl, not Helm, manages these objects.
    docs = [
        d.replace("app.kubernetes.io/managed-by: Helm", "app.kubernetes.io/managed-by: kubectl")
        for d in docs
    ]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "trainyard.yaml"
    target.write_text(MANIFEST_HEADER + "".join("---\n" + d for d in docs))
    print(target)
    return 0


RULE_HEADER = """\
# Trainyard's alerts as a PrometheusRule (Prometheus Operator), for clusters
# without Helm: kubectl apply -n trainyard-system -f deploy/prometheus/trainyard-rules.yaml
# (add the labels your Prometheus selects rules by).
#
# Generated from the Helm chart deploy/helm/trainyard (prometheusRule.enabled;
# the rules are deploy/helm/trainyard/files/prometheus-rules.yaml); do not
# edit. Change the chart's file, then regenerate with:
#   python3 deploy/helm/test/render.py prometheus-rule --out deploy/prometheus
# tests/tests/observability.rs fails while this file differs from the chart.
"""


def cmd_prometheus_rule(args: argparse.Namespace) -> int:
    rendered = render({"prometheusRule": {"enabled": True}})
    docs = [d for text in rendered.values() for d in documents(text) if kind_of(d) == "PrometheusRule"]
    if len(docs) != 1:
        print(f"expected one PrometheusRule, the chart rendered {len(docs)}", file=sys.stderr)
        return 1
    doc = docs[0].replace("app.kubernetes.io/managed-by: Helm", "app.kubernetes.io/managed-by: kubectl")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "trainyard-rules.yaml"
    target.write_text(RULE_HEADER + "---\n" + doc)
    print(target)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("render", help="render the chart into a directory")
    r.add_argument("-f", "--values", action="append", default=[], help="a values file (repeatable)")
    r.add_argument("--out", required=True)
    r.set_defaults(run=cmd_render)
    lint = sub.add_parser("lint", help="lint the chart strictly")
    lint.add_argument("-f", "--values", action="append", default=[])
    lint.add_argument("--kube-version", default=None, help="e.g. v1.35.0")
    lint.set_defaults(run=cmd_lint)
    m = sub.add_parser("manifests", help="write the plain manifests (default values)")
    m.add_argument("--out", required=True)
    m.set_defaults(run=cmd_manifests)
    pr = sub.add_parser("prometheus-rule", help="write the PrometheusRule of the alerts")
    pr.add_argument("--out", required=True)
    pr.set_defaults(run=cmd_prometheus_rule)
    args = p.parse_args()
    try:
        return args.run(args)
    except HelmError as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
