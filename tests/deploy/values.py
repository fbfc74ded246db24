"""The values a render used: values.yaml, overlaid by the required values, the production file and `--set`
values as helm does."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from tests.deploy.chart import CHART, PRODUCTION_VALUES, REQUIRED_VALUES
from tests.deploy.renders import OPTIONS

__all__ = ["enabled_services", "values_of"]


def _merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _set(values: dict[str, Any], dotted: str, raw: str) -> None:
    *path, last = dotted.split(".")
    node = values
    for part in path:
        node = node.setdefault(part, {})
    if raw.startswith("{") and raw.endswith("}"):  # helm's --set list syntax
        node[last] = raw[1:-1].split(",")
        return
    node[last] = {"true": True, "false": False}.get(raw, raw)


def values_of(render_name: str) -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    values = _merge(values, yaml.safe_load(REQUIRED_VALUES.read_text()))
    if render_name.startswith("production"):
        values = _merge(values, yaml.safe_load(PRODUCTION_VALUES.read_text()))
    if render_name.endswith("+options"):
        for key, value in OPTIONS.items():
            _set(values, key, value)
    return values


def enabled_services(render_name: str) -> set[str]:
    return {name for name, service in values_of(render_name)["services"].items() if service["enabled"]}
