"""Record schema fingerprints and archive the previously committed version of every changed schema.

    python -m yovision_platform.tools.schema_lock [--schemas-dir DIR] [--rev HEAD] [--check]

A schema version counts as released once it is committed: producers may have published with it. For each
schema whose version at ``--rev`` (default ``HEAD``) differs from the working tree (or that was deleted),
the committed standalone version is written to ``_released/<full name>.<fingerprint>.avsc`` so that
``AvroSerde.decode`` still resolves its messages. Then ``fingerprints.json`` is rewritten: per full name
the current fingerprint and every released one.

Run it after editing a schema and before committing; ``--check`` writes nothing and exits 1 when something
would change (the contract tests fail in that case too). Without a commit (new repository) or for new
files there is nothing to archive, which the tool says.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yovision_platform.messaging import (
    FINGERPRINT_ALGORITHM,
    RELEASED_DIR_NAME,
    SAMPLES_DIR_NAME,
    SCHEMA_FILE_SUFFIX,
    EventContractError,
    SchemaRegistry,
    SchemaVersion,
    build_schema_versions,
    default_schemas_dir,
    released_file_name,
)

__all__ = [
    "FINGERPRINTS_FILE_NAME",
    "LockPlan",
    "apply_lock",
    "plan_lock",
    "read_documents_at_revision",
]

FINGERPRINTS_FILE_NAME = "fingerprints.json"
EXIT_CHANGES_PENDING = 1
EXIT_ERROR = 2


@dataclass(frozen=True)
class LockPlan:
    archive: Mapping[str, SchemaVersion]
    fingerprints: Mapping[str, Any]
    fingerprints_changed: bool
    committed_available: bool

    @property
    def changes_pending(self) -> bool:
        return bool(self.archive) or self.fingerprints_changed


def _git(schemas_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(schemas_dir), *args], capture_output=True, text=True, check=False)


def read_documents_at_revision(schemas_dir: Path, rev: str = "HEAD") -> dict[str, str] | None:
    """Current-schema documents (path relative to ``schemas_dir`` -> JSON text) as committed at ``rev``;
    ``{}`` when none are committed yet, None when there is no such revision or no git work tree."""
    if _git(schemas_dir, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").returncode != 0:
        return None
    listing = _git(schemas_dir, "ls-tree", "-r", "-z", "--name-only", rev, "--", ".")
    if listing.returncode != 0:
        return None
    documents: dict[str, str] = {}
    for relative in filter(None, listing.stdout.split("\0")):
        parts = Path(relative).parts
        if not relative.endswith(SCHEMA_FILE_SUFFIX) or parts[0] in (RELEASED_DIR_NAME, SAMPLES_DIR_NAME):
            continue
        shown = _git(schemas_dir, "show", f"{rev}:./{relative}")
        if shown.returncode != 0:
            return None
        documents[relative] = shown.stdout
    return documents


def plan_lock(schemas_dir: Path, rev: str = "HEAD") -> LockPlan:
    registry = SchemaRegistry.load(schemas_dir)
    committed_documents = read_documents_at_revision(schemas_dir, rev)
    committed = build_schema_versions(committed_documents) if committed_documents else {}
    released = {version.fingerprint: version for version in registry.released_versions()}
    archive: dict[str, SchemaVersion] = {}
    for full_name, old in committed.items():
        now = registry.current(full_name)
        if (now is None or now.fingerprint != old.fingerprint) and old.fingerprint not in released:
            archive[f"{RELEASED_DIR_NAME}/{released_file_name(old)}"] = old
    released_by_name: dict[str, set[str]] = {}
    for version in [*released.values(), *archive.values()]:
        released_by_name.setdefault(version.full_name, set()).add(version.fingerprint_hex)
    current = registry.current_versions()
    schemas = {
        name: {
            "current": current[name].fingerprint_hex if name in current else None,
            "released": sorted(released_by_name.get(name, set())),
        }
        for name in sorted(set(current) | set(released_by_name))
    }
    fingerprints = {"algorithm": FINGERPRINT_ALGORITHM, "byte_order": "little-endian", "schemas": schemas}
    return LockPlan(
        archive=archive,
        fingerprints=fingerprints,
        fingerprints_changed=_read_fingerprints(schemas_dir) != fingerprints,
        committed_available=committed_documents is not None,
    )


def apply_lock(plan: LockPlan, schemas_dir: Path) -> None:
    for relative, version in plan.archive.items():
        target = schemas_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(version.to_json(), encoding="utf-8")
    if plan.fingerprints_changed:
        text = json.dumps(plan.fingerprints, indent=2) + "\n"
        (schemas_dir / FINGERPRINTS_FILE_NAME).write_text(text, encoding="utf-8")


def _read_fingerprints(schemas_dir: Path) -> Any:
    path = schemas_dir / FINGERPRINTS_FILE_NAME
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m yovision_platform.tools.schema_lock", description=__doc__
    )
    parser.add_argument("--schemas-dir", type=Path, default=None, help="schemas/avro directory")
    parser.add_argument("--rev", default="HEAD", help="git revision holding the released schemas")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if changes are pending")
    args = parser.parse_args(argv)
    try:
        schemas_dir = args.schemas_dir if args.schemas_dir is not None else default_schemas_dir()
        plan = plan_lock(schemas_dir, args.rev)
    except EventContractError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_ERROR
    if not plan.committed_available:
        print(f"no revision {args.rev}: nothing released yet, nothing to archive")
    for relative in plan.archive:
        print(f"{'would archive' if args.check else 'archived'} {relative}")
    if plan.fingerprints_changed:
        print(f"{'would update' if args.check else 'updated'} {FINGERPRINTS_FILE_NAME}")
    if args.check:
        return EXIT_CHANGES_PENDING if plan.changes_pending else 0
    apply_lock(plan, schemas_dir)
    if not plan.changes_pending:
        print("schema lock up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
