"""The native local stack as the rest of the code sees it: `.local/stack.env`, written by
`infra/scripts/stack.sh up`, names the admin DSN file, the Kafka bootstrap and the MediaMTX API URL.

Used by the dev-secrets tool, the test fixtures and the benchmarks; services never read it (they get their
settings from the environment).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

__all__ = ["LocalStack", "read_env_file", "runtime_dsn"]


def read_env_file(path: Path) -> dict[str, str]:
    """`KEY=VALUE` lines (shell style, no expansion); blank lines and `#` comments are skipped."""
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip().strip('"')
    return values


def runtime_dsn(admin_dsn: str, role: str, password: str) -> str:
    """The admin DSN's host, port and database with another role's credentials."""
    parts = urlsplit(admin_dsn)
    netloc = f"{quote(role, safe='')}:{quote(password, safe='')}@{parts.hostname or '127.0.0.1'}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


@dataclass(frozen=True)
class LocalStack:
    admin_dsn_file: Path
    admin_dsn: str
    kafka_bootstrap: str
    mediamtx_api_url: str

    @classmethod
    def load(cls, local_dir: Path) -> LocalStack:
        env = read_env_file(local_dir / "stack.env")
        dsn_file = Path(env["YOVISION_PG_ADMIN_DSN_FILE"])
        return cls(
            admin_dsn_file=dsn_file,
            admin_dsn=dsn_file.read_text(encoding="utf-8").strip(),
            kafka_bootstrap=env["YOVISION_KAFKA_BOOTSTRAP"],
            mediamtx_api_url=env.get("YOVISION_MEDIAMTX_API_URL", ""),
        )
