"""SQL of the ownership projection: device claims and path ownership history (schema `orphan`), per
MediaMTX server: a claim names its server (NULL: from before several servers, the name on every server)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from orphan_scanner.domain.classify import ServerPath
from yovision_platform.db import DbConnection, Identifier


@dataclass(frozen=True)
class DeviceClaim:
    device_id: uuid.UUID
    tenant_id: str
    site_id: str
    path_name: str
    media_server_id: str | None
    desired_state: str
    config_version: int
    event_id: uuid.UUID
    occurred_at: datetime


@dataclass(frozen=True)
class OwnershipEvidence:
    path_name: str
    media_server_id: str
    device_id: uuid.UUID
    tenant_id: str
    site_id: str
    first_seen_at: datetime
    last_seen_at: datetime


class ProjectionStore:
    def __init__(self, schema: Identifier) -> None:
        s = schema.quoted
        # Sense publishes each device's events in order on one partition; the version guard keeps a claim
        # from ever moving backwards should an older event be replayed by hand.
        self._upsert_claim = f"""
            INSERT INTO {s}.device_claims AS c (device_id, tenant_id, site_id, path_name, desired_state,
                                                config_version, last_event_id, occurred_at, media_server_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
            ON CONFLICT (device_id) DO UPDATE
               SET tenant_id = excluded.tenant_id, site_id = excluded.site_id,
                   path_name = excluded.path_name, desired_state = excluded.desired_state,
                   media_server_id = excluded.media_server_id,
                   config_version = excluded.config_version, last_event_id = excluded.last_event_id,
                   occurred_at = excluded.occurred_at, updated_at = now()
             WHERE c.config_version <= excluded.config_version
        """
        self._upsert_ownership = f"""
            INSERT INTO {s}.path_ownership AS o (path_name, device_id, tenant_id, site_id,
                                                 first_seen_at, last_seen_at, media_server_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            ON CONFLICT (media_server_id, path_name, device_id) DO UPDATE
               SET first_seen_at = least(o.first_seen_at, excluded.first_seen_at),
                   last_seen_at = greatest(o.last_seen_at, excluded.last_seen_at)
        """
        self._claimed = f"""
            SELECT DISTINCT path_name FROM {s}.device_claims
             WHERE desired_state = 'enabled' AND path_name = ANY($1::text[])
               AND (media_server_id = $2 OR media_server_id IS NULL)
        """
        self._last_owner = f"""
            SELECT DISTINCT ON (path_name) path_name, device_id FROM {s}.path_ownership
             WHERE media_server_id = $2 AND path_name = ANY($1::text[])
             ORDER BY path_name, last_seen_at DESC, device_id
        """

    async def apply_claim(self, conn: DbConnection, claim: DeviceClaim) -> None:
        await conn.execute(
            self._upsert_claim,
            claim.device_id,
            claim.tenant_id,
            claim.site_id,
            claim.path_name,
            claim.desired_state,
            claim.config_version,
            claim.event_id,
            claim.occurred_at,
            claim.media_server_id,
        )

    async def record_ownership(self, conn: DbConnection, evidence: OwnershipEvidence) -> None:
        await conn.execute(
            self._upsert_ownership,
            evidence.path_name,
            evidence.device_id,
            evidence.tenant_id,
            evidence.site_id,
            evidence.first_seen_at,
            evidence.last_seen_at,
            evidence.media_server_id,
        )

    async def claimed_paths(self, conn: DbConnection, paths: Iterable[ServerPath]) -> set[ServerPath]:
        """The (server, path) pairs among `paths` that a current enabled device declares."""
        claimed: set[ServerPath] = set()
        for server, names in _by_server(paths).items():
            rows = await conn.fetch(self._claimed, names, server)
            claimed |= {ServerPath(server, r["path_name"]) for r in rows}
        return claimed

    async def last_owners(
        self, conn: DbConnection, paths: Iterable[ServerPath]
    ) -> dict[ServerPath, uuid.UUID]:
        """For each (server, path) among `paths` with ownership history there: its latest owning device."""
        owners: dict[ServerPath, uuid.UUID] = {}
        for server, names in _by_server(paths).items():
            for r in await conn.fetch(self._last_owner, names, server):
                owners[ServerPath(server, r["path_name"])] = r["device_id"]
        return owners


def _by_server(paths: Iterable[ServerPath]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for path in paths:
        grouped.setdefault(path.media_server_id, []).append(path.path_name)
    return grouped
