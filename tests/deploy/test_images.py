"""Each Dockerfile builds one service from the repository root, as a non-root user, with a healthcheck, and
matches what the chart expects of the image (user, port, entrypoint)."""

from __future__ import annotations

import json

import pytest

from tests.deploy.chart import REPO_ROOT, SETTINGS, containers, pod_spec
from tests.deploy.dockerfiles import dockerfile
from tests.deploy.renders import rendered

SERVICES = tuple(SETTINGS)


@pytest.mark.parametrize("service", SERVICES)
def test_the_image_installs_only_its_service_from_the_repository_root(service: str) -> None:
    image = dockerfile(service)
    sources = {source for source, _ in image.build_copies}
    assert sources == {
        "pyproject.toml",
        "uv.lock",
        "libs/platform/pyproject.toml",
        f"services/{service}/pyproject.toml",
        "libs/platform",
        f"services/{service}",
    }
    assert all((REPO_ROOT / source).exists() for source in sources)  # paths relative to the repository root
    sync = image.final_uv_sync
    assert sync[:2] == ["uv", "sync"]
    assert {"--frozen", "--no-dev", "--no-editable"} <= set(sync)
    assert sync[sync.index("--package") + 1] == service
    # the final stage takes the virtualenv only, never the sources; the console its front-end assets
    final = (
        ["--from=assets /src/node_modules /app/assets"] if service == "console" else ["schemas /app/schemas"]
    )
    assert image.instructions(-1, "COPY") == ["--from=build /app/.venv /app/.venv", *final]


def test_the_consoles_assets_are_its_locked_runtime_dependencies() -> None:
    image = dockerfile("console")
    (copy,) = image.instructions(0, "COPY")
    assert copy == "services/console/package.json services/console/package-lock.json ./"
    (install,) = image.instructions(0, "RUN")
    assert install.startswith("npm ci --omit=dev")  # htmx; axe-core is for the browser tests only
    assert image.final_env["CONSOLE_ASSETS_DIR"] == "/app/assets"


@pytest.mark.parametrize("service", SERVICES)
def test_the_image_runs_as_the_charts_non_root_user_with_a_healthcheck(service: str) -> None:
    image = dockerfile(service)
    (user,) = image.instructions(-1, "USER")
    assert user == "10001:10001"
    (healthcheck,) = image.instructions(-1, "HEALTHCHECK")
    cls = SETTINGS[service]
    assert "/healthz" in healthcheck and cls.env_var_name("http_port") in healthcheck
    (entrypoint,) = image.instructions(-1, "ENTRYPOINT")
    assert json.loads(entrypoint) == [service]
    port = cls.model_fields["http_port"].default
    assert image.instructions(-1, "EXPOSE") == [str(port)]
    env = image.final_env
    assert env[cls.env_var_name("http_port")] == str(port)
    assert env[cls.env_var_name("http_host")] == "0.0.0.0"  # noqa: S104 - inside its own network namespace
    if service != "console":  # the Avro contracts; the console has no Kafka
        assert env["YOVISION_SCHEMAS_DIR"] == "/app/schemas"
    deployment = rendered("production").deployments()[service]
    assert pod_spec(deployment)["securityContext"]["runAsUser"] == int(user.split(":")[0])
    (container,) = containers(deployment)
    assert container["image"].split("/")[-1].split(":")[0] == service


def dockerignore_allows(path: str) -> bool:
    """.dockerignore's allow-list (`*`, then `!entry` lines): is `path` in the build context?"""
    lines = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    allowed = [line[1:].rstrip("/") for line in lines if line.startswith("!")]
    return any(path == entry or path.startswith(entry + "/") for entry in allowed)


@pytest.mark.parametrize("service", SERVICES)
def test_everything_the_image_copies_is_in_the_build_context(service: str) -> None:
    image = dockerfile(service)
    sources = image.context_sources
    assert all(dockerignore_allows(source) for source in sources), sources
    assert not dockerignore_allows(".local/secrets") and not dockerignore_allows(".venv")
