"""Operator command-line tools (``python -m yovision_platform.tools.<name>``).

- ``consume``: print a topic's events as JSON lines, decoded with the repo's Avro schemas.
- ``produce_smoke``: publish one ``SmokeTestEvent`` to ``platform.smoke.v1``.
- ``schema_lock``: record schema fingerprints and archive previously committed schema versions.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["BOOTSTRAP_ENV", "DEFAULT_BOOTSTRAP", "STACK_ENV_RELATIVE_PATH", "resolve_bootstrap"]

BOOTSTRAP_ENV = "YOVISION_KAFKA_BOOTSTRAP"
DEFAULT_BOOTSTRAP = "127.0.0.1:19092"
STACK_ENV_RELATIVE_PATH = Path(".local") / "stack.env"


def resolve_bootstrap(explicit: str | None = None) -> str:
    """``--bootstrap`` if given, else ``$YOVISION_KAFKA_BOOTSTRAP``, else the value in ``.local/stack.env``
    (searched from the working directory and from this package upwards), else ``127.0.0.1:19092``."""
    if explicit:
        return explicit
    from_env = os.environ.get(BOOTSTRAP_ENV)
    if from_env:
        return from_env
    for stack_env in _stack_env_candidates():
        value = _read_shell_assignment(stack_env, BOOTSTRAP_ENV)
        if value:
            return value
    return DEFAULT_BOOTSTRAP


def _stack_env_candidates() -> list[Path]:
    starts = [Path.cwd().resolve(), Path(__file__).resolve().parent]
    seen: set[Path] = set()
    candidates: list[Path] = []
    for start in starts:
        for directory in (start, *start.parents):
            candidate = directory / STACK_ENV_RELATIVE_PATH
            if candidate not in seen and candidate.is_file():
                seen.add(candidate)
                candidates.append(candidate)
    return candidates


def _read_shell_assignment(path: Path, name: str) -> str | None:
    """Value of a ``NAME=value`` line (optionally ``export``-ed and quoted); the file is never executed."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for raw in lines:
        line = raw.strip()
        if line.startswith("export "):
            line = line[len("export ") :].strip()
        key, sep, value = line.partition("=")
        if sep and key.strip() == name:
            return value.strip().strip("'\"") or None
    return None
