"""SQL of the ownership projection: device claims and path ownership history (schema `orphan`), per
MediaMTX server: a claim names its server (NULL: from before several servers, the name on every server).
The PostgreSQL adapter of `service_layer.ports.ProjectionStore`, bound to one connection (a transaction)."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable

from orphan_scanner.domain.classify import ServerPath
from orphan_scanner.domain.records import DeviceClaim, OwnershipEvidence
from yovision_platform.storage import DbConnection, Identifier


class ProjectionSql:
    def __init__(self, schema: Identifier) -> None:
        s = schema.quoted
        # Sense publishes each device's events in order on one partition; the version guard keeps a claim
        # from ever moving backwards should an older event be replayed by hand.
        self.upsert_claim = f"""
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
        self.upsert_ownership = f"""
            INSERT INTO {s}.path_ownership AS o (path_name, device_id, tenant_id, site_id,
                                                 first_seen_at, last_seen_at, media_server_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            ON CONFLICT (media_server_id, path_name, device_id) DO UPDATE
               SET first_seen_at = least(o.first_seen_at, excluded.first_seen_at),
                   last_seen_at = greatest(o.last_seen_at, excluded.last_seen_at)
        """
        self.claimed = f"""
            SELECT DISTINCT path_name FROM {s}.device_claims
             WHERE desired_state = 'enabled' AND path_name = ANY($1::text[])
               AND (media_server_id = $2 OR media_server_id IS NULL)
        """
        self.last_owner = f"""
            SELECT DISTINCT ON (path_name) path_name, device_id FROM {s}.path_ownership
             WHERE media_server_id = $2 AND path_name = ANY($1::text[])
             ORDER BY path_name, last_seen_at DESC, device_id
        """


@functools.cache
def projection_sql(schema: Identifier) -> ProjectionSql:
    return ProjectionSql(schema)


class PostgresProjectionStore:
    def __init__(self, conn: DbConnection, schema: Identifier) -> None:
        self._conn = conn
        self._sql = projection_sql(schema)

    async def apply_claim(self, claim: DeviceClaim) -> None:
        await self._conn.execute(
            self._sql.upsert_claim,
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

    async def record_ownership(self, evidence: OwnershipEvidence) -> None:
        await self._conn.execute(
            self._sql.upsert_ownership,
            evidence.path_name,
            evidence.device_id,
            evidence.tenant_id,
            evidence.site_id,
            evidence.first_seen_at,
            evidence.last_seen_at,
            evidence.media_server_id,
        )

    async def claimed_paths(self, paths: Iterable[ServerPath]) -> set[ServerPath]:
        """The (server, path) pairs among `paths` that a current enabled device declares."""
        claimed: set[ServerPath] = set()
        for server, names in _by_server(paths).items():
            rows = await self._conn.fetch(self._sql.claimed, names, server)
            claimed |= {ServerPath(server, r["path_name"]) for r in rows}
        return claimed

    async def last_owners(self, paths: Iterable[ServerPath]) -> dict[ServerPath, uuid.UUID]:
        """For each (server, path) among `paths` with ownership history there: its latest owning device."""
        owners: dict[ServerPath, uuid.UUID] = {}
        for server, names in _by_server(paths).items():
            for r in await self._conn.fetch(self._sql.last_owner, names, server):
                owners[ServerPath(server, r["path_name"])] = r["device_id"]
        return owners


def _by_server(paths: Iterable[ServerPath]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for path in paths:
        grouped.setdefault(path.media_server_id, []).append(path.path_name)
    return grouped
