"""docs/reference.md: every setting and every metric by its full name, with the file that defines it.

A newcomer who finds `SENSE_KAFKA_BOOTSTRAP` in a deployment or `outbox_relay_backlog` on a dashboard
searches for it and lands on one row naming the module (settings are built from a prefix and a field name,
so the full name appears in no source file). The page is written from the code:
`YOVISION_WRITE_REFERENCE=1 pytest tests/unit/test_name_reference.py` after a change; this test fails
while it differs.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
from collections.abc import Iterator
from pathlib import Path

import yaml
from pydantic_settings import BaseSettings

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference.md"
SETTINGS_CLASSES = {
    "sense-reconciler": "sense_reconciler.settings:SenseReconcilerSettings",
    "orphan-scanner": "orphan_scanner.settings:OrphanScannerSettings",
    "bell-receiver": "bell_receiver.settings:BellReceiverSettings",
    "signal-watcher": "signal_watcher.settings:SignalWatcherSettings",
    "media-worker": "media_worker.settings:MediaWorkerSettings",
    "console": "console.settings:ConsoleSettings",
}
METRIC_FACTORIES = frozenset(
    {
        "labeled_counter",
        "labeled_gauge",
        "labeled_histogram",
        "Counter",
        "Gauge",
        "Histogram",
        "Summary",
        "Info",
    }
)
METRIC_NAME = re.compile(r"[a-z_][a-z0-9_]*")
SAMPLE_SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)")
PROMQL_NAME = re.compile(r"\b([a-z_][a-z0-9_]*)\s*(?:\{|\[|\)| [<>]| and| or|$)")


def _where(obj: object) -> str:
    path = inspect.getsourcefile(obj)  # type: ignore[arg-type]
    assert path is not None
    return str(Path(path).resolve().relative_to(ROOT))


def _settings_class(spec: str) -> type[BaseSettings]:
    module_name, _, class_name = spec.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    assert issubclass(cls, BaseSettings)
    return cls


def settings_rows() -> Iterator[tuple[str, str, str]]:
    for service, spec in SETTINGS_CLASSES.items():
        cls = _settings_class(spec)
        prefix = str(cls.model_config.get("env_prefix", ""))
        for field_name in sorted(cls.model_fields):
            owner = next(base for base in cls.__mro__ if field_name in getattr(base, "__annotations__", {}))
            yield (
                f"{prefix}{field_name}".upper(),
                service,
                f"`{_where(owner)}` ({owner.__name__}.{field_name})",
            )
        for former, current in getattr(cls, "renamed_settings", {}).items():
            yield former, service, f"former name of `{current}`, read until the next release"


def _production_files() -> Iterator[Path]:
    yield from sorted((ROOT / "libs" / "platform" / "src").rglob("*.py"))
    yield from sorted((ROOT / "services").glob("*/src/**/*.py"))


def _exported(factory: str, name: str) -> str:
    """The name a scrape shows: a counter's samples end in `_total` whether or not it was declared so."""
    counter = factory in {"labeled_counter", "Counter"}
    return name if not counter or name.endswith("_total") else f"{name}_total"


def metric_rows() -> dict[str, str]:
    """Exported metric name -> where and how it is declared, from every metric factory call with a literal
    name (a renamed metric's `former_name` is a row of its own)."""
    rows: dict[str, str] = {}
    for path in _production_files():
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            factory = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if factory not in METRIC_FACTORIES:
                continue
            names = [
                arg.value
                for arg in node.args[:2]
                if isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and METRIC_NAME.fullmatch(arg.value)
            ]
            if not names:
                continue
            name = names[0]
            rows.setdefault(_exported(factory, name), f"`{where}` (`{name}`)")
            for keyword in node.keywords:
                if keyword.arg == "former_name" and isinstance(keyword.value, ast.Constant):
                    former = _exported(factory, str(keyword.value.value))
                    rows.setdefault(former, f"`{where}` (former name of `{name}`, until the next release)")
    return rows


def render() -> str:
    lines = [
        "# Names: every setting and metric, and where the code defines it",
        "",
        "Written from the code by `tests/unit/test_name_reference.py` (`YOVISION_WRITE_REFERENCE=1` to",
        "rewrite); the meanings are in the settings classes' docstrings and the",
        "[glossary](architecture.md#glossary). Renamed names: [`migrating.md`](migrating.md).",
        "",
        "## Settings (environment variables)",
        "",
        "| setting | service | defined in |",
        "|---|---|---|",
    ]
    lines += [f"| `{name}` | {service} | {where} |" for name, service, where in settings_rows()]
    lines += ["", "## Metrics", "", "| metric | declared in |", "|---|---|"]
    lines += [f"| `{name}` | {where} |" for name, where in sorted(metric_rows().items())]
    return "\n".join(lines) + "\n"


def test_the_reference_page_is_written_from_the_code() -> None:
    text = render()
    if os.environ.get("YOVISION_WRITE_REFERENCE") == "1":
        REFERENCE.write_text(text, encoding="utf-8")
    assert REFERENCE.read_text(encoding="utf-8") == text, (
        "docs/reference.md differs: rewrite it (see docstring)"
    )


def _is_declared(sample: str, known: dict[str, str]) -> bool:
    return sample in known or any(
        sample.endswith(suffix) and sample.removesuffix(suffix) in known for suffix in SAMPLE_SUFFIXES
    )


def test_every_metric_an_alert_uses_is_found_by_its_name() -> None:
    """The scan is complete enough to trust: each metric the alert rules read is declared, by a literal
    name, in one production file."""
    known = metric_rows()
    rules = yaml.safe_load((ROOT / "infra" / "prometheus" / "alerts.yml").read_text())
    used = {
        match
        for group in rules["groups"]
        for rule in group["rules"]
        for match in PROMQL_NAME.findall(GROUPING.sub("", rule["expr"]))
        if "_" in match
    }
    assert used, "no metric found in the alert rules: the pattern no longer reads them"
    missing = sorted(name for name in used if not _is_declared(name, known) and not name.startswith("up"))
    assert missing == []
