"""Re-encrypt stored secrets under the key ring's active key, in bounded batches, while the service runs.

A service describes its encrypted columns with a :class:`SecretRowStore`: pages of rows in id order, each
with its secret fields (ciphertext as stored, or legacy cleartext not encrypted yet), and a compare-and-swap
write. :func:`rotate_keys` walks every row once per pass: a row whose fields are all current is left alone;
any other is decrypted and encrypted again under the active key, and written only if its stored values are
still the ones read (``swap``). No lock is held across rows, so the API keeps writing meanwhile: a row the
service changed in between is counted ``changed_meanwhile`` and looked at again by the next pass.

Rows that cannot be decrypted (a key no longer in the ring, a tampered value) are counted by stable code
and left as they are; the caller reports them. Nothing here logs a value.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import asyncpg

from yovision_platform.security._encryption import EncryptionKeyRing, EncryptionSettings, SecretUnreadable
from yovision_platform.settings import BaseServiceSettings
from yovision_platform.storage._db import DbConnection, Identifier
from yovision_platform.web._service import ServiceCommand, ServiceSpec, checked_pool

__all__ = [
    "ROTATION_BATCH_ROWS_DEFAULT",
    "ROTATION_MAX_PASSES",
    "RotationReport",
    "SecretField",
    "SecretRow",
    "SecretRowStore",
    "rotate_keys",
    "rotate_keys_command",
    "rotation_exit_code",
]

ROTATION_BATCH_ROWS_DEFAULT = 200
ROTATION_BATCH_ROWS_MAX = 10_000
ROTATION_MAX_PASSES = 3


@dataclass(frozen=True)
class SecretField:
    """One encrypted field of a row. ``context`` is its associated data (row + field)."""

    context: str
    stored: bytes | None
    plaintext: bytes | None = None  # legacy cleartext, not encrypted yet

    def __repr__(self) -> str:
        return f"SecretField(context={self.context!r}, stored=<{'set' if self.stored else 'none'}>)"


@dataclass(frozen=True)
class SecretRow:
    row_id: Any
    fields: Mapping[str, SecretField]


class SecretRowStore(Protocol):
    async def page(self, conn: DbConnection, *, after: Any | None, limit: int) -> Sequence[SecretRow]:
        """At most ``limit`` rows with an id greater than ``after`` (all when None), in id order."""

    async def swap(self, conn: DbConnection, row: SecretRow, ciphertexts: Mapping[str, bytes | None]) -> bool:
        """Write ``ciphertexts`` (and clear any legacy cleartext) only if the row still holds exactly the
        values of ``row``; True when written."""


@dataclass
class RotationReport:
    active_key_id: str
    passes: int = 0
    rows_seen: int = 0
    rotated: int = 0
    already_current: int = 0
    changed_meanwhile: int = 0
    unreadable: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, object]:
        document = dataclasses.asdict(self)
        document["unreadable"] = dict(sorted(self.unreadable.items()))
        return document


def _needs_rotation(ring: EncryptionKeyRing, secret: SecretField) -> bool:
    if secret.stored is None:
        return secret.plaintext is not None
    return not ring.is_current(secret.stored)


def _reencrypt(ring: EncryptionKeyRing, secret: SecretField) -> bytes | None:
    if secret.stored is None:
        return None if secret.plaintext is None else ring.encrypt(secret.plaintext, context=secret.context)
    if ring.is_current(secret.stored):
        return secret.stored
    return ring.encrypt(ring.decrypt(secret.stored, context=secret.context), context=secret.context)


async def _one_pass(
    pool: asyncpg.Pool, store: SecretRowStore, ring: EncryptionKeyRing, report: RotationReport, batch: int
) -> int:
    """One walk over every row; returns how many rows changed meanwhile (to look at again)."""
    changed = 0
    after: Any | None = None
    while True:
        async with pool.acquire() as conn:
            rows = await store.page(conn, after=after, limit=batch)
            for row in rows:
                report.rows_seen += 1
                if not any(_needs_rotation(ring, secret) for secret in row.fields.values()):
                    report.already_current += 1
                    continue
                try:
                    fresh = {name: _reencrypt(ring, secret) for name, secret in row.fields.items()}
                except SecretUnreadable as exc:
                    report.unreadable[exc.code] += 1
                    continue
                if await store.swap(conn, row, fresh):
                    report.rotated += 1
                else:
                    changed += 1
        if len(rows) < batch:
            return changed
        after = rows[-1].row_id


async def rotate_keys(
    pool: asyncpg.Pool,
    store: SecretRowStore,
    ring: EncryptionKeyRing,
    *,
    batch_rows: int = ROTATION_BATCH_ROWS_DEFAULT,
    max_passes: int = ROTATION_MAX_PASSES,
) -> RotationReport:
    """Re-encrypt every row not under the active key; passes repeat (at most ``max_passes``) while rows
    changed meanwhile. Rows counted ``unreadable`` are left untouched."""
    if not 1 <= batch_rows <= ROTATION_BATCH_ROWS_MAX:
        raise ValueError(f"batch_rows must be within 1..{ROTATION_BATCH_ROWS_MAX}")
    report = RotationReport(ring.active_key_id)
    for _ in range(max_passes):
        report.passes += 1
        report.changed_meanwhile = await _one_pass(pool, store, ring, report, batch_rows)
        if not report.changed_meanwhile:
            break
    return report


def rotation_exit_code(report: RotationReport) -> int:
    """0 when every row is under the active key; 1 when some are unreadable or kept changing."""
    return 0 if not report.unreadable and not report.changed_meanwhile else 1


StoreFactory = Callable[[Identifier], SecretRowStore]


def rotate_keys_command(store_factory: StoreFactory) -> ServiceCommand[Any]:
    """The `<service> rotate-keys [--batch-rows N]` command: re-encrypt every row of the service's schema
    under the active key while the service keeps serving; prints the report as JSON (no value in it)."""

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--batch-rows",
            type=int,
            default=ROTATION_BATCH_ROWS_DEFAULT,
            help=f"rows read per batch (1..{ROTATION_BATCH_ROWS_MAX}, default {ROTATION_BATCH_ROWS_DEFAULT})",
        )

    async def run(spec: ServiceSpec[Any], settings: BaseServiceSettings, args: argparse.Namespace) -> int:
        if not isinstance(settings, EncryptionSettings):
            raise TypeError(f"{spec.name} has no encryption settings")
        if not 1 <= args.batch_rows <= ROTATION_BATCH_ROWS_MAX:
            print(f"{spec.name}: --batch-rows must be within 1..{ROTATION_BATCH_ROWS_MAX}", file=sys.stderr)
            return 2
        async with checked_pool(spec, settings, application=f"{spec.name}-rotate-keys") as (pool, plan):
            ring = settings.key_ring
            report = await rotate_keys(pool, store_factory(plan.schema), ring, batch_rows=args.batch_rows)
        print(json.dumps(report.as_dict()))
        return rotation_exit_code(report)

    return ServiceCommand(
        help="re-encrypt stored secrets under the active key, in bounded batches, while the service runs",
        run=run,
        add_arguments=add_arguments,
    )
