"""Each service is installed alone once per session (tests/deploy/alone.py), for every test that runs it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.deploy.alone import Installed, install_alone


@pytest.fixture(scope="session")
def alone(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Installed]:
    installs: dict[str, Installed] = {}

    def get(service: str) -> Installed:
        if service not in installs:
            installs[service] = install_alone(service, tmp_path_factory.mktemp(service))
        return installs[service]

    return get
