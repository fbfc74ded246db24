"""Every environment the test tooling builds confines signal-watcher's probes to loopback
(`SIGNAL_PROBE_ONLY_NETWORKS`), whatever its caller sets; the local stack of `make up` does not (users probe
real sites there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from signal_watcher.adapters.resolvers import ProbeResolver
from signal_watcher.settings import SignalWatcherSettings
from tests.unit.platform.test_devsecrets import make_stack
from yovision_platform.localstack import read_env_file
from yovision_platform.settings import load_settings
from yovision_platform.tools.devsecrets import DEFAULT_ENVIRONMENT, generate
from yovision_platform.tools.environment import (
    PROBE_CONFINEMENT_SETTING,
    PROBE_RESOLVER_SETTING,
    TEST_PROBE_ONLY_NETWORKS,
    TEST_PROBE_RESOLVER,
    TEST_SETTINGS,
    environment_definition,
)

CONFINEMENT = PROBE_CONFINEMENT_SETTING
RESOLVER = PROBE_RESOLVER_SETTING
PORTS = {"signal-watcher": 28084}


def signal_env(local: Path) -> dict[str, str]:
    return read_env_file(local / "env" / "signal-watcher.env")


def test_the_signal_settings_of_a_test_environment_confine_probes_to_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The settings object signal-watcher builds from the env file the tooling wrote is confined, and
    resolves probe names from the hosts file only."""
    assert TEST_SETTINGS == {CONFINEMENT: TEST_PROBE_ONLY_NETWORKS, RESOLVER: TEST_PROBE_RESOLVER}
    local = make_stack(tmp_path)
    generate(local, environment_definition("e2e-x", PORTS))
    for name, value in signal_env(local).items():
        monkeypatch.setenv(name, value)
    settings = load_settings(SignalWatcherSettings)
    assert [str(n) for n in settings.probe_guard.only_networks] == ["127.0.0.0/8", "::1/128"]
    assert settings.probe_resolver is ProbeResolver.HOSTS_FILE


@pytest.mark.parametrize(
    "settings",
    [None, {}, {"SIGNAL_PROBE_ALLOWED_NETWORKS": "127.0.0.1/32", "SENSE_DRIFT_CHECK_SECONDS": "0"}],
)
def test_every_test_environment_is_confined_whatever_its_caller_sets(
    tmp_path: Path, settings: dict[str, str] | None
) -> None:
    definition = environment_definition("e2e-x", PORTS, settings)
    assert definition.settings[CONFINEMENT] == TEST_PROBE_ONLY_NETWORKS
    local = make_stack(tmp_path)
    generate(local, definition)
    assert signal_env(local)[CONFINEMENT] == TEST_PROBE_ONLY_NETWORKS
    for other in ("sense-reconciler", "console"):  # only signal-watcher's env file carries it
        assert CONFINEMENT not in read_env_file(local / "env" / f"{other}.env")


def test_a_caller_may_narrow_the_confinement_but_never_lift_it() -> None:
    narrower = environment_definition("e2e-x", PORTS, {CONFINEMENT: "127.0.0.1/32"})
    assert narrower.settings[CONFINEMENT] == "127.0.0.1/32"
    for blank in ("", "  "):
        with pytest.raises(ValueError, match=CONFINEMENT):
            environment_definition("e2e-x", PORTS, {CONFINEMENT: blank})


@pytest.mark.parametrize("resolver", ["system", "", "hosts"])
def test_a_caller_cannot_let_test_probes_ask_dns(resolver: str) -> None:
    with pytest.raises(ValueError, match=RESOLVER):
        environment_definition("e2e-x", PORTS, {RESOLVER: resolver})


def test_the_local_stack_of_make_up_is_not_confined(tmp_path: Path) -> None:
    local = make_stack(tmp_path)
    generate(local, DEFAULT_ENVIRONMENT)
    assert CONFINEMENT not in signal_env(local) and RESOLVER not in signal_env(local)
