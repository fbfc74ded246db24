"""The PostgreSQL fixtures of signal-watcher's integration tests (a migrated schema, a runtime pool, a key
ring) and its local HTTP fixture server, for the contract suites here."""

from tests.integration.signal_watcher.conftest import cipher, fixture_server, pool, signal_db

__all__ = ["cipher", "fixture_server", "pool", "signal_db"]
