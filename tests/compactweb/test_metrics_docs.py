"""The Grafana dashboard (docs/grafana/compactweb-dashboard.json) and the alert rules of docs/operations.md use
only series compactweb.metrics defines (a renamed family breaks this, not a dashboard in production). That every
expression is valid PromQL is checked by a real Prometheus in tests/scale_out/test_prometheus_scrape.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

from compactweb import metrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "docs" / "grafana" / "compactweb-dashboard.json"
OPERATIONS = ROOT / "docs" / "operations.md"
NAME = re.compile(r"\bcompactweb_[a-z_]+[a-z]\b")


def defined_series() -> set[str]:
    names = set()
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            base = value._name
            kind = value._type
            if kind == "counter":
                names.add(base + "_total")
            elif kind == "histogram":
                names.update({base + "_bucket", base + "_count", base + "_sum"})
            else:
                names.add(base)
        elif isinstance(value, str) and value.startswith("compactweb_"):
            names.add(value)
    names.add(metrics.ALERTS_RAISED + "_total")
    return names


def dashboard_expressions() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in board["panels"] for target in panel["targets"]]


def alert_expressions() -> list[str]:
    section = OPERATIONS.read_text().split("### What to alert on", 1)[1].split("###", 1)[0]
    return [cells[1].strip().strip("`").replace("\\|", "|") for row in section.splitlines()
            if row.startswith("| ") and (cells := row.split(" | ")) and "compactweb_" in row]


def test_the_dashboard_and_the_alert_rules_use_only_defined_series():
    defined = defined_series()
    expressions = dashboard_expressions() + alert_expressions()
    assert len(dashboard_expressions()) >= 18 and len(alert_expressions()) >= 8
    used = {name for expr in expressions for name in NAME.findall(expr)}
    assert used - defined == set()


def test_the_dashboard_shows_every_family():
    shown = {name for expr in dashboard_expressions() for name in NAME.findall(expr)}
    families = {re.sub(r"_(bucket|count|sum)$", "", name) for name in shown}
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            name = value._name + ("_total" if value._type == "counter" else "")
            assert name in families, name
