"""The native local stack as the rest of the code sees it: `.local/stack.env`, written by
`infra/scripts/stack.sh up`, names the admin DSN file, the Kafka bootstrap, the MediaMTX API URL and the
file with its API credentials.

An environment of the end-to-end suite may register several MediaMTX servers instead: its stack.env has
`YOVISION_MEDIA_SERVERS`, a JSON object `{"<id>": {"api_url": ..., "credentials_file": ...}}` (the format of
the services' `*_MEDIA_SERVERS` setting). The single server of the local stack has the id `default`.

Used by the dev-secrets tool, the test fixtures and the benchmarks; services never read it (they get their
settings from the environment).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from yovision_platform.mediamtx import MediaMtxCredentials

__all__ = ["LocalMediaServer", "LocalStack", "read_env_file", "runtime_dsn"]

SINGLE_SERVER_ID = "default"


def read_env_file(path: Path) -> dict[str, str]:
    """`KEY=VALUE` lines (shell style, no expansion; one pair of surrounding single quotes is removed, as
    bash would); blank lines and `#` comments are skipped."""
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == "'":
                value = value[1:-1]
            values[key.strip()] = value.strip('"')
    return values


def runtime_dsn(admin_dsn: str, role: str, password: str) -> str:
    """The admin DSN's host, port and database with another role's credentials."""
    parts = urlsplit(admin_dsn)
    netloc = f"{quote(role, safe='')}:{quote(password, safe='')}@{parts.hostname or '127.0.0.1'}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


@dataclass(frozen=True)
class LocalMediaServer:
    id: str
    api_url: str
    credentials_file: Path | None = None

    def credentials(self) -> MediaMtxCredentials | None:
        """The API credentials from the file, when the server has one (and the file exists)."""
        if self.credentials_file is None or not self.credentials_file.is_file():
            return None
        return MediaMtxCredentials.parse(self.credentials_file.read_text(encoding="utf-8").strip())

    def registration(self) -> dict[str, str]:
        """This server as one entry of a `*_MEDIA_SERVERS` setting."""
        entry = {"api_url": self.api_url}
        if self.credentials_file is not None and self.credentials_file.is_file():
            entry["credentials_file"] = str(self.credentials_file)
        return entry


@dataclass(frozen=True)
class LocalStack:
    admin_dsn_file: Path
    admin_dsn: str
    kafka_bootstrap: str
    mediamtx_api_url: str
    media_servers: tuple[LocalMediaServer, ...] = field(default=())
    jaeger_query_url: str | None = None  # where the services' spans can be read back
    prometheus_url: str | None = None  # the Prometheus that scrapes the stack's services

    @classmethod
    def load(cls, local_dir: Path) -> LocalStack:
        env = read_env_file(local_dir / "stack.env")
        dsn_file = Path(env["YOVISION_PG_ADMIN_DSN_FILE"])
        url = env.get("YOVISION_MEDIAMTX_API_URL", "")
        if "YOVISION_MEDIA_SERVERS" in env:
            servers = tuple(
                LocalMediaServer(
                    server_id,
                    entry["api_url"],
                    Path(entry["credentials_file"]) if entry.get("credentials_file") else None,
                )
                for server_id, entry in sorted(json.loads(env["YOVISION_MEDIA_SERVERS"]).items())
            )
        else:
            credentials = env.get("YOVISION_MEDIAMTX_CREDENTIALS_FILE")
            servers = (LocalMediaServer(SINGLE_SERVER_ID, url, Path(credentials) if credentials else None),)
        return cls(
            admin_dsn_file=dsn_file,
            admin_dsn=dsn_file.read_text(encoding="utf-8").strip(),
            kafka_bootstrap=env["YOVISION_KAFKA_BOOTSTRAP"],
            mediamtx_api_url=url or servers[0].api_url,
            media_servers=servers,
            jaeger_query_url=env.get("YOVISION_JAEGER_QUERY_URL") or None,
            prometheus_url=env.get("YOVISION_PROMETHEUS_URL") or None,
        )

    @property
    def mediamtx(self) -> LocalMediaServer:
        """The first (for the local stack: the only) MediaMTX server."""
        return self.media_servers[0]

    def mediamtx_credentials(self) -> MediaMtxCredentials | None:
        return self.mediamtx.credentials()

    def media_servers_setting(self) -> str:
        """The `*_MEDIA_SERVERS` value registering every server of this stack (JSON)."""
        return json.dumps({server.id: server.registration() for server in self.media_servers})
