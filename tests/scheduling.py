"""How `make test` spreads the suite over its pytest-xdist workers (`-n WORKERS --dist loadgroup`).

A pytest plugin (registered by tests/conftest.py) that gives xdist a scheduler of our own, through xdist's
`pytest_xdist_make_scheduler` hook. (xdist's own `loadgroup` does not group under pytest 9: it renames
`item._nodeid`, which pytest 9 no longer reads.) The unit of work handed to a worker is:

- for the end-to-end tier, an environment: every flow of a group runs on one worker, in order, over that
  worker's session-wide environment (started once, each flow checking the whole environment's health
  after it). `E2E_GROUPS` splits the flows into two environments of about equal length;
- for every other tier, a module, so that a module-scoped fixture (a migrated schema, a topic, a
  process) is set up once.

The end-to-end groups and the services' failover on a cluster (`LONG_MODULES`) are the longest units by
far, so they are collected (and handed out) first: three workers run them from the start while the others
work through the remaining modules.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

E2E_TIER = "tests/e2e/"
# By test module name (without `.py`); a module not named here is in the "flows" group.
E2E_GROUPS = {
    "test_api_contracts": "e2e-contracts-and-observability",
    "test_rotation": "e2e-contracts-and-observability",
    "test_identity": "e2e-contracts-and-observability",
    "test_tracing": "e2e-contracts-and-observability",
    "test_console_traces": "e2e-contracts-and-observability",
    "test_alerts": "e2e-contracts-and-observability",
}
E2E_DEFAULT_GROUP = "e2e-flows"
LONG_MODULES = ("tests/cluster/test_services_failover.py",)


def work_unit(nodeid: str) -> str:
    module = nodeid.split("::", 1)[0]
    if not module.startswith(E2E_TIER):
        return module
    name = module.removeprefix(E2E_TIER).removesuffix(".py")
    return E2E_GROUPS.get(name, E2E_DEFAULT_GROUP)


class SuiteScheduling(LoadScopeScheduling):
    """xdist's load-by-scope scheduling, in collection order, with `work_unit` as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> SuiteScheduling | None:
    if config.getvalue("dist") != "loadgroup":
        return None
    config.option.loadscopereorder = False  # collection order: the end-to-end groups first
    return SuiteScheduling(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The end-to-end tests and the long modules first (stable: each tier keeps its order), in every process
    alike."""
    items.sort(key=lambda item: not item.nodeid.startswith((E2E_TIER, *LONG_MODULES)))
