"""The MediaMTX servers a service works with: an operator-registered fleet, each server with an id.

Registration (env, prefix ``P_``), one of two forms:

- ``P_MEDIA_SERVERS``: a JSON object ``{"<id>": {"api_url": "http://host:9997", "credentials_file":
  "/run/secrets/mtx-a"}}``; ``credentials_file`` is optional and holds one ``user:password`` line of a
  MediaMTX user with the ``api`` permission (the usual secret-file rules apply);
- ``P_MEDIAMTX_API_URL`` (+ optional ``P_MEDIAMTX_CREDENTIALS_FILE``): one server with the id
  :data:`SINGLE_MEDIA_SERVER_ID` (what a deployment from before the fleet had, and what existing rows are
  assigned to).

A server id (:data:`MEDIA_SERVER_ID_PATTERN`) is chosen by the operator and validated, so it may label
metrics and appear in events and reports; a URL never does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from yovision_platform.errors import ConfigError, ConfigProblem
from yovision_platform.mediamtx import MediaMtxCredentials, MediaMtxError, validate_api_url
from yovision_platform.settings import BaseServiceSettings, read_secret_file

__all__ = [
    "MAX_MEDIA_SERVERS",
    "MEDIA_SERVER_ID_PATTERN",
    "SINGLE_MEDIA_SERVER_ID",
    "FleetClient",
    "MediaFleet",
    "MediaServer",
    "MediaServerEntry",
    "MediaServerSettings",
    "validate_media_server_id",
]

MEDIA_SERVER_ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
SINGLE_MEDIA_SERVER_ID = "default"
MAX_MEDIA_SERVERS = 64


class FleetClient(Protocol):
    """What a fleet needs of each server's client: `MediaMtxApi`, or a service's in-memory fake of it."""

    @property
    def deadline_seconds(self) -> float: ...

    async def aclose(self) -> None: ...


C = TypeVar("C", bound=FleetClient, covariant=True)


def validate_media_server_id(value: str) -> str:
    if MEDIA_SERVER_ID_PATTERN.fullmatch(value) is None:
        raise ValueError("media server ids must match ^[a-z0-9][a-z0-9-]{0,31}$")
    return value


@dataclass(frozen=True)
class MediaServer:
    """One registered MediaMTX server: its id, Control API base URL and (optional) API credentials."""

    id: str
    api_url: str
    credentials: MediaMtxCredentials | None = None

    def __repr__(self) -> str:
        return f"MediaServer(id={self.id!r}, authenticated={self.credentials is not None})"


class MediaServerEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    api_url: str
    credentials_file: Path | None = None

    @field_validator("api_url")
    @classmethod
    def _api_url_is_http(cls, value: str) -> str:
        return validate_api_url(value)


class MediaServerSettings(BaseServiceSettings):
    """Settings of a service that talks to MediaMTX (see the module docstring)."""

    media_servers: dict[str, MediaServerEntry] = Field(default_factory=dict)
    mediamtx_api_url: str | None = None
    mediamtx_credentials_file: Path | None = None

    _media_server_list: tuple[MediaServer, ...] | None = PrivateAttr(default=None)

    @field_validator("mediamtx_api_url")
    @classmethod
    def _mediamtx_url_is_http(cls, value: str | None) -> str | None:
        return None if value is None else validate_api_url(value)

    @field_validator("media_servers")
    @classmethod
    def _ids_are_valid(cls, value: dict[str, MediaServerEntry]) -> dict[str, MediaServerEntry]:
        if len(value) > MAX_MEDIA_SERVERS:
            raise ValueError(f"at most {MAX_MEDIA_SERVERS} media servers")
        for server_id in value:
            validate_media_server_id(server_id)
        return value

    @model_validator(mode="after")
    def _one_registration_form(self) -> MediaServerSettings:
        # ConfigError (not ValueError) so that the error names the settings, not the model
        single = self.mediamtx_api_url is not None or self.mediamtx_credentials_file is not None
        forms = (self.env_var_name("media_servers"), self.env_var_name("mediamtx_api_url"))
        if single == bool(self.media_servers):
            reason, detail = (
                ("conflicting", "register the servers in one form only")
                if single
                else ("missing", "no MediaMTX server registered (one of the two forms is required)")
            )
            raise ConfigError.from_problems(ConfigProblem(setting, reason, detail) for setting in forms)
        if single and self.mediamtx_api_url is None:
            raise ConfigError(
                self.env_var_name("mediamtx_api_url"), "missing", "needed by the credentials file"
            )
        return self

    def _entries(self) -> Iterator[tuple[str, str, Path | None, str]]:
        """(id, url, credentials file, the env var naming that file) per server, sorted by id."""
        if self.mediamtx_api_url is not None:
            setting = self.env_var_name("mediamtx_credentials_file")
            yield SINGLE_MEDIA_SERVER_ID, self.mediamtx_api_url, self.mediamtx_credentials_file, setting
            return
        for server_id, entry in sorted(self.media_servers.items()):
            setting = f"{self.env_var_name('media_servers')}[{server_id}][credentials_file]"
            yield server_id, entry.api_url, entry.credentials_file, setting

    def load_secret_files(self) -> None:
        super().load_secret_files()
        servers = []
        for server_id, url, credentials_file, setting in self._entries():
            credentials = None
            if credentials_file is not None:
                text = read_secret_file(credentials_file, setting).get_secret_value()
                try:
                    credentials = MediaMtxCredentials.parse(text)
                except ValueError:
                    raise ConfigError(
                        setting, "credentials_malformed", "expected one user:password line"
                    ) from None
            servers.append(MediaServer(server_id, url, credentials))
        self._media_server_list = tuple(servers)

    @property
    def media_server_list(self) -> tuple[MediaServer, ...]:
        """The registered servers with their credentials (read by ``load_secret_files``), sorted by id."""
        if self._media_server_list is None:
            self.load_secret_files()
        assert self._media_server_list is not None
        return self._media_server_list

    @property
    def media_server_ids(self) -> frozenset[str]:
        return frozenset(server_id for server_id, *_ in self._entries())


class MediaFleet(Generic[C]):
    """One MediaMTX client per registered server. `client` raises MediaMtxError(media_server_not_registered)
    for an id that is not registered (a site still assigned to a server the operator removed)."""

    def __init__(self, clients: Mapping[str, C]) -> None:
        if not clients:
            raise ValueError("a media fleet needs at least one server")
        for server_id in clients:
            validate_media_server_id(server_id)
        self._clients = dict(sorted(clients.items()))

    @classmethod
    def connect(cls, servers: tuple[MediaServer, ...], factory: Callable[[MediaServer], C]) -> MediaFleet[C]:
        return cls({server.id: factory(server) for server in servers})

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self._clients)

    def __contains__(self, server_id: object) -> bool:
        return server_id in self._clients

    def client(self, server_id: str) -> C:
        try:
            return self._clients[server_id]
        except KeyError:
            raise MediaMtxError("media_server_not_registered") from None

    def items(self) -> list[tuple[str, C]]:
        return list(self._clients.items())

    @property
    def deadline_seconds(self) -> float:
        """The longest call deadline of any server's client."""
        return max(client.deadline_seconds for client in self._clients.values())

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
