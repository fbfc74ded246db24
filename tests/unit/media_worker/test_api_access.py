"""Who may call media-worker's API, through its real routes on the fakes: the access tokens of the trusted
issuer (`LocalIssuer`, shaped as Hydra's) for the audience `media-worker` only, verified before an upload
route reads one byte of its body; the drain endpoints need `media:drain`, whoever holds it (an operator, or
a machine client)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from media_worker.entrypoints.api import DRAIN_PERMISSION
from media_worker.settings import AUDIENCE
from tests.support.media_uploads import BOUNDARY, init, multipart_body
from tests.support.stack import problem_code
from tests.unit.media_worker.conftest import ISSUER, OWNER, Fakes

FOREIGN_AUDIENCE = "signal-watcher"


class CountedBody:
    """A streamed request body that counts the bytes the app read of it."""

    def __init__(self, content: bytes) -> None:
        self.content = content
        self.read = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.content), 100):
            piece = self.content[start : start + 100]
            self.read += len(piece)
            yield piece


async def test_a_token_for_another_service_is_refused_before_any_upload_byte_is_read(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    foreign = fakes.auth(OWNER, DRAIN_PERMISSION, audience=FOREIGN_AUDIENCE)
    multipart = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    plain = CountedBody(multipart_body(b"v" * 1000))
    length = {"Content-Length": str(len(plain.content))}
    refused = await client.post("/v1/materials", content=plain, headers={**foreign, **multipart, **length})
    assert (refused.status_code, problem_code(refused)) == (401, "unauthorized")
    assert refused.headers["www-authenticate"] == "Bearer"
    session = (await init(client, fakes, 2000, 1000)).json()
    chunk = CountedBody(b"c" * 1000)
    put = await client.put(
        f"/v1/uploads/{session['session_id']}/chunks/0",
        content=chunk,
        headers={**foreign, "Content-Length": "1000"},
    )
    assert (put.status_code, problem_code(put)) == (401, "unauthorized")
    assert (plain.read, chunk.read) == (0, 0)
    assert fakes.storage.files == {} and fakes.activity.uploads == 0
    for method, path in [("GET", "/v1/materials"), ("GET", "/internal/drain"), ("POST", "/internal/drain")]:
        answer = await client.request(method, path, headers=foreign)
        assert (answer.status_code, problem_code(answer)) == (401, "unauthorized"), path
    assert fakes.activity.draining is False

    accepted = CountedBody(plain.content)
    own = await client.post(
        "/v1/materials", content=accepted, headers={**fakes.auth(), **multipart, **length}
    )
    assert own.status_code == 201, own.text  # the same upload with this service's token is read and stored
    assert accepted.read == len(plain.content) and len(fakes.storage.files) == 1


async def test_the_drain_endpoints_need_media_drain_from_a_user_or_a_machine_client(
    client: httpx.AsyncClient, fakes: Fakes
) -> None:
    lacking = await client.get("/internal/drain", headers=fakes.auth("ops", "signal:read"))
    assert (lacking.status_code, problem_code(lacking)) == (403, "forbidden")
    machine = await ISSUER.machine_token("operator-cli", [DRAIN_PERMISSION], [AUDIENCE])
    report = await client.get("/internal/drain", headers={"Authorization": f"Bearer {machine}"})
    assert report.status_code == 200 and report.json()["draining"] is False
    assert (await client.get("/internal/drain", headers=fakes.operator)).status_code == 200
