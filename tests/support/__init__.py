"""Helpers and fixtures shared by more than one test tier (unit, ports, contract, integration, e2e,
cluster, deploy). A tier imports from here, never from another tier; `tests/unit/test_test_tiers.py` checks
it. A conftest of a tier imports the fixtures it uses from here by name."""
